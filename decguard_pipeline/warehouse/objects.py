"""Files beside the tables on object storage (reports, sidecars, pictures under
``s3://bucket/prefix/report_files/``): uploaded whole with one PUT (a multipart upload above
``2 * PART_SIZE``, which the store shows only once complete), read back by their location.
The tables themselves are DuckLake's (DuckDB's httpfs writes their data files); these files
go through s3fs, with endpoint and credentials from the client's standard chain
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ... ``AWS_REGION``, a profile or a role)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from decguard_pipeline.warehouse.locations import SCHEMES, ObjectPath, StorageError

PART_SIZE = 50 * 2**20  # S3's smallest part is 5 MiB


def upload(local: Path, where: ObjectPath) -> None:
    _client(where.scheme, os.getpid()).put_file(str(local), where.key, chunksize=PART_SIZE)


def read_bytes(where: ObjectPath) -> bytes:
    return bytes(_client(where.scheme, os.getpid()).cat_file(where.key))


@functools.cache
def _client(scheme: str, pid: int) -> Any:  # one per process: a forked child makes its own
    package, extra = SCHEMES[scheme]
    try:
        module = __import__(package)
    except ImportError:
        raise StorageError(
            f"a {scheme}:// warehouse needs the {package} package: "
            f"pip install 'decguard-pipeline[{extra}]'"
        ) from None
    # botocore reads the region from AWS_DEFAULT_REGION only; the AWS CLI and the other SDKs
    # read AWS_REGION first, and so do we
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return module.S3FileSystem(
        use_listings_cache=False,
        skip_instance_cache=True,
        client_kwargs={"region_name": region} if region else {},
    )
