"""Warehouse tables of the calibration measures (documented in docs/warehouse.md).

Written by the ``golden_metrics`` asset (``steps/golden.py``; rows built by
``rows/calibration.py``) for contracts with ``pipeline.calibration_measures`` or a calibration
gate, their checks to ``gate_results`` with source ``calibration``; ``diff_calibration`` by the
``regression_diff`` asset (``steps/diff.py``) for the same contracts. Keyed like every
per-target table by contract, target, run and time.
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import DOUBLE, INT, STRING, WHO, keyed

TABLES: dict[str, pa.Schema] = {
    # one row per measure (the sidecar's calibration.headline, the interval on smece) and
    # one per label of the class-wise ECE
    "calibration": pa.schema(
        keyed(
            [
                *WHO,
                ("measure", STRING),
                ("label", STRING),
                ("value", DOUBLE),
                ("low", DOUBLE),
                ("high", DOUBLE),
                ("n_cases", INT),
                ("settings_json", STRING),
            ]
        )
    ),
    # a regression diff's comparison of both runs' CORP decompositions (steps/diff.py): one
    # row per score and component; the Brier score's miscalibration and discrimination rows
    # carry the paired-bootstrap interval of the change and the verdict
    "diff_calibration": pa.schema(
        keyed(
            [
                *WHO,
                ("baseline_target", STRING),
                ("n_cases", INT),
                ("score", STRING),
                ("component", STRING),
                ("baseline", DOUBLE),
                ("candidate", DOUBLE),
                ("delta", DOUBLE),
                ("low", DOUBLE),
                ("high", DOUBLE),
                ("confidence", DOUBLE),
                ("verdict", STRING),
            ]
        )
    ),
    # the smoothed reliability diagram (calibration.smooth.curve), one row per mesh point
    "calibration_curve": pa.schema(
        keyed(
            [
                *WHO,
                ("point", INT),
                ("confidence", DOUBLE),
                ("accuracy", DOUBLE),
                ("lower", DOUBLE),
                ("upper", DOUBLE),
                ("density", DOUBLE),
            ]
        )
    ),
}
