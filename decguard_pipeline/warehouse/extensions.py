"""DuckDB's extensions for the warehouse, loaded from the wheels pip installed.

DuckLake (``ducklake``) and the catalog's database (``sqlite_scanner`` for a catalog file,
``postgres_scanner`` for PostgreSQL) are DuckDB extensions; ``httpfs`` reads and writes
``s3://``. DuckDB would download them on first use; here they come as Python packages
(``duckdb-extension-<name>``, built for one DuckDB release, which pyproject.toml pins DuckDB
to), so a machine without access to DuckDB's extension site installs them like any other
dependency, and each process loads them by path.

A connection that loads them allows unsigned extensions: DuckDB would otherwise hash each
extension file against its signature at every load (~75 MB for ducklake and sqlite_scanner,
a quarter of a second of CPU per process), while pip already checked the wheels' hashes.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from decguard_pipeline.warehouse.locations import StorageError

if TYPE_CHECKING:
    import duckdb

# extension -> (the Python package holding its file, the extra that installs it)
PACKAGES = {
    "ducklake": ("duckdb_extension_ducklake", None),
    "sqlite_scanner": ("duckdb_extension_sqlite_scanner", None),
    "postgres_scanner": ("duckdb_extension_postgres_scanner", "postgres"),
    "httpfs": ("duckdb_extension_httpfs", "s3"),
}
# what a connection needs set before it loads them by path
CONFIG = {"allow_unsigned_extensions": "true"}


def extension_file(name: str) -> Path:
    """The file of extension ``name`` for the running DuckDB (StorageError, naming what to
    install, when its package is missing or built for another DuckDB)."""
    import duckdb

    package, extra = PACKAGES[name]
    dist = package.replace("_", "-")
    install = f"pip install 'decguard-pipeline[{extra}]'" if extra else f"pip install {dist}"
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StorageError(f"the warehouse needs DuckDB's {name} extension: {install}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    path = folder / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.is_file():
        built = sorted(p.name for p in folder.glob("v*"))
        raise StorageError(
            f"{dist} is built for DuckDB {', '.join(built) or '?'}, not for the installed "
            f"DuckDB {duckdb.__version__}: install the versions pyproject.toml pins"
        )
    return path


def load(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    """Load extensions into ``con`` (made with ``CONFIG``) from their files."""
    for name in names:
        con.execute(f"LOAD '{_sql_text(str(extension_file(name)))}'")


def load_statements(*names: str) -> list[str]:
    """The ``LOAD`` statements of a plain ``duckdb`` shell started with
    ``-unsigned`` (``decguard-pipeline warehouse shell`` prints them)."""
    return [f"LOAD '{_sql_text(str(extension_file(name)))}';" for name in names]


def _sql_text(text: str) -> str:
    return text.replace("'", "''")


def check(names: tuple[str, ...] = ("ducklake", "sqlite_scanner")) -> list[str]:
    """Load each extension into a fresh DuckDB from its wheel (StorageError naming what to
    install when one is missing or built for another DuckDB); their files."""
    import duckdb

    con = duckdb.connect(config=dict(CONFIG))
    try:
        load(con, *names)
    finally:
        con.close()
    return [str(extension_file(name)) for name in names]
