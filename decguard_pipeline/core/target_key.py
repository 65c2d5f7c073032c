"""The one rule that names a target: ``<backend>@<model version>``, the partition key of every
evaluation asset, of the response cache's answers (the pipeline's and the command line's) and
the ``target`` a calibrator names. A backend that reports no version is named by its model,
else ``unversioned``; the version is made safe as a key segment."""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_VERSION_CHARS = 64
UNVERSIONED = "unversioned"


def sanitise_version(version: str) -> str:
    """A version as a key segment: ``[A-Za-z0-9._-]``, at most 64 characters. A version that
    had to change (unsafe characters replaced, or cut) is suffixed with a short hash of the
    original, so that two versions never share a key (``a/b`` and ``a-b``)."""
    clean = _UNSAFE.sub("-", version).strip("-.") or UNVERSIONED
    if clean == version and len(clean) <= MAX_VERSION_CHARS:
        return clean
    digest = hashlib.sha256(version.encode()).hexdigest()[:8]
    return f"{clean[: MAX_VERSION_CHARS - 9]}-{digest}"


def target_key(backend: str, version: str | None, model: str | None = None) -> str:
    """``<backend>@<version>``: the model version, else the model's name, else
    ``unversioned``, as a safe key segment."""
    return f"{backend}@{sanitise_version(version or model or UNVERSIONED)}"


def backend_of(key: str) -> str:
    """The contract backend name of a target key (backend names cannot contain ``@``)."""
    return key.split("@", 1)[0]
