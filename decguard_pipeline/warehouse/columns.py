"""Column types and the key columns every per-run table starts with."""

import pyarrow as pa

_S, _D, _I, _B, _TS = pa.string(), pa.float64(), pa.int64(), pa.bool_(), pa.timestamp("us", "UTC")

# Which contract, target and run wrote a row, and when.
KEYS = [("contract", _S), ("target", _S), ("run_id", _S), ("recorded_at", _TS)]


def keyed(columns: list[tuple[str, pa.DataType]]) -> list[tuple[str, pa.DataType]]:
    """``columns`` after the key columns."""
    return [*KEYS, *columns]
