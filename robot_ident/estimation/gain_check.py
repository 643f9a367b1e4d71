"""The gain / direction check's accumulation: the measured effort regressed on a
prediction (default: the CAD model's rigid-body efforts), block by block, in bounded
memory. A whole recording in memory is one block; the judgement is
`plausibility.judge_gains`.

Per joint, the slope and partial correlation of the measured effort on the prediction,
with the columns [1, qd, tanh(qd / scale), qdd] projected out, depend on the samples
only through the 6 x 6 Gram matrix of [1, qd, tanh(qd / scale), qdd, prediction,
effort]. It is kept as an R factor (QR of the previous R stacked on the new rows,
numpy's LAPACK QR) rather than as the Gram matrix itself: R^T R is that Gram matrix,
and `plausibility.projected_slope` runs the least squares on the 6 rows of R with the
rank cut-off of the N rows, so near-collinear columns (a joint that barely moves) are
handled as on the rows and the rounding of squared sums is avoided.
"""
from __future__ import annotations

import numpy as np

from .plausibility import gain_columns, projected_slope


class GainCheck:
    """`add(ProcessedData)` block by block (any joint order, matched by name), then
    `slopes()`: joint -> (slope, partial correlation) over every block added."""

    def __init__(self, model, predict=None):
        self.model = model
        self.predict = predict       # data -> (N, n) efforts to compare with (default: the CAD model's)
        self.joints = tuple(model.joint_names)
        self.R: list[np.ndarray] | None = [np.zeros((0, 6)) for _ in self.joints]
        self.n_rows = 0

    def add(self, data) -> None:
        if self.R is None or data.n_samples == 0:
            return
        if tuple(data.joint_names) != self.joints:          # model order
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
        """joint -> (slope, partial correlation) of everything added ({} when nothing was, or
        the model cannot predict efforts)."""
        if self.R is None or self.n_rows == 0:
            return {}
        return {j: projected_slope(self.R[k], self.n_rows) for k, j in enumerate(self.joints)}


def gain_slopes(model, parts, predict=None) -> dict:
    """`GainCheck.slopes` of processed parts in memory (each one block)."""
    acc = GainCheck(model, predict)
    for p in parts:
        acc.add(p)
    return acc.slopes()
