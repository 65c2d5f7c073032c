"""An import-linter contract type of this project (pyproject.toml ``contract_types``):
``private_modules`` forbids importing any private module of the external packages it names
(``dagster._core...``: a name with a leading underscore), which the built-in ``forbidden``
contract cannot express (it sees an external package as one node). It reads each import's
source line as grimp recorded it."""

from __future__ import annotations

import re
from typing import Any

from importlinter import Contract, ContractCheck, fields, output


class PrivateModulesContract(Contract):
    type_name = "private_modules"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    external_packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        roots = [m.name for m in self.source_modules]  # type: ignore[attr-defined]
        found = []
        for package in self.external_packages:  # type: ignore[attr-defined]
            private = re.compile(rf"\b{re.escape(package)}\._\w")
            for importer in sorted(graph.find_modules_that_directly_import(package)):
                if not any(importer == r or importer.startswith(f"{r}.") for r in roots):
                    continue
                for detail in graph.get_import_details(importer=importer, imported=package):
                    if private.search(detail["line_contents"]):
                        found.append((importer, detail["line_number"], detail["line_contents"]))
        return ContractCheck(kept=not found, metadata={"found": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, line, contents in check.metadata["found"]:
            output.print_error(f"{importer}:{line}: {contents}", bold=False)
            output.new_line()
