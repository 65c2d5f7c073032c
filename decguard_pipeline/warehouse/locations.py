"""Warehouse locations: a ``pathlib.Path`` on the local disk, or an ``ObjectPath``
(``s3://bucket/prefix/...``) with the few ``Path`` operations the
warehouse uses (``/``, ``name``, ``parent``, name order), and ``location()``, which reads a
root as the user gives it and refuses one that carries anything secret."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from decguard_pipeline.core.errors import DecGuardError

# Object stores by URL scheme: the fsspec package serving it and the extra that installs it.
SCHEMES = {"s3": ("s3fs", "s3")}
ALIASES = {"s3a": "s3"}


class StorageError(DecGuardError):
    """A warehouse location that cannot be used (bad URL, client library missing)."""


@dataclass(frozen=True, order=True)
class ObjectPath:
    """``<scheme>://<bucket>/<key>``: an object, or a prefix ("folder"), in an object store."""

    scheme: str
    key: str  # bucket/prefix/..., no leading or trailing slash

    def __truediv__(self, part: str) -> ObjectPath:
        return ObjectPath(self.scheme, f"{self.key}/{part.strip('/')}")

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        name = self.name
        return name[name.rfind(".") :] if "." in name.lstrip(".") else ""

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.scheme, self.key.rsplit("/", 1)[0]) if "/" in self.key else self

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.key.split("/"))

    def __str__(self) -> str:
        return f"{self.scheme}://{self.key}"


Location = Path | ObjectPath


def location(root: str | os.PathLike[str]) -> Location:
    """A warehouse root as given by ``$DECGUARD_WAREHOUSE`` or ``--warehouse``: a local path
    (made absolute), or ``s3://bucket/prefix``. A URL carrying
    credentials, a port, a query or a fragment is refused: the location is written into the
    catalog and Dagster's run config, so it must hold nothing secret; the endpoint and the
    keys come from the environment."""
    text = os.fspath(root)
    if "://" not in text:
        return Path(text).resolve()
    parts = urlsplit(text)
    scheme = ALIASES.get(parts.scheme.lower(), parts.scheme.lower())
    if scheme == "file":
        return Path(parts.path).resolve()
    if scheme not in SCHEMES:
        raise StorageError(
            f"warehouse {text!r}: unsupported scheme {parts.scheme!r} (a local folder or "
            "s3://bucket/prefix; Google Cloud Storage through its S3 interoperability "
            "endpoint)"
        )
    if parts.username or parts.password or parts.port or parts.query or parts.fragment:
        raise StorageError(
            f"warehouse {parts.scheme}://{parts.hostname or ''}/...: give only "
            f"{parts.scheme}://bucket/prefix; the endpoint and credentials come from the "
            "environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...), "
            "never from the location"
        )
    key = "/".join(p for p in f"{parts.hostname or ''}/{parts.path}".split("/") if p)
    if not parts.hostname:
        raise StorageError(f"warehouse {text!r}: no bucket (s3://bucket/prefix)")
    return ObjectPath(scheme, key)
