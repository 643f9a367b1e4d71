"""The gain / direction check's accumulation: the measured efforts regressed on a
prediction (default: the CAD model's rigid-body efforts), block by block, in bounded
memory. A whole recording in memory is one block; the judgement is
`plausibility.judge_gains`.

Per joint (`slopes`): the measured effort regressed on the prediction with the columns
[1, qd, tanh(qd / scale), qdd] (offset, viscous, Coulomb, armature) projected out. The
slope and partial correlation depend on the samples only through the 6 x 6 Gram matrix
of [1, qd, tanh(qd / scale), qdd, prediction, effort]; it is kept as an R factor (QR of
the previous R stacked on the new rows, numpy's LAPACK QR), on which
`projected_slope` runs the least squares of the rows.

With a tool (`with_tool`, CAD prediction only): one problem over every joint's rows,

    effort_j = a_j prediction_j + [1, qd_j, tanh(qd_j / scale), qdd_j] c_j + Y_last,j pi + Y_other,j o

where `pi` are the 10 inertial parameters of a tool or payload on the last body that
the URDF lacks, shared by every joint as a real tool is, and `o` the model's parameters
beyond the rigid bodies (armature, friction and offsets, which a coupled group's motors
spread over its joints; springs): the CAD predicts none of them. Per joint (`slopes`)
these other columns are projected out too. Efforts above the CAD model's
that such a tool explains are a payload, not a wrong gain (the demo's simulated arm
carries 0.8 kg the URDF lacks; so do most real arms with a gripper). Each joint's
slope and partial correlation come from that problem's R factor: its prediction column and
the efforts with every other column projected out (least squares); a joint whose prediction
the other columns explain (the last joint moves only the last body) has none.

What a CAD error can do to the prediction (`uncertain`, CAD prediction only): a joint
whose bodies carry their centres of mass near its axis (a wrist roll) gets from the CAD
a prediction beyond its own inertia and friction that a few millimetres of centre of
mass error change in size and sign. With the columns ``m_b * COM_UNCERTAINTY *
Y[:, (b, m c_a)]`` (the prediction's change for a shift of each body's centre of mass
along each axis; the first moments only) between the own columns and the prediction,
the joint's prediction is uncertain when the sum of their norms with the own columns
projected out reaches the prediction's own: its gain and direction are not judged.
"""
from __future__ import annotations

import numpy as np

from .r_factor import r_factor


def cad_efforts(model, data) -> np.ndarray | None:
    """(N, n) the CAD model's rigid-body efforts at the samples (None: no model to predict)."""
    if hasattr(model, "rnea"):
        return model.rnea(data.q, data.qd, data.qdd)
    if hasattr(model, "efforts"):          # closed chains: the nominal model's efforts
        return model.efforts(data.q, data.qd, data.qdd)
    return None


def gain_columns(model, data, pred=None) -> np.ndarray | None:
    """(N, n, 6): per sample and joint [1, qd, tanh(qd / scale), qdd, prediction, effort],
    the prediction by default the CAD model's rigid-body efforts (None: no model to predict)."""
    if pred is None:
        pred = cad_efforts(model, data)
        if pred is None:
            return None
    qd = data.qd
    scale = model.friction.coulomb_velocity_scale
    return np.stack([np.ones_like(qd), qd, np.tanh(qd / scale), data.qdd, pred, data.effort], axis=2)


def _projector(A: np.ndarray, n_rows: int | None, n_own: int = 4):
    """y -> y with the first `n_own` columns of `A` projected out (least squares)."""
    F = A[:, :n_own]
    rcond = np.finfo(float).eps * max(A.shape[0] if n_rows is None else n_rows, 4)
    return lambda y: y - F @ np.linalg.lstsq(F, y, rcond=rcond)[0]


def projected_slope(A: np.ndarray, n_rows: int | None = None, n_own: int = 4) -> tuple[float, float]:
    """(slope, partial correlation) of the last column of `A` regressed on the one before it
    with the first `n_own` projected out (least squares). `A` may be the samples' rows or any
    matrix with the same Gram matrix (an R factor of them, `n_rows` then the number of
    samples: it sets the rank cut-off as `numpy.linalg.lstsq` sets it on the rows)."""
    proj = _projector(A, n_rows, n_own)
    p, y = proj(A[:, -2]), proj(A[:, -1])
    pp, yy = float(p @ p), float(y @ y)
    if pp <= 0 or yy <= 0:
        return float("nan"), 0.0
    return float(p @ y) / pp, float(p @ y) / np.sqrt(pp * yy)


