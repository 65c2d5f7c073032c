"""core/report/jsonio.py: what orjson cannot write (an integer beyond 64 bits) is written as
DecGuard writes its reports, pydantic's serializer (decguard 0.1.1 writes every report with
``model_dump_json(indent=2)``): the integer exact, every float as orjson writes it."""

from __future__ import annotations

import json
import random

import orjson
import pydantic

from decguard_pipeline.core.report import jsonio


class _Doc(pydantic.RootModel[dict[str, object]]):
    """A document as DecGuard's models serialise one."""


def _floats(rng: random.Random) -> list[float]:
    return [rng.random() * 10 ** rng.randint(-12, 12) for _ in range(20)] + [1.5e-7, 1e-05, 0.1]


def test_a_document_with_a_huge_integer_is_written_as_decguard_writes_it(tmp_path):
    rng = random.Random(3)
    for trial in range(50):
        records = [{"id": f"r{i}", "p": _floats(rng), "input": {"n": 2**70 + i}} for i in range(5)]
        document = {"check_version": "0.1", "z": 2.5e-06, "records": None}
        path = tmp_path / f"{trial}.json"
        jsonio.write_document(path, document, stream_key="records", items=lambda r=records: r)
        expected = _Doc({**document, "records": records}).model_dump_json(indent=2) + "\n"
        assert path.read_text() == expected, trial
        assert "e-07" not in path.read_text()  # the standard library's spelling of 1.5e-7
        assert json.loads(path.read_text())["records"][0]["input"]["n"] == 2**70


def test_without_a_huge_integer_orjson_writes_the_same_bytes():
    rng = random.Random(4)
    document = {"a": _floats(rng), "b": {"c": [1, -2, None, True, "é\u2028"]}}
    assert jsonio.dumps(document).encode() == orjson.dumps(document, option=orjson.OPT_INDENT_2)
    assert jsonio._standard(document) == orjson.dumps(document, option=orjson.OPT_INDENT_2)
