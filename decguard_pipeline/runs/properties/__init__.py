"""Metamorphic property runs (fuzz), minimisation and replay, with backends.

Entry points (shared by the CLI and the Dagster assets):

* :func:`plan_properties` — check ``--property`` and fix seed/minimise before any call;
* :func:`run_properties` — the report's ``properties`` section and checks, given the golden
  results of the same run as originals; ``.pipeline`` on the outcome is the sidecar section;
* :func:`rejudge_section` — ``report --contract``: new limits on stored pairs, no calls;
* :func:`check_paraphraser` — ``validate``: build (and close) the paraphrase provider;
* :func:`decguard_pipeline.runs.properties.replay.replay` — re-send stored failures.
"""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.runs.properties.paraphrase import create_paraphraser
from decguard_pipeline.runs.properties.plan import PropertyPlan, plan_properties
from decguard_pipeline.runs.properties.run import PropertyOutcome, run_properties

__all__ = [
    "PropertyOutcome",
    "PropertyPlan",
    "check_paraphraser",
    "plan_properties",
    "rejudge_section",
    "run_properties",
]


def check_paraphraser(loaded: LoadedContract) -> None:
    """Build the enabled paraphrase provider as a run would (settings, files), offline."""
    paraphrase = loaded.contract.properties.paraphrase
    assert paraphrase is not None
    create_paraphraser(paraphrase.source, base_dir=loaded.path.parent).close()


def rejudge_section(
    section: dict[str, Any], loaded: LoadedContract, results: CaseResults
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A stored section re-judged with ``loaded``'s property settings (DecGuard §7.3)."""
    from decguard_pipeline.core.properties.report import rejudge  # stored reports only

    return rejudge(section, loaded.contract.properties, results)
