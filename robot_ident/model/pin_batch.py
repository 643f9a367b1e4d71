"""Pinocchio's joint torque regressor over many samples: the loop of Pinocchio calls
behind `RobotModel.regressor` and the excitation criterion's fast path (the closed-chain
model calls Pinocchio on its own, a sample at a time).

Pinocchio has no batched regressor, so the samples are looped over in Python, one call
each, writing into the caller's array: `RobotModel.regressor` hands in the slice of its
result itself, where it used to fill a freshly allocated buffer and copy that. On the
pipeline's chunks (4 000 samples) that copy was a fifth of the regressor's time on the
demo arm (5.72 against 4.67 us a sample); on one call of 20 000 samples, where the buffer
is reused, about 7 %."""
from __future__ import annotations

import numpy as np
import pinocchio as pin


def joint_torque_regressors(model, data, Q: np.ndarray, V: np.ndarray, A: np.ndarray, out: np.ndarray) -> None:
    """out[s] = Pinocchio's joint torque regressor (nv, 10 * (njoints - 1)) at sample s of
    the states Q (N, nq), V (N, nv), A (N, nv)."""
    if not len(Q) == len(V) == len(A) == len(out):
        raise ValueError(f"{len(Q)} positions, {len(V)} velocities, {len(A)} accelerations and {len(out)} "
                         "output rows: one of each per sample")
    reg = pin.computeJointTorqueRegressor
    for s, (a, b, c) in enumerate(zip(Q, V, A)):
        out[s] = reg(model, data, a, b, c)
