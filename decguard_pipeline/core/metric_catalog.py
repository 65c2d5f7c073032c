"""Every metric the pipeline reports, with a one-line definition (``list metrics``,
docs/metrics.md). DecGuard's come first, in report order; then the guard extension's, then the
usage section's, the consistency section's, the Guard Eval Harness files', the calibration
measures', then a fitted calibrator's."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class MetricInfo:
    name: str
    source: str  # "decguard" (the report), "pipeline" (the sidecar), "geh" (--run-dir files)
    where: str  # the JSON section that holds it
    definition: str


def _m(name: str, where: str, definition: str, source: str = "decguard") -> MetricInfo:
    return MetricInfo(name, source, where, definition)


def _p(name: str, where: str, definition: str) -> MetricInfo:
    return MetricInfo(name, "pipeline", where, definition)


def _g(name: str, definition: str) -> MetricInfo:
    return MetricInfo(name, "geh", "metrics.json", definition)


CATALOG: tuple[MetricInfo, ...] = (
    # DecGuard 0.1 (report "metrics")
    _m("error_rate", "counts", "errored cases / all cases"),
    _m("accuracy", "classification", "labeled decided cases whose selected label is the expected "
       "one, as a share"),
    _m("per_label.precision", "classification.per_label", "of the cases that selected the label, "
       "the share expected to; 0 when none selected it"),
    _m("per_label.recall", "classification.per_label", "of the cases expected to be the label, "
       "the share that selected it; 0 when none are"),
    _m("per_label.f1", "classification.per_label", "harmonic mean of the label's precision and "
       "recall; 0 when both are 0"),
    _m("macro_f1", "classification", "unweighted mean F1 over the labels that occur as expected "
       "or selected"),
    _m("ordinal_mae", "classification", "score decisions: mean number of scale steps between "
       "selected and expected level"),
    _m("ece", "calibration", "expected calibration error over equal-width confidence bins: "
       "case-weighted mean |accuracy - mean confidence| per bin"),
    _m("brier", "calibration", "mean over cases of the squared distance between the "
       "probabilities and the one-hot expected label (0..2)"),
    _m("nll", "calibration", "mean -ln(probability of the expected label), floored at 1e-15"),
    _m("coverage", "selective", "decided cases with confidence >= evaluation.confidence_threshold, "
       "as a share"),
    _m("abstention_rate", "selective", "1 - coverage"),
    _m("selective_accuracy", "selective", "accuracy over labeled cases at or above the "
       "confidence threshold"),
    _m("latency_p95_ms", "latency", "95th percentile of per-case latency (linear "
       "interpolation); also mean, p50, p90, p99, max"),
    # guard extension (sidecar "<report>.pipeline.json", evaluations[].metrics)
    _p("drop_rate", "run", "errored cases / all cases; state normal below "
       "partial_runs.warn_from, warning up to partial_above, partial beyond"),
    _p("tp fp tn fn", "guard.labels.<label>", "confusion counts with positive = expected is "
       "the label and predicted positive = its probability >= guard.threshold"),
    _p("accuracy (guard)", "guard.labels.<label>", "(TP + TN) / labeled cases, at the threshold"),
    _p("precision", "guard.labels.<label>", "TP / (TP + FP); undefined when nothing reaches the "
       "threshold"),
    _p("recall", "guard.labels.<label>", "TP / (TP + FN), the true-positive rate; undefined "
       "without positive cases"),
    _p("f1", "guard.labels.<label>", "2TP / (2TP + FP + FN); undefined only with no positives "
       "expected or predicted"),
    _p("fpr", "guard.labels.<label>", "FP / (FP + TN), false alarms among negatives; undefined "
       "without negative cases"),
    _p("fnr", "guard.labels.<label>", "FN / (FN + TP), misses among positives (1 - recall); "
       "undefined without positive cases"),
    _p("auroc", "guard.labels.<label>", "area under the ROC curve from the raw scores: the "
       "chance a positive outscores a negative, ties counting half"),
    _p("auprc", "guard.labels.<label>", "average precision from the raw scores: precision at "
       "each distinct score weighted by the recall it adds"),
    _p("threshold table", "thresholds.labels.<label>.grid", "per threshold of "
       "guard.threshold_grid: tp fp tn fn, precision, recall, f1, fpr, fnr as above"),
    _p("target_recall", "thresholds.labels.<label>.target_recall", "the highest score "
       "threshold whose recall >= guard.target_recall, with its row"),
    _p("target_fpr", "thresholds.labels.<label>.target_fpr", "the lowest score threshold "
       "whose FPR <= guard.target_fpr, with its row"),
    _p("mean_confidence", "calibration", "mean top-label confidence over labeled decided cases"),
    _p("confidence_gap", "calibration", "mean confidence - accuracy; over-confident above "
       "+gap_tolerance, under-confident below -gap_tolerance"),
    _p("ece_equal_width", "calibration", "DecGuard's ECE (equal-width bins), repeated next to "
       "the equal-mass one"),
    _p("ece_equal_mass", "calibration", "ECE over bins holding about the same number of cases "
       "each (tied confidences share a bin)"),
    _p("coverage (sweep)", "risk_coverage.sweep", "per threshold: kept cases (confidence >= "
       "threshold) / labeled decided cases"),
    _p("selective_accuracy (sweep)", "risk_coverage.sweep", "per threshold: accuracy of the "
       "kept cases; selective_risk = 1 - it"),
    _p("handed_off", "risk_coverage.sweep", "per threshold: cases below it, handed to a person"),
    _p("cost_per_1000", "risk_coverage.sweep", "1000 x (handed_off x escalation_cost + wrong "
       "kept x error_cost) / cases"),
    _p("aurc", "risk_coverage", "area under the risk-coverage curve (selective risk against "
       "coverage, most confident first); lower is better"),
    _p("optimal_aurc", "risk_coverage", "the AURC if every right decision outranked every "
       "wrong one"),
    _p("excess_aurc", "risk_coverage", "aurc - optimal_aurc: the cost of imperfect ranking "
       "alone"),
    # usage and cost of language-model backends (sidecar "usage"; core/usage.py)
    _p("prompt_tokens, completion_tokens", "usage", "tokens the server reported, summed over "
       "the cases that reported them"),
    _p("cost_per_run", "usage", "(prompt x input_per_million + completion x "
       "output_per_million) / 1e6, with the backend's pricing"),
    _p("cost_per_1000 (usage)", "usage", "1000 x cost_per_run / cases that ended in a "
       "decision: what the API bills per 1,000 decisions"),
    # consistency of repeated asks (sidecar "consistency", pipeline.repeats; core/consistency)
    _p("unanimous_share", "consistency", "cases whose selected label is the same in all N "
       "asks / cases every ask decided"),
    _p("pairwise_agreement", "consistency", "mean over cases of the share of the N(N-1)/2 pairs "
       "of asks that selected the same label"),
    _p("agreement_with_report", "consistency", "share of the extra asks (1..N-1) that selected "
       "the report's label (ask 0)"),
    _p("mean_tv_distance (consistency)", "consistency", "mean over cases and asks of the TV "
       "distance between an ask's probabilities and the case's mean vector"),
    _p("label_flips", "consistency", "per label: cases for which some asks selected it and "
       "others did not"),
)  # fmt: skip

# The Guard Eval Harness's metrics (test/fuzz --run-dir: datasets/<suite>/metrics.json), as
# `geh list metrics` names them, in its order, with the formulas of GEH's documentation;
# positive = unsafe = the guarded label, predicted unsafe = its score >= guard.threshold
# (core/guard/eval_harness.py)
HARNESS: tuple[MetricInfo, ...] = (
    _g("accuracy", "(TP + TN) / Total: samples classified right at the threshold"),
    _g("auprc", "area under the precision-recall curve of the raw scores (average "
       "precision, no interpolation)"),
    _g("auroc", "area under the ROC curve of the raw scores (threshold-free ranking quality)"),
    _g("precision", "TP / (TP + FP): of the samples flagged unsafe, the truly unsafe share"),
    _g("recall", "TP / (TP + FN): of the truly unsafe samples, the share caught"),
    _g("f1", "2 * (P * R) / (P + R): harmonic mean of precision and recall; null when TP = 0"),
    _g("fpr", "FP / (FP + TN): safe samples flagged (over-blocking)"),
    _g("fnr", "FN / (FN + TP): unsafe samples missed"),
    _g("tp", "true positives: unsafe samples flagged unsafe"),
    _g("tn", "true negatives: safe samples passed as safe"),
    _g("fp", "false positives: safe samples flagged unsafe"),
    _g("fn", "false negatives: unsafe samples passed as safe"),
)  # fmt: skip
CATALOG += HARNESS

# The calibration measures (core.calibration.section.calibration_section); `where` is the path
# inside CalibrationSection.to_dict(), which is the sidecar section "calibration" (with
# pipeline.calibration_measures or a calibration gate): CATALOG lists them with that prefix.
CALIBRATION_SECTION: tuple[MetricInfo, ...] = (
    _p("smece", "smooth.value", "smooth ECE (Blasiok & Nakkiran 2023): mean |kernel-smoothed "
       "residual| at the fixed-point bandwidth; 0 = calibrated, bin-free"),
    _p("smece_low, smece_high", "smooth.low, smooth.high", "percentile bootstrap interval of "
       "smooth ECE (bandwidth re-selected per resample, seeded)"),
    _p("smece_bandwidth", "smooth.bandwidth", "the kernel bandwidth sigma* = smECE(sigma*)"),
    _p("reliability curve", "smooth.curve", "smoothed accuracy, bootstrap band and forecast "
       "density on 200 points of [0, 1], at sigma*"),
    _p("ece_top_label", "ece_top_label", "DecGuard's ece (equal-width bins of the top-label "
       "confidence), next to the class-wise one"),
    _p("ece_classwise", "ece_classwise", "mean over labels of the one-vs-rest equal-width ECE of "
       "p_label (Kull et al. 2019); per label in ece_per_label"),
    _p("ece_l2, ece_l2_debiased", "ece_l2, ece_l2_debiased", "l2 ECE over equal-mass bins, plug-in "
       "and with each bin's sampling variance removed (Kumar et al. 2019)"),
    _p("miscalibration", "decomposition.<score>", "CORP (Dimitriadis et al. 2021): score(f) - "
       "score(isotonic recalibration of f); what recalibration would save"),
    _p("discrimination", "decomposition.<score>", "CORP: score(base rate) - score(recalibrated "
       "f); how well the forecasts tell cases apart"),
    _p("uncertainty", "decomposition.<score>", "CORP: score of always forecasting the base rate; "
       "score = miscalibration - discrimination + uncertainty"),
    _p("temperature", "recalibration.temperature", "NLL-minimising temperature (softmax(z/T) of "
       "the logits) on all cases; > 1 over-confident, < 1 under-confident"),
    _p("ece/nll/brier after scaling", "recalibration.after", "DecGuard's ECE, NLL and Brier of "
       "out-of-fold temperature-scaled probabilities (before: recalibration.before)"),
    _p("abstention_threshold", "abstention.threshold", "lowest confidence threshold whose "
       "selective risk is <= alpha with probability >= 1 - delta (Learn then Test)"),
    _p("abstention_coverage", "abstention.coverage", "share of cases kept at the guaranteed "
       "threshold; selective_risk is their observed error rate"),
)  # fmt: skip

SIDECAR_SECTION = "calibration"  # core.calibration.extension.SECTION
CATALOG += tuple(
    replace(m, where=", ".join(f"{SIDECAR_SECTION}.{w}" for w in m.where.split(", ")))
    for m in CALIBRATION_SECTION
)

# A fitted calibrator (sidecar "calibrator": calibrate, test with calibrator keys, the
# calibrator asset; core/calibration/fitting.py), every judging number on the held-out cases
CATALOG += (
    _p("held_out before/after", "calibrator.held_out.measures", "ECE (equal-width and "
       "equal-mass), smooth ECE, Brier, NLL and accuracy of the held-out cases raw and "
       "calibrated, with a paired bootstrap interval of each change"),
    _p("top_label_changes", "calibrator.top_label_changes", "held-out cases whose selected label "
       "the calibrator changed (never for temperature)"),
    _p("conformal.coverage", "calibrator.conformal.coverage", "share of held-out cases whose "
       "split-conformal prediction set (LAC or APS, raw probabilities) holds the expected label; "
       "target 1 - alpha"),
    _p("conformal.mean_set_size", "calibrator.conformal.mean_set_size, singleton_rate",
       "mean size of the held-out prediction sets; share holding exactly one label"),
    _p("abstain_below", "calibrator.abstain_below.abstain_below", "Learn-then-Test "
       "threshold on the held-out calibrated confidence: selective risk <= alpha with "
       "probability >= 1 - delta"),
    _p("escalation sweep", "calibrator.escalation.calibrated[]", "per threshold: coverage, "
       "accuracy on answered cases, hand-off rate, escalation, backend and total cost per "
       "1,000 decisions"),
)  # fmt: skip
