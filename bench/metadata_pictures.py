"""The pictures of ``golden_metrics``' Dagster metadata, as the pipeline draws them for every
target run: matplotlib PNGs (``core.report.plots``, what ``defs/metadata`` used before, still
the CLI's guard pictures) against the SVG documents of ``core.html.figures``, each inlined
as base64 markdown as ``defs/metadata/golden.pictures`` does.

For every target of the bundled examples: the reliability diagram (with the smooth curve and
band of the target's calibration section), the risk-coverage curve, and the calibration
section's smooth diagram. Prints per-target milliseconds (best of ``--repeat``, warm) and the
first drawing in a fresh process (imports included: matplotlib's is paid once per process).

    .venv/bin/python bench/metadata_pictures.py --repeat 5
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from timing import best  # bench/ is on sys.path: the scripts run as files

ROOT = Path(__file__).resolve().parents[1]


def sections() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(target, curves, calibration section)`` of every example target."""
    from decguard_pipeline.core.calibration.extension import labeled_inputs
    from decguard_pipeline.core.calibration.section import calibration_section
    from decguard_pipeline.core.guard.curves import evaluation_curves
    from decguard_pipeline.demo.autostart import demo_server_for
    from decguard_pipeline.runs.golden import run_test
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.steps.golden import load_golden
    from decguard_pipeline.steps.targets import discover_targets

    found = []
    for entry in discover_contracts(str(ROOT / "data" / "contracts")):
        loaded = entry.require()
        data = load_golden(entry)
        with demo_server_for([loaded.contract]):
            canary = data.inputs[0] if len(data) else None
            targets, _ = discover_targets(loaded, canary_input=canary)
            for target in targets:
                report = run_test(loaded, backend=target.backend)
                curves = evaluation_curves(report.results, loaded.contract)
                probs, expected = labeled_inputs(report.results)
                section = calibration_section(probs, expected).to_dict()
                found.append((f"{entry.key}/{target.backend}", curves, section))
    return found


def markdown(kind: str, data: bytes) -> str:
    return f"![x](data:image/{kind};base64,{base64.b64encode(data).decode('ascii')})"


def draw_png(curves: dict[str, Any], section: dict[str, Any], title: str) -> int:
    from decguard_pipeline.core.report.plots import (
        reliability_png,
        risk_coverage_png,
        smooth_reliability_png,
    )

    images = [
        reliability_png(curves["calibration"], title=title, smooth=section["smooth"]),
        risk_coverage_png(curves["risk_coverage"], title=title),
        smooth_reliability_png(section, title=title),
    ]
    return sum(len(markdown("png", i)) for i in images)


def draw_svg(curves: dict[str, Any], section: dict[str, Any], title: str) -> int:
    from decguard_pipeline.core.html.figures import (
        reliability_figure,
        risk_coverage_figure,
        smooth_reliability_figure,
    )

    images = [
        reliability_figure(curves["calibration"], title=title, smooth=section["smooth"]),
        risk_coverage_figure(curves["risk_coverage"], title=title),
        smooth_reliability_figure(section, title=title),
    ]
    return sum(len(markdown("svg+xml", i.encode("utf-8"))) for i in images)


FIRST = """
import time, pickle, sys
t = time.perf_counter()
from bench.metadata_pictures import draw_{kind}
curves, section = pickle.loads(sys.stdin.buffer.read())
draw_{kind}(curves, section, "t")
print(time.perf_counter() - t)
"""


def first_drawing(kind: str, curves: dict[str, Any], section: dict[str, Any]) -> float:
    import pickle

    ran = subprocess.run(
        [sys.executable, "-c", FIRST.format(kind=kind)],
        input=pickle.dumps((curves, section)),
        capture_output=True,
        cwd=ROOT,
        check=True,
    )
    return float(ran.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    found = sections()
    print(f"{'target':<40} {'png ms':>8} {'svg ms':>8} {'ratio':>6} {'png kB':>7} {'svg kB':>7}")
    totals = [0.0, 0.0]
    for name, curves, section in found:
        png = best(lambda c=curves, s=section, n=name: draw_png(c, s, n), args.repeat)
        svg = best(lambda c=curves, s=section, n=name: draw_svg(c, s, n), args.repeat)
        sizes = draw_png(curves, section, name) / 1000, draw_svg(curves, section, name) / 1000
        totals[0] += png
        totals[1] += svg
        print(f"{name:<40} {png * 1e3:8.1f} {svg * 1e3:8.1f} {png / svg:6.0f} "
              f"{sizes[0]:7.0f} {sizes[1]:7.0f}")  # fmt: skip
    print(f"{'all ' + str(len(found)) + ' targets':<40} {totals[0] * 1e3:8.1f} "
          f"{totals[1] * 1e3:8.1f} {totals[0] / totals[1]:6.0f}")  # fmt: skip
    _, curves, section = found[0]
    cold = [min(first_drawing(k, curves, section) for _ in range(args.repeat))
            for k in ("png", "svg")]  # fmt: skip
    print(f"first drawing in a fresh process (imports included): png {cold[0] * 1e3:.0f} ms, "
          f"svg {cold[1] * 1e3:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
