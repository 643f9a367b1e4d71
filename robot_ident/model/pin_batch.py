"""Pinocchio's joint torque regressor over many samples: one call per sample, as little
Python around each call as possible.

Pinocchio has no batched regressor, so the samples are looped over in Python. Most of a
sample's cost was the conversion of the returned matrix into a fresh numpy array (about
4.5 of 7.4 us for a 6-joint arm). Pinocchio allocates `Data.jointTorqueRegressor` once,
with the Data, and each call writes into it in place (algorithm/regressor.hxx: setZero,
then blocks); read once from Python it is a view of that matrix, so each sample is
copied from the view instead (3.4 us). Whether the binding gives a view (eigenpy's
default) is checked once per process; where it gives a copy, the returned matrices are
used as before."""
from __future__ import annotations

import numpy as np
import pinocchio as pin

_VIEW_TRACKS: bool | None = None


def _view_tracks(model, data) -> bool:
    """Whether `data.jointTorqueRegressor`, read once, follows later regressor calls."""
    global _VIEW_TRACKS
    if _VIEW_TRACKS is None:
        view = getattr(data, "jointTorqueRegressor", None)
        ok = isinstance(view, np.ndarray)
        rng = np.random.default_rng(0)
        for _ in range(2):     # two different states: a copy taken at the first cannot match both
            v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
            ok = ok and np.array_equal(pin.computeJointTorqueRegressor(model, data, pin.neutral(model), v, a),
                                       view)
        _VIEW_TRACKS = ok
    return _VIEW_TRACKS


def joint_torque_regressors(model, data, Q: np.ndarray, V: np.ndarray, A: np.ndarray, out: np.ndarray) -> None:
    """out[s] = Pinocchio's joint torque regressor (nv, 10 * (njoints - 1)) at sample s of
    the states Q (N, nq), V (N, nv), A (N, nv)."""
    reg = pin.computeJointTorqueRegressor
    if _view_tracks(model, data):
        view = data.jointTorqueRegressor
        for s, (a, b, c) in enumerate(zip(Q, V, A)):
            reg(model, data, a, b, c)
            out[s] = view
    else:
        for s, (a, b, c) in enumerate(zip(Q, V, A)):
            out[s] = reg(model, data, a, b, c)
