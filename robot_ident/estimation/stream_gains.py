"""The gain / direction check (`plausibility.check_gains`) on processed samples that
arrive in blocks, in bounded memory.

Per joint, the check regresses the measured effort on the CAD model's prediction with
the columns [1, qd, tanh(qd / scale), qdd] projected out; the slope and partial
correlation depend on the samples only through the 6 x 6 Gram matrix of
[1, qd, tanh(qd / scale), qdd, prediction, effort]. It is kept as an R factor (QR of
the previous R stacked on the new rows, numpy's LAPACK QR) rather than as the Gram
matrix itself: R^T R is that Gram matrix, and `plausibility.projected_slope` runs the
in-memory path's least squares on the 6 rows of R with the rank cut-off of the N rows,
so near-collinear columns (a joint that barely moves) are treated alike and the
rounding of squared sums is avoided.
"""
from __future__ import annotations

import numpy as np

from .plausibility import gain_columns, projected_slope


class StreamedGains:
    """`add(ProcessedData)` block by block, then `slopes()` = `plausibility.gain_slopes`
    of all the blocks concatenated (to round-off)."""

    def __init__(self, model, predict=None):
        self.model = model
        self.predict = predict       # data -> (N, n) efforts to compare with (default: the CAD model's)
        self.joints = tuple(model.joint_names)
        self.R: list[np.ndarray] | None = [np.zeros((0, 6)) for _ in self.joints]
        self.n_rows = 0

    def add(self, data) -> None:
        if self.R is None or data.n_samples == 0:
            return
        if tuple(data.joint_names) != self.joints:          # model order (as the in-memory path processes)
            idx = [list(data.joint_names).index(j) for j in self.joints]
            data = type(data)(data.t, self.joints, *(getattr(data, f)[:, idx]
                                                    for f in ("q", "qd", "qdd", "effort", "effort_raw")))
        cols = gain_columns(self.model, data, None if self.predict is None else self.predict(data))
        if cols is None:                       # no model to predict the efforts: no gain check
            self.R = None
            return
        for k in range(len(self.joints)):
            self.R[k] = np.linalg.qr(np.vstack([self.R[k], cols[:, k, :]]), mode="r")
        self.n_rows += data.n_samples

    def slopes(self) -> dict:
        """joint -> (slope, partial correlation), as `plausibility.gain_slopes` gives them."""
        if self.R is None or self.n_rows == 0:
            return {}
        return {j: projected_slope(self.R[k], self.n_rows) for k, j in enumerate(self.joints)}
