"""Backends: one interface for every decision-model provider, and a concurrent runner.

No Dagster here. Network I/O happens only when a run starts, never when a backend is built,
so ``validate`` works offline.
"""

from decguard_pipeline.backends.base import Backend, backend_settings
from decguard_pipeline.backends.python import CallableBackend
from decguard_pipeline.backends.registry import available_providers, backend_class, create_backend

__all__ = [
    "Backend",
    "CallableBackend",
    "available_providers",
    "backend_class",
    "backend_settings",
    "create_backend",
]
