"""Read a contract file (YAML or JSON) as untrusted input and hash its normalised form."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from decguard_pipeline.core.contract.extensions import PipelineSection
from decguard_pipeline.core.contract.model import Contract
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.core.json_limits import PARSER_DEPTH, line_column, too_deep
from decguard_pipeline.core.validation import format_errors, loads_strict

MAX_CONTRACT_BYTES = 1_000_000


@dataclass(frozen=True)
class LoadedContract:
    contract: Contract
    path: Path
    hash: str  # "sha256:<hex>" of the normalised contract: stable across formatting

    def resolve(self, relative: str | Path) -> Path:
        """A path written in the contract, relative to the contract's directory."""
        return self.path.parent / relative


class _NoDuplicatesLoader(yaml.SafeLoader):
    """Safe loader (no object-constructing tags) that refuses a mapping key given twice."""


def _mapping(loader: _NoDuplicatesLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in result:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        result[key] = loader.construct_object(value_node, deep=True)
    return result


_NoDuplicatesLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def parse_text(text: str, *, source: str, json_only: bool = False) -> Any:
    """Parse YAML (JSON when ``json_only``), rejecting duplicate keys."""
    try:
        if json_only:
            return loads_strict(text)
        return yaml.load(text, Loader=_NoDuplicatesLoader)
    except (yaml.YAMLError, ValueError) as exc:
        raise ContractError(f"{source}: cannot parse file:\n  {exc}") from exc
    except RecursionError:  # both parsers recurse once (or more) per level of nesting
        where = _deepest(text, json_only)
        raise ContractError(
            f"{source}: cannot parse file:\n  nested too deeply to read{where}"
        ) from None


def _deepest(text: str, json_only: bool) -> str:
    """Where the text first nests more than ``PARSER_DEPTH`` levels (a contract needs a few),
    as `` (more than N levels at line L, column C)``; found without recursion."""
    if json_only:
        raw = text.encode("utf-8")
        position = too_deep(raw, PARSER_DEPTH)
        if position is None:
            return ""
        line, column = line_column(raw, position)
        return f" (more than {PARSER_DEPTH} levels at line {line}, column {column})"
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):  # events: no recursion
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > PARSER_DEPTH:
                    mark = event.start_mark
                    return (
                        f" (more than {PARSER_DEPTH} levels at line {mark.line + 1}, "
                        f"column {mark.column + 1})"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        pass
    return ""


def parse_contract(data: Any, *, source: str = "<contract>") -> Contract:
    if not isinstance(data, Mapping):
        raise ContractError(f"{source}: a contract must be a mapping at the top level")
    try:
        return Contract.model_validate(data)
    except ValidationError as exc:
        raise ContractError(f"{source}: invalid contract:\n{format_errors(exc)}") from exc


def contract_hash(contract: Contract) -> str:
    """sha256 of the canonical JSON of the contract with every default filled in."""
    # A contract without extensions hashes exactly as in DecGuard. ``pipeline.cache`` never
    # changes a result, so it is not hashed (a contract with only that extension hashes as
    # DecGuard's, and turning the cache on or off does not make evaluations stale).
    pipeline = contract.pipeline
    exclude: Any = {"pipeline": {"cache"}}
    if pipeline is None or (
        pipeline.cache is not None
        and pipeline.model_copy(update={"cache": None}) == PipelineSection()
    ):
        exclude = {"pipeline"}
    canonical = json.dumps(
        contract.model_dump(mode="json", by_alias=True, exclude=exclude),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def load_contract(path: str | Path) -> LoadedContract:
    path = Path(path)
    source = str(path)
    try:
        with path.open("rb") as stream:  # never more than the limit, whatever the file
            raw = stream.read(MAX_CONTRACT_BYTES + 1)
    except OSError as exc:
        raise ContractError(f"{source}: cannot read contract: {exc.strerror or exc}") from exc
    if len(raw) > MAX_CONTRACT_BYTES:
        raise ContractError(f"{source}: contract is larger than {MAX_CONTRACT_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(f"{source}: contract is not valid UTF-8") from exc
    data = parse_text(text, source=source, json_only=path.suffix.lower() == ".json")
    contract = parse_contract(data, source=source)
    return LoadedContract(contract=contract, path=path, hash=contract_hash(contract))
