"""What ``test``, ``fuzz`` and ``report`` print: DecGuard's layout, then the pipeline's own
sections, then one final line with the verdict over every gate.

DecGuard defines its layout byte for byte, its final line (``PASS: all gates hold``) last. A
run without any section of ours prints exactly that. A run with sections of ours (the guard
extension, statistics, the response cache, usage and cost, calibration measures, consistency,
a calibrator) prints DecGuard's layout up to its final line, then the sections, then the
final line — so every gate, the cost gate included, comes before it:

* DecGuard's own final line when none of the sections has gates (its verdict is the whole
  verdict: a contract DecGuard understands keeps all its bytes);
* ``Pipeline verdict: FAIL — golden.max_ece, cost.max_cost_per_1000`` when some have
  (``core.verdict``: the line the HTML report's banner and ``evaluate`` show too).

The guard's section ends with its own verdict line over its suites: that line is left out,
the final line says it.
"""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.verdict import Verdict

PIPELINE_VERDICT = "Pipeline verdict: "


def _without_final_line(text: str) -> str:
    """A layout without its final verdict line (the paragraph after the last blank line)."""
    body, _, _ = text.rpartition("\n\n")
    return body


def sections(report: Any, guarded: Any = None) -> list[str]:
    """The pipeline's sections of a run's text, in their order (the guard's without its
    final line)."""
    out: list[str] = []
    if guarded is not None:
        out.append(_without_final_line(guarded.render()))
    extensions = report.extensions
    if "statistics" in extensions:
        from decguard_pipeline.core.golden.statistics import render_golden_statistics

        out.append(render_golden_statistics(extensions["statistics"]))
    if "cache" in extensions:
        from decguard_pipeline.core.cache.summary import render_cache
        from decguard_pipeline.core.formatting import printable

        # it names the model version a server said
        out.append(printable(render_cache(extensions["cache"]), lines=True))
    if "usage" in extensions:
        from decguard_pipeline.core.usage import render_usage

        out.append(render_usage(extensions["usage"]))
    if "calibration" in extensions:
        from decguard_pipeline.core.calibration.render import render_calibration

        out.append(render_calibration(extensions["calibration"]))
    if "consistency" in extensions:
        from decguard_pipeline.core.consistency.section import render_consistency

        out.append(render_consistency(extensions["consistency"]))
    if "calibrator" in extensions or "calibrated" in extensions:
        from decguard_pipeline.core.calibration.render_calibrator import render_sections

        out.append(render_sections(extensions, report.document))
    return out


def extension_gated(report: Any, guarded: Any = None) -> bool:
    """Whether the run has gates of the pipeline's own (guard, cost, calibration)."""
    extensions = report.extensions
    return (
        guarded is not None
        or bool((extensions.get("usage") or {}).get("checks"))
        or bool((extensions.get("calibration") or {}).get("checks"))
    )


def final_line(verdict: Verdict, report: Any, guarded: Any = None) -> str:
    """The last line of the text: DecGuard's words without gates of ours, else the pipeline
    verdict's headline."""
    from decguard_pipeline.core.report.render import VERDICTS

    if not extension_gated(report, guarded):
        return VERDICTS[verdict.status]
    return PIPELINE_VERDICT + verdict.headline()


def render_run(report: Any, verdict: Verdict, guarded: Any = None) -> str:
    """The whole text of a run (see the module's docstring)."""
    from decguard_pipeline.core.report.render import render_report

    decguard = render_report(report.text_document())
    extra = sections(report, guarded)
    if not extra:
        return decguard
    parts = [_without_final_line(decguard), *extra, final_line(verdict, report, guarded)]
    return "\n\n".join(parts)
