"""Warehouse tables of the calibrators (documented in docs/warehouse.md).

Written by the ``calibrator`` asset (``steps/calibrator.py``; rows built by
``rows/calibrator.py``) for contracts with calibrator keys under ``pipeline.calibration``:
what was fitted on the calibration split and how it did on the held-out cases. Keyed like
every per-target table by contract, target, run and time; the evaluation site and
``decguard-pipeline sql`` read them.
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import DOUBLE, INT, STRING, WHO, keyed

TABLES: dict[str, pa.Schema] = {
    # one row per fitted calibrator: the method and its parameters, the data it was fitted
    # on, the conformal threshold, the suggested abstain_below and the file written
    "calibrators": pa.schema(
        keyed(
            [
                *WHO,
                ("method", STRING),
                ("chosen_by", STRING),  # auto | contract | command | default
                ("logits", STRING),  # backend_logprobs | log_probabilities
                ("parameters_json", STRING),
                ("n_calibration", INT),
                ("n_held_out", INT),
                ("data_hash", STRING),
                ("split_json", STRING),
                ("selection_json", STRING),  # auto's out-of-fold NLL per method
                ("top_label_changes", INT),
                ("conformal_method", STRING),
                ("conformal_alpha", DOUBLE),
                ("conformal_q_hat", DOUBLE),
                ("conformal_coverage", DOUBLE),
                ("conformal_mean_set_size", DOUBLE),
                ("conformal_singleton_rate", DOUBLE),
                ("abstain_below", DOUBLE),
                ("abstain_alpha", DOUBLE),
                ("abstain_delta", DOUBLE),
                ("abstain_coverage", DOUBLE),
                ("abstain_selective_risk", DOUBLE),
                ("calibrator_path", STRING),
                ("section_json", STRING),  # the sidecar section, for the report's sidecar
            ]
        )
    ),
    # the held-out cases before and after the calibrator, one row per measure, with the
    # paired bootstrap interval of the change
    "calibrator_metrics": pa.schema(
        keyed(
            [
                *WHO,
                ("method", STRING),
                ("measure", STRING),
                ("n_cases", INT),
                ("before", DOUBLE),
                ("after", DOUBLE),
                ("change", DOUBLE),
                ("low", DOUBLE),
                ("high", DOUBLE),
                ("confidence", DOUBLE),
            ]
        )
    ),
    # the escalation sweep on the held-out cases: one row per confidence threshold and
    # probabilities (calibrated, raw)
    "escalation_sweep": pa.schema(
        keyed(
            [
                *WHO,
                ("method", STRING),
                ("probabilities", STRING),  # calibrated | raw
                ("threshold", DOUBLE),
                ("n_cases", INT),
                ("answered", INT),
                ("handed_off", INT),
                ("coverage", DOUBLE),
                ("hand_off_rate", DOUBLE),
                ("accuracy_answered", DOUBLE),
                ("escalation_cost", DOUBLE),  # per hand-off, as configured
                ("escalation_cost_per_1000", DOUBLE),
                ("backend_cost_per_1000", DOUBLE),
                ("total_cost_per_1000", DOUBLE),
            ]
        )
    ),
}
