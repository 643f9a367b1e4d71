"""Pinocchio's joint torque regressor over many samples: the one loop of Pinocchio calls
behind `RobotModel.regressor` and the excitation criterion's fast path.

Pinocchio has no batched regressor, so the samples are looped over in Python, one call
each, writing into the caller's array: `RobotModel.regressor` hands in the slice of its
result itself, where it used to fill a buffer and copy that (the copy was a fifth of the
regressor's time on the demo arm)."""
from __future__ import annotations

import numpy as np
import pinocchio as pin


def joint_torque_regressors(model, data, Q: np.ndarray, V: np.ndarray, A: np.ndarray, out: np.ndarray) -> None:
    """out[s] = Pinocchio's joint torque regressor (nv, 10 * (njoints - 1)) at sample s of
    the states Q (N, nq), V (N, nv), A (N, nv)."""
    reg = pin.computeJointTorqueRegressor
    for s, (a, b, c) in enumerate(zip(Q, V, A)):
        out[s] = reg(model, data, a, b, c)
