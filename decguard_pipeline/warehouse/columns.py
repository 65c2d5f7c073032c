"""Column types and the key columns every per-run table starts with."""

import pyarrow as pa

STRING = pa.string()
DOUBLE = pa.float64()
INT = pa.int64()
BOOL = pa.bool_()
TIMESTAMP = pa.timestamp("us", "UTC")

# Which contract, target and run wrote a row, and when.
KEYS = [("contract", STRING), ("target", STRING), ("run_id", STRING), ("recorded_at", TIMESTAMP)]
# Who answered in the evaluation a row is about (a target's rows start with it after the keys).
WHO = [("backend", STRING), ("model_version", STRING)]


def keyed(columns: list[tuple[str, pa.DataType]]) -> list[tuple[str, pa.DataType]]:
    """``columns`` after the key columns."""
    return [*KEYS, *columns]
