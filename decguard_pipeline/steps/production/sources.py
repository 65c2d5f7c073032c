"""Where a day's production records come from: a records file under the production
directory, else the rows producers wrote to ``production_inbox``; and which days have records,
ingested records or a stored check."""

from __future__ import annotations

import os
import re
from datetime import date
from pathlib import Path

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.contract.production import ProductionExtension
from decguard_pipeline.core.production.extensions import settings_of
from decguard_pipeline.steps.contracts import project_root
from decguard_pipeline.warehouse import Warehouse

ENV_DIR = "DECGUARD_PRODUCTION"
INBOX = "production_inbox"
RECORDS = "production_records"
FILE, TABLE = "file", "table"
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


def production_root() -> Path:
    """``$DECGUARD_PRODUCTION``, else ``data/production`` under the project root."""
    return Path(os.environ.get(ENV_DIR) or project_root() / "data" / "production")


def parse_day(text: str) -> date | None:
    """A ``YYYY-MM-DD`` name as a date, None for anything else."""
    match = _DAY.match(text)
    if match is None:
        return None
    try:
        return date(*map(int, match.groups()))
    except ValueError:
        return None


def day_before(day: str) -> date:
    return date.fromordinal(date.fromisoformat(day).toordinal() - 1)


def day_file(contract: str, day: str) -> Path:
    return production_root() / contract / f"{day}.jsonl"


def file_days(contract: str) -> list[str]:
    """Days with a records file for a contract, oldest first."""
    folder = production_root() / contract
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.jsonl") if parse_day(p.stem) and p.is_file())


def days_of(warehouse: Warehouse, table: str, contract: str) -> list[str]:
    """The days with rows of ``table`` for a contract, oldest first."""
    return [day for day in warehouse.targets(table, contract) if parse_day(day)]


def inbox_days(contract: str, warehouse: Warehouse) -> list[str]:
    """Days for which producers wrote ``production_inbox`` rows, oldest first."""
    return days_of(warehouse, INBOX, contract)


def stored_days(contract: str, warehouse: Warehouse) -> list[str]:
    """Days whose records were ingested (``production_records`` written), oldest first."""
    return days_of(warehouse, RECORDS, contract)


def checked_days(contract: str, warehouse: Warehouse) -> list[str]:
    """Days with a stored check (``production_runs`` written), oldest first."""
    return days_of(warehouse, "production_runs", contract)


def has_inbox(warehouse: Warehouse, contract: str, day: str) -> bool:
    """Whether producers wrote ``production_inbox`` rows for a contract and day."""
    found = warehouse.query(
        f"SELECT count(*) AS n FROM {INBOX} WHERE contract = $c AND target = $d",
        {"c": contract, "d": day},
    )
    return bool(found.column("n")[0].as_py())


def record_days(contract: str, warehouse: Warehouse) -> list[str]:
    """Days with records to ingest (a file or ``production_inbox`` rows), oldest first."""
    return sorted(set(file_days(contract)) | set(inbox_days(contract, warehouse)))


def has_records(contract: str, day: str, warehouse: Warehouse) -> bool:
    return day_file(contract, day).is_file() or has_inbox(warehouse, contract, day)


def inbox_ref(contract: str, day: str) -> str:
    return f"warehouse:{INBOX}/{contract}/{day}"


def settings(loaded: LoadedContract) -> ProductionExtension:
    return settings_of(loaded) or ProductionExtension()