SEPARABLE = 1e-6    # |r_pp| below this fraction of the prediction column's norm: no measurable gain
COM_UNCERTAINTY = 0.005   # m: a CAD centre of mass's error the gain check allows for (`uncertain`)
BLOCK = 4096        # samples per QR update


class GainCheck:
    """`add(ProcessedData)` block by block (any joint order, matched by name), then
    `slopes()` and `with_tool()` over every block added."""

    def __init__(self, model, predict=None):
        self.model = model
        self.predict = predict       # data -> (N, n) efforts to compare with (default: the CAD model's)
        self.joints = tuple(model.joint_names)
        n = len(self.joints)
        self.R: list[np.ndarray] | None = [np.zeros((0, 6)) for _ in self.joints]
        self.n_rows = 0
        layout = getattr(model, "layout", None)
        self.tool_cols = None               # the last body's columns in the standard regressor
        if predict is None and hasattr(model, "rnea") and getattr(layout, "body_joints", ()):
            self.tool_cols = layout.inertial_slice(layout.body_joints[-1])
        self.extra = None                   # per joint: its other and COM-shift columns, and their scales
        self.n_own = [4] * n                # per joint: its own columns, projected out of the prediction
        self.tool_other: list = []          # the other columns in the tool problem
        if self.tool_cols is not None:
            self.extra = self._extra_columns(model, layout)
            self.n_own = [4 + len(other) for other, _, _ in self.extra]
            self.R = [np.zeros((0, 6 + len(o) + len(c))) for o, c, _ in self.extra]
            self.tool_other = sorted({c for other, _, _ in self.extra for c in other})
        self.width = 5 * n + 11 + len(self.tool_other)   # own x4, predictions, tool x10, other columns, effort
        self.R_tool = np.zeros((0, self.width)) if self.tool_cols is not None else None

    @staticmethod
    def _extra_columns(model, layout) -> list:
        """Per joint, the regressor columns that reach its effort (probed at random states):
        (the model's non-rigid-body columns -- armature, friction and offset of a coupled group's
        motors, springs: the CAD predicts none of them, the identification fits them --, the
        first moments of the bodies it carries, their COM_UNCERTAINTY x CAD mass scales)."""
        rng = np.random.default_rng(0)
        lo, hi = np.nan_to_num(model.limits.lower, nan=-np.pi), np.nan_to_num(model.limits.upper, nan=np.pi)
        shape = (3, model.n)
        q = rng.uniform(np.maximum(lo, -np.pi), np.minimum(hi, np.pi), shape)
        Y = np.abs(model.regressor(q, rng.normal(size=shape), rng.normal(size=shape))).reshape(3, model.n, -1).max(0)
        nominal = np.asarray(model.nominal, float)
        moments = [c + a for c in (layout.inertial_slice(b).start for b in layout.body_joints) for a in (1, 2, 3)]
        # an uncoupled joint's own armature, Coulomb, viscous and offset columns repeat [qdd, tanh, qd, 1]
        act = {layout.index(f"{u}.{sym}") for u in layout.actuator_joints for sym in layout.actuator_symbols}
        repeat = {c for c in act if np.count_nonzero(Y[:, c]) == 1}
        out = []
        for k in range(model.n):
            other = [c for c in range(layout.n_inertial, layout.size) if Y[k, c] > 0 and c not in repeat]
            com = [c for c in moments if Y[k, c] > 0]
            out.append((other, com, nominal[[10 * (c // 10) for c in com]] * COM_UNCERTAINTY))   # each body's mass
        return out

    def add(self, data) -> None:
        if self.R is None or data.n_samples == 0:
            return
        if tuple(data.joint_names) != self.joints:          # model order
            idx = [list(data.joint_names).index(j) for j in self.joints]
            data = type(data)(data.t, self.joints, *(getattr(data, f)[:, idx]
                                                    for f in ("q", "qd", "qdd", "effort", "effort_raw")))
        for a in range(0, data.n_samples, BLOCK):          # bounded memory for a recording given whole
            self._add(data.subset(np.arange(a, min(a + BLOCK, data.n_samples))))
            if self.R is None:
                return
        self.n_rows += data.n_samples

    def _add(self, data) -> None:
        n = len(self.joints)
        Y = pred = None
        if self.tool_cols is not None:
            ni = self.model.layout.n_inertial
            Y = self.model.regressor(data.q, data.qd, data.qdd).reshape(data.n_samples, n, -1)
            pred = Y[:, :, :ni] @ np.asarray(self.model.nominal, float)[:ni]      # = the CAD's RNEA
        elif self.predict is not None:
            pred = self.predict(data)
        cols = gain_columns(self.model, data, pred)        # (N, n, 6): 1, qd, tanh, qdd, prediction, effort
        if cols is None:                                   # no model to predict the efforts: no gain check
            self.R = None
            return
        for k in range(n):
            rows = cols[:, k, :]
            if self.extra is not None:    # the joint's other columns, then its COM-shift ones, before the prediction
                other, com, scale = self.extra[k]
                rows = np.hstack([rows[:, :4], Y[:, k, other], Y[:, k, com] * scale, rows[:, 4:]])
            self.R[k] = r_factor(self.R[k], rows)
        if Y is not None:
            A = np.zeros((data.n_samples, n, self.width))
            for k in range(n):
                A[:, k, 4 * k:4 * k + 4] = cols[:, k, :4]
                A[:, k, 4 * n + k] = cols[:, k, 4]
            A[:, :, 5 * n:5 * n + 10] = Y[:, :, self.tool_cols]
            A[:, :, 5 * n + 10:-1] = Y[:, :, self.tool_other]
            A[:, :, -1] = cols[:, :, 5]
            self.R_tool = r_factor(self.R_tool, A.reshape(-1, self.width))

    def totals(self) -> tuple:
        """What `add` accumulated, to be carried from another process to `take`."""
        return self.R, self.R_tool, self.n_rows

    def take(self, totals: tuple) -> None:
        self.R, self.R_tool, self.n_rows = totals

    def slopes(self) -> dict:
        """joint -> (slope, partial correlation) ({} when nothing was added, or the model
        cannot predict efforts)."""
        if self.R is None or self.n_rows == 0:
            return {}
        return {j: projected_slope(self.R[k], self.n_rows, self.n_own[k]) for k, j in enumerate(self.joints)}

    def uncertain(self) -> dict:
        """joint -> ratio of what a COM_UNCERTAINTY error of the CAD's centres of mass can change
        in its prediction (beyond its own inertia and friction) to that prediction, for the joints
        where it is 1 or more: there the CAD does not say the effort's size or sign."""
        if self.R is None or self.n_rows == 0 or self.extra is None:
            return {}
        out = {}
        for k, j in enumerate(self.joints):
            A = self.R[k]
            proj = _projector(A, self.n_rows, self.n_own[k])
            p = float(np.linalg.norm(proj(A[:, -2])))
            bound = sum(float(np.linalg.norm(proj(A[:, c]))) for c in range(self.n_own[k], A.shape[1] - 2))
            if p == 0.0 or bound >= p:
                out[j] = bound / p if p > 0 else float("inf")
        return out

    def with_tool(self) -> tuple[dict, np.ndarray | None]:
        """(joint -> (slope, partial correlation) with a tool on the last body fitted alongside,
        the tool's 10 inertial parameters); ({}, None) without a CAD prediction or data.
        (nan, 0) for a joint whose prediction the other columns explain."""
        if self.R is None or self.R_tool is None or self.R_tool.shape[0] < self.width:
            return {}, None
        n, R = len(self.joints), self.R_tool
        out = {}
        for k, j in enumerate(self.joints):
            p = 4 * n + k
            # least squares on the R factor (the model's other columns repeat an uncoupled joint's own:
            # rank-deficient, so not the bottom 2 x 2 block of a re-triangularisation)
            cols = [c for c in range(self.width - 1) if c != p] + [p, self.width - 1]
            proj = _projector(R[:, cols], self.n_rows, self.width - 2)
            pr, yr = proj(R[:, p]), proj(R[:, -1])
            norm_p, pp = float(np.linalg.norm(R[:, p])), float(pr @ pr)
            if norm_p == 0 or not np.sqrt(pp) > SEPARABLE * norm_p:
                out[j] = (float("nan"), 0.0)
                continue
            out[j] = (float(pr @ yr) / pp, float(pr @ yr) / float(np.sqrt(pp * (yr @ yr))))
        x = np.linalg.lstsq(R[:, :-1], R[:, -1], rcond=None)[0]
        return out, x[5 * n:5 * n + 10]

    def tool(self) -> tuple | None:
        """What `plausibility.judge_gains` takes as `tool`: (slopes with the tool, its 10
        parameters, the joint of the last body), or None."""
        slopes, pi = self.with_tool()
        return None if pi is None else (slopes, pi, self.model.layout.body_joints[-1])
