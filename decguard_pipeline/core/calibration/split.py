"""Which golden cases fit a calibrator and which are held out to judge it.

``pipeline.calibration.split: {fraction, seed}`` splits the dataset's labeled cases within each
expected label: per label (in the contract's order) its cases are shuffled by one generator
seeded with ``seed`` and the first ``round(fraction × count)`` (halves rounded up) fit the
calibrator. The split is a property of the dataset and the settings, never of the model's
answers: every model version is judged on the same held-out cases, and a case that errored
is left out of whichever side it fell on. (``split: {dataset: FILE}`` fits on another file
and holds out every golden case: no split is needed.)
"""

from __future__ import annotations

import numpy as np


def stratified_split(expected: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A boolean mask of the calibration cases among ``expected`` (label index per case, −1
    for unlabeled: never calibration)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError("the calibration fraction must lie strictly between 0 and 1")
    e = np.asarray(expected, dtype=np.int64)
    mask = np.zeros(len(e), dtype=bool)
    rng = np.random.default_rng(seed)
    for label in np.unique(e[e >= 0]).tolist():
        rows = np.flatnonzero(e == label)
        take = int(np.floor(fraction * len(rows) + 0.5))
        mask[rng.permutation(rows)[:take]] = True
    return mask
