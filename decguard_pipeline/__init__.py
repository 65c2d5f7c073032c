"""decguard_pipeline: DecGuard 0.1-compatible evaluation of decision models, as a Dagster project.

The package is layered (imports point down only, checked by ``lint-imports``): ``core`` (pure
domain), ``backends`` / ``warehouse`` / ``demo`` (model calls, Parquet + DuckDB, a demo
model), ``runs`` (one evaluation), ``steps`` / ``sdk`` (what assets and applications call),
``defs`` (Dagster wiring), ``cli``. See docs/architecture.md.
"""

from decguard_pipeline.core.product import PRODUCER_VERSION, PROGRAM, __version__

__all__ = ["PRODUCER_VERSION", "PROGRAM", "DecGuard", "DecisionContract", "__version__"]


def __getattr__(name: str) -> object:
    # ``decguard_pipeline.DecGuard`` without importing the backends on every package import
    if name == "DecGuard":
        from decguard_pipeline.sdk import DecGuard

        return DecGuard
    # the Dagster component type ``decguard_pipeline.DecisionContract`` (the
    # ``dagster_dg_cli.registry_modules`` entry point names this package): Dagster is imported
    # only when it is asked for
    if name == "DecisionContract":
        from decguard_pipeline.defs.component import DecisionContract

        return DecisionContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The lazy names too: Dagster's registry lists a module's components with ``dir``."""
    return sorted({*globals(), "DecGuard", "DecisionContract"})
