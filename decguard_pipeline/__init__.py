"""decguard_pipeline: DecGuard 0.1-compatible evaluation of decision models, as a Dagster project.

The package is layered (imports point down only): ``core`` (pure domain), ``backends``
(model calls), ``warehouse`` (Parquet + DuckDB), ``defs`` (Dagster wiring) and ``cli``.
"""

__version__ = "0.1.0"

# What reports record in DecGuard's ``decguard_version`` field: the producer and its version.
PRODUCER_VERSION = f"pipeline-{__version__}"

# The command users type; hints in our output name it where DecGuard's name `decguard`.
PROGRAM = "decguard-pipeline"


def __getattr__(name: str) -> object:
    # ``decguard_pipeline.DecGuard`` without importing the backends on every package import
    if name == "DecGuard":
        from decguard_pipeline.sdk import DecGuard

        return DecGuard
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
