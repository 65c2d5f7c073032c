"""The install step's check (``make install``, the Dockerfile): DuckDB's extensions load from
their wheels, offline, into the installed DuckDB.

    python -m decguard_pipeline.warehouse.check_install [extension ...]
"""

from __future__ import annotations

import sys

from decguard_pipeline.warehouse.extensions import check
from decguard_pipeline.warehouse.locations import StorageError


def main(names: list[str]) -> int:
    try:
        for line in check(tuple(names) or ("ducklake", "sqlite_scanner")):
            print(f"loaded {line}")
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
