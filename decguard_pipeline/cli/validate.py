"""``validate``: check a contract offline and describe it."""

from __future__ import annotations

from pathlib import Path

from decguard_pipeline.backends import create_backend
from decguard_pipeline.core.contract import LoadedContract, load_contract
from decguard_pipeline.core.product import PROGRAM


def validate_text(contract_path: Path, dataset: Path | None) -> str:
    from decguard_pipeline.runs.golden import resolve_dataset

    loaded = load_contract(contract_path)
    c = loaded.contract
    spec = c.spec()
    for name in c.backend_names():
        create_backend(c.backend_config(name), decision=spec, name=name).close()
    paraphrase = c.properties.paraphrase
    if paraphrase is not None and paraphrase.enabled:
        from decguard_pipeline.runs.properties import check_paraphraser

        check_paraphraser(loaded)
    lines = [
        f"OK  {contract_path}",
        f"    decision  {spec.name} ({spec.type}): {', '.join(spec.labels)}",
        "    backends  "
        + ", ".join(f"{name}={c.backend_config(name).provider}" for name in c.backend_names()),
    ]
    if dataset is not None or c.dataset is not None:
        data = resolve_dataset(loaded, dataset)
        lines.append(f"    dataset   {data.path}: {len(data)} cases, {data.n_labeled} labeled")
    else:
        lines.append(f"    dataset   none (pass --dataset to `{PROGRAM} test`)")
    production = c.production
    lines += [
        f"    gates     requirements: {len(c.requirements.configured())}, "
        f"warnings: {len(c.warnings.configured())}",
        "    properties "
        + (", ".join(c.properties.enabled()) or "none (add 'properties' to fuzz)"),
        "    production "
        f"segments: {', '.join(production.segments) or 'none'}; "
        f"requirements: {len(production.requirements.configured())}; "
        f"segment requirements: {len(production.segment_requirements.configured())}",
        "    policy     " + (f"{len(c.policy.routes)} routes" if c.policy is not None else "none"),
        f"    hash      {loaded.hash}",
    ]
    from decguard_pipeline.core.guard.extension import guard_config, guard_enabled

    if guard_enabled(c):  # the extension only: a DecGuard contract prints DecGuard's lines
        g = guard_config(c, source=str(contract_path))
        lines.append(
            f"    guard     {', '.join(g.guarded)} at threshold {g.guard.threshold:g}; "
            f"suites: {', '.join(g.suites) or 'none'}; "
            f"gates: requirements {len(g.requirements.configured())}, "
            f"warnings {len(g.warnings.configured())}"
        )
    if c.pipeline is not None:  # the cost gate (any contract; core/usage.py)
        cost = [
            f"{level} {gate} {threshold:g}"
            for level, gates in (("requirement", c.pipeline.requirements),
                                 ("warning", c.pipeline.warnings))
            for gate, threshold in gates.cost().items()
        ]  # fmt: skip
        if cost:
            lines.append(f"    cost      {'; '.join(cost)}")
        if c.pipeline.repeats is not None:  # core/consistency: N asks of every golden case
            lines.append(f"    repeats   {c.pipeline.repeats.count} asks per golden case")
    from decguard_pipeline.core.calibration.extension import applied_settings, measures_settings
    from decguard_pipeline.core.contract.extension_gates import CalibrationGates

    measures = measures_settings(c)
    if measures is not None and c.pipeline is not None:  # the extension only, as the guard
        a = applied_settings(measures, c)
        lines.append(
            f"    calibration {a['bins']} bins · abstention alpha {a['alpha']:g}, "
            f"delta {a['delta']:g} · {a['folds']} folds · {a['bootstrap_resamples']} resamples; "
            f"gates: requirements {len(c.pipeline.requirements.owned(CalibrationGates))}, "
            f"warnings {len(c.pipeline.warnings.owned(CalibrationGates))}"
        )
    lines += _calibrator_lines(loaded)
    return "\n".join(lines)


def _calibrator_lines(loaded: LoadedContract) -> list[str]:
    """The calibrator keys (``pipeline.calibration``): the split, read now when it is a file,
    and the calibrator decisions apply, read and checked against the labels."""
    from decguard_pipeline.runs.calibrator import calibration_dataset, calibrator_for

    pipeline = loaded.contract.pipeline
    settings = pipeline.calibration if pipeline is not None else None
    if settings is None:
        return []
    lines = []
    if settings.fits_calibrator:
        from decguard_pipeline.core.calibration.fitting import fit_settings

        fit = fit_settings(loaded.contract)
        data = calibration_dataset(loaded)
        split = (
            f"{fit.fraction:g} of the golden cases, seed {fit.seed}"
            if data is None
            else f"{data.path}: {len(data)} cases, {data.n_labeled} labeled"
        )
        line = f"    calibrator {fit.method} on {split}"
        if fit.conformal is not None:
            line += f" · conformal {fit.conformal.method} alpha {fit.conformal.alpha:g}"
        lines.append(line)
    applied = calibrator_for(loaded, None)
    if applied is not None:
        from decguard_pipeline.core.calibration.artifact import check_labels

        check_labels(applied, loaded.contract.labels)
        lines.append(f"    applies   {applied.method} for {applied.target} ({applied.path})")
    return lines
