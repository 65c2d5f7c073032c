"""Row-wise concatenation by one take (``text_join``) against Arrow's own kernel."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from decguard_pipeline.core.production import text_join
from decguard_pipeline.core.production.text_join import concatenated, concatenated_chunks

VALUES = [None, "", "abc", "ü€😀", "x" * 10, '"q"\\', "\n"]
LITERALS = ["", "a", "é\n", '{"x": ']


def _pieces(rng: random.Random, n: int, chunked: bool) -> list[str | pa.Array]:
    pieces: list[str | pa.Array] = []
    for _ in range(rng.randint(1, 6)):
        if rng.random() < 0.4:
            pieces.append(rng.choice(LITERALS))
            continue
        skip = rng.randint(0, 3)  # a sliced array: its offsets do not start at 0
        array = pa.array([rng.choice(VALUES) for _ in range(n + skip)], pa.string()).slice(skip)
        if chunked and n > 1:
            array = pa.chunked_array([array.slice(0, n // 2), array.slice(n // 2)])
        pieces.append(array)
    if all(isinstance(p, str) for p in pieces):
        pieces.append(pa.array([rng.choice(VALUES[1:]) for _ in range(n)], pa.string()))
    return pieces


def _kernel(pieces: list[str | pa.Array], replacement: str | None) -> list[str | None]:
    arrays = [p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p for p in pieces]
    options = {} if replacement is None else {
        "null_handling": "replace", "null_replacement": replacement}  # fmt: skip
    return pc.binary_join_element_wise(*arrays, "", **options).to_pylist()


@pytest.mark.parametrize("replacement", [None, "null"])
def test_same_values_as_binary_join_element_wise(replacement: str | None) -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.choice([0, 1, 2, 5, 40])
        pieces = _pieces(rng, n, chunked=rng.random() < 0.3)
        got = concatenated(pieces, replacement)
        assert got.type == pa.string()
        assert got.to_pylist() == _kernel(pieces, replacement)


@pytest.mark.parametrize("replacement", [None, "null"])
def test_chunks_hold_the_same_rows(
    monkeypatch: pytest.MonkeyPatch, replacement: str | None
) -> None:
    monkeypatch.setattr(text_join, "CHUNK_BYTES", 64)  # many chunks of a few rows
    rng = random.Random(11)
    for _ in range(100):
        n = rng.choice([1, 3, 2000, 3001])
        pieces = _pieces(rng, n, chunked=False)
        got = concatenated_chunks(pieces, replacement)
        assert got.num_chunks == max(1, -(-n // 1024))  # 1,024 rows at least a chunk
        assert got.to_pylist() == _kernel(pieces, replacement)


def test_literals_alone_are_the_kernels_scalar() -> None:
    assert concatenated(["{", "}"]).as_py() == "{}"
