"""Find the contracts the project evaluates: one folder per contract under the contracts root."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from decguard_pipeline.core.contract import LoadedContract, load_contract
from decguard_pipeline.core.errors import DecGuardError

CONTRACT_FILE = "decguard.yaml"
ENV_CONTRACTS = "DECGUARD_CONTRACTS"
_KEY = re.compile(r"[^A-Za-z0-9_]")


def project_root() -> Path:
    """The working directory when it holds ``data/contracts``, else the source checkout."""
    cwd = Path.cwd()
    if (cwd / "data" / "contracts").is_dir():
        return cwd
    return Path(__file__).resolve().parents[2]


def contract_key(path: Path) -> str:
    """Asset-key-safe name: the directory of a ``decguard.yaml``, else the file stem. It
    depends on that name alone (never on the other contracts), so a contract keeps its key,
    and with it its history, whatever is added or removed beside it."""
    name = path.parent.name if path.name == CONTRACT_FILE else path.stem
    key = _KEY.sub("_", name).strip("_") or "contract"
    return key if not key[0].isdigit() else f"c_{key}"


@dataclass
class ContractEntry:
    """A contract as the pipeline knows it: ``loaded`` is what definitions were built from
    (asset groups, gate checks); ``require()`` re-reads the file when it changed, so a run
    always evaluates the contract as it is on disk now."""

    key: str
    path: Path
    loaded: LoadedContract | None
    error: str | None = None
    _stamp: tuple[float, int] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.loaded is not None

    def _file_stamp(self) -> tuple[float, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return (stat.st_mtime, stat.st_size)

    def require(self) -> LoadedContract:
        stamp = self._file_stamp()
        if self._stamp is None:
            self._stamp = stamp
        elif stamp != self._stamp:
            self._stamp = stamp
            self.loaded, self.error = load_contract(self.path), None  # raises when broken now
        if self.loaded is None:
            raise DecGuardError(self.error or f"{self.path}: contract did not load")
        return self.loaded


def contract_paths(spec: str | None = None) -> list[Path]:
    """``spec`` (or ``$DECGUARD_CONTRACTS``): paths separated by ``os.pathsep``, each a
    contract file or a directory searched for ``*/decguard.yaml``; default data/contracts."""
    spec = spec if spec is not None else os.environ.get(ENV_CONTRACTS)
    roots = (
        [Path(p) for p in spec.split(os.pathsep) if p]
        if spec
        else [project_root() / "data" / "contracts"]
    )
    found: list[Path] = []
    for root in roots:
        if root.is_dir():
            direct = root / CONTRACT_FILE
            found += [direct] if direct.is_file() else _contract_files(root)
        else:
            found.append(root)
    return found


def _contract_files(root: Path) -> list[Path]:
    """``*/decguard.yaml`` under ``root``, a broken or looping link included (a glob drops
    it silently; loading it then says what is wrong)."""
    return sorted(
        folder / CONTRACT_FILE
        for folder in root.iterdir()
        if folder.is_dir() and os.path.lexists(folder / CONTRACT_FILE)
    )


def _where(path: Path) -> str:
    """What names a contract for a person: its folder, or the file when not a decguard.yaml."""
    return str(path.parent if path.name == CONTRACT_FILE else path)


def _identity(path: Path) -> Path:
    """The file a path names, links followed; a path whose links loop (or cannot be
    followed) names itself: loading it then fails with the system's message."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: "Symlink loop" (Python before 3.13)
        return path.absolute()


def _collision_key(key: str, path: Path) -> str:
    """A key for a contract refused for a collision: unique (from its own path) so that each
    refused contract still shows as its own broken asset."""
    digest = hashlib.sha256(str(_identity(path)).encode()).hexdigest()[:8]
    return f"{key}__collision_{digest}"


def discover_contracts(spec: str | None = None) -> list[ContractEntry]:
    """Every contract, loaded; a broken one is kept with its error so the others still load.

    Contracts whose folder names give the same key are all refused (each a broken entry
    naming every folder involved): numbering them would make a key depend on which other
    folders exist, so that removing one folder handed its key and history to another."""
    paths: list[Path] = []
    seen: set[Path] = set()
    for path in contract_paths(spec):  # the same file listed twice is one contract
        resolved = _identity(path)
        if resolved not in seen:
            seen.add(resolved)
            paths.append(path)
    claims: dict[str, list[Path]] = {}
    for path in paths:
        claims.setdefault(contract_key(path), []).append(path)
    entries: list[ContractEntry] = []
    for path in paths:
        key = contract_key(path)
        if len(claims[key]) > 1:
            folders = ", ".join(repr(_where(p)) for p in sorted(claims[key], key=_where))
            error = (
                f"{_where(path)}: contract key {key!r} is claimed by {len(claims[key])} "
                f"contracts ({folders}); rename all but one of them (a key comes from the "
                "folder name alone and names the contract's history in the warehouse)"
            )
            entries.append(ContractEntry(_collision_key(key, path), path, None, error))
            continue
        try:
            entries.append(ContractEntry(key, path, load_contract(path)))
        except DecGuardError as exc:
            entries.append(ContractEntry(key, path, None, str(exc)))
    return entries
