"""What a compaction is asked (``Settings``: ages, retention, delays, dry run) and what it
did (``Result`` per table, and the table ``warehouse compact`` prints); warehouse/compaction.py
runs it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from decguard_pipeline.core.errors import DecGuardError


@dataclass(frozen=True)
class Settings:
    """How compaction runs. Defaults bound a partition to its months of history plus a day
    of writes (docs/warehouse.md#compaction)."""

    older_than_days: float = 1.0  # writes at least this old are merged
    keep_days: float | None = None  # retention: delete writes older than this (off)
    activation_delay_s: float = 5.0  # a new manifest takes effect this long after publication
    grace_s: float = 60.0  # replaced files are deleted this long after it took effect
    dry_run: bool = False  # only report what would be merged
    wait: bool = True  # wait for the new manifests, then delete what they replaced
    # the calendar that ages are measured on (tests pass a fixed day); manifest activation
    # and grace periods are measured on the real clock, which concurrent readers share
    today: Callable[[], datetime] = field(default=lambda: datetime.now(UTC), repr=False)

    def __post_init__(self) -> None:
        if self.older_than_days < 0:
            raise DecGuardError("older-than-days must not be negative")
        if self.keep_days is not None and self.keep_days < self.older_than_days:
            raise DecGuardError(
                f"keep-days ({self.keep_days:g}) must be at least older-than-days "
                f"({self.older_than_days:g}): only writes old enough to compact are deleted"
            )


@dataclass
class TableResult:
    files_before: int = 0  # files a reader counted before
    files_after: int = 0  # files a reader counts after (the plan's estimate on a dry run)
    writes_merged: int = 0  # write files merged into compacted files
    compacted_written: int = 0
    writes_dropped: int = 0  # writes deleted by retention
    deleted: int = 0  # files deleted after the grace period


@dataclass
class Result:
    tables: dict[str, TableResult] = field(default_factory=dict)
    dry_run: bool = False
    waited_s: float = 0.0

    @property
    def files_before(self) -> int:
        return sum(t.files_before for t in self.tables.values())

    @property
    def files_after(self) -> int:
        return sum(t.files_after for t in self.tables.values())

    def render(self) -> str:
        verb = "would merge" if self.dry_run else "merged"
        lines = [
            f"{'table':<24} {'files before':>12} {'after':>7} {verb:>13} {'written':>8} "
            f"{'dropped':>8} {'deleted':>8}"
        ]
        for name, t in self.tables.items():
            if t.files_before or t.deleted:
                lines.append(
                    f"{name:<24} {t.files_before:>12} {t.files_after:>7} {t.writes_merged:>13} "
                    f"{t.compacted_written:>8} {t.writes_dropped:>8} {t.deleted:>8}"
                )
        lines.append(
            f"{'all tables':<24} {self.files_before:>12} {self.files_after:>7} "
            f"{sum(t.writes_merged for t in self.tables.values()):>13} "
            f"{sum(t.compacted_written for t in self.tables.values()):>8} "
            f"{sum(t.writes_dropped for t in self.tables.values()):>8} "
            f"{sum(t.deleted for t in self.tables.values()):>8}"
        )
        return "\n".join(lines)
