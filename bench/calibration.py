"""Benchmark of the calibration section (core/calibration) on generated result sets.

Times every measure and the whole :func:`calibration_section` on 1,000 and 100,000 cases
(3 labels, an over-confident model), best of ``--repeat`` runs, and puts the smooth-ECE parts
next to the reference package ``relplot`` doing the same work (its ``smECE``, and a bootstrap
of it through ``scipy.stats.bootstrap`` as its reliability diagram does): ratios, not absolute
targets. The first line gives the load average, since figures are only comparable on an
otherwise idle machine.

    .venv/bin/python bench/calibration.py                  # 1k and 100k, reference included
    .venv/bin/python bench/calibration.py --cases 20000    # other sizes
    .venv/bin/python bench/calibration.py --no-ref         # without relplot
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np
from timing import best  # bench/ is on sys.path: the scripts run as files

from decguard_pipeline.core.calibration.abstention import guaranteed_threshold
from decguard_pipeline.core.calibration.binned import classwise_ece, debiased_ece
from decguard_pipeline.core.calibration.decomposition import score_decompositions
from decguard_pipeline.core.calibration.recalibration import temperature_scaling
from decguard_pipeline.core.calibration.section import calibration_section
from decguard_pipeline.core.calibration.smooth import smooth_ece
from decguard_pipeline.core.calibration.smooth_bootstrap import smooth_calibration

BOOTSTRAP = 200  # the section's default resamples
REF_BOOTSTRAP = 100  # what relplot's diagram uses; scaled up to BOOTSTRAP for the ratio


def result_set(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """An over-confident 3-label model: reports q^2 (renormalised), labels drawn from q."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.full(3, 0.5), n)
    expected = np.minimum((rng.uniform(size=(n, 1)) > np.cumsum(q, axis=1)).sum(axis=1), 2)
    shown = q**2
    return shown / shown.sum(axis=1, keepdims=True), expected


def run(n: int, repeat: int, with_ref: bool) -> None:
    probs, expected = result_set(n)
    confidence = probs.max(axis=1)
    correct = probs.argmax(axis=1) == expected
    parts: list[tuple[str, Callable[[], object]]] = [
        ("smooth ECE (point)", lambda: smooth_ece(confidence, correct)),
        (
            f"smooth ECE + {BOOTSTRAP} resamples + curve",
            lambda: smooth_calibration(confidence, correct, n_bootstrap=BOOTSTRAP),
        ),
        ("class-wise ECE", lambda: classwise_ece(probs, expected)),
        ("debiased l2 ECE", lambda: debiased_ece(confidence, correct)),
        ("CORP decompositions (3)", lambda: score_decompositions(probs, expected)),
        ("temperature scaling, 5 folds", lambda: temperature_scaling(probs, expected)),
        (
            "guaranteed abstention",
            lambda: guaranteed_threshold(confidence, correct, alpha=0.1, delta=0.1),
        ),
        ("whole section", lambda: calibration_section(probs, expected)),
    ]
    print(f"\n{n:,} cases, 3 labels (best of {repeat})")
    ours: dict[str, float] = {}
    for name, work in parts:
        ours[name] = best(work, repeat)
        print(f"  {name:<44} {ours[name] * 1000:10.1f} ms")
    if not with_ref:
        return
    import relplot
    from scipy import stats

    f, y = confidence, correct.astype(float)
    ref_point = best(lambda: relplot.smECE(f, y), repeat)
    print(
        f"  relplot.smECE (point)                        {ref_point * 1000:10.1f} ms"
        f"   ours {ref_point / ours['smooth ECE (point)']:.1f}x faster"
    )
    ref_boot = best(
        lambda: stats.bootstrap(
            (f, y), relplot.smECE, paired=True, n_resamples=REF_BOOTSTRAP, method="percentile"
        ),
        1,
    ) * (BOOTSTRAP / REF_BOOTSTRAP)
    name = f"smooth ECE + {BOOTSTRAP} resamples + curve"
    print(
        f"  relplot.smECE x {BOOTSTRAP} resamples (scipy)          {ref_boot * 1000:10.1f} ms"
        f"   ours {ref_boot / ours[name]:.1f}x faster"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, nargs="*", default=[1_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-ref", action="store_true", help="skip the relplot comparison")
    args = parser.parse_args()
    print("load average: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    for n in args.cases:
        run(n, args.repeat, not args.no_ref)


if __name__ == "__main__":
    main()
