"""One body's inertial parameters [m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] as a 4x4
pseudo-inertia matrix and back: physically consistent exactly when it is positive
definite (Wensing, Kim and Slotine 2017). Used by the physical estimate, its bounds and
the plausibility checks."""
from __future__ import annotations

import numpy as np


def pseudo_inertia(theta10: np.ndarray) -> np.ndarray:
    """4x4 pseudo-inertia of one body from [m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]."""
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = np.asarray(theta10, float)
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(I) * np.eye(3) - I
    J[:3, 3] = J[3, :3] = (hx, hy, hz)
    J[3, 3] = m
    return J


def dynamic_from_pseudo(J: np.ndarray) -> np.ndarray:
    S = J[:3, :3]
    I = np.trace(S) * np.eye(3) - S
    return np.array([J[3, 3], J[0, 3], J[1, 3], J[2, 3], I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])


def is_physical(theta10: np.ndarray, margin: float = 0.0) -> bool:
    return bool(np.linalg.eigvalsh(pseudo_inertia(theta10))[0] > margin)


def body_is_physical(dyn10: np.ndarray, tol: float = 0.0) -> tuple[bool, str]:
    """Check one body's 10 parameters; returns (ok, reason)."""
    m = float(dyn10[0])
    if not np.isfinite(dyn10).all():
        return False, "non-finite parameters"
    if m <= 0:
        return False, f"mass {m:.4g} kg is not positive"
    _, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = np.asarray(dyn10, float)
    c = np.array([hx, hy, hz]) / m
    I_o = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    I_c = I_o - m * (c @ c * np.eye(3) - np.outer(c, c))        # parallel axis: about the centre of mass
    ev = np.linalg.eigvalsh(0.5 * (I_c + I_c.T))
    if ev[0] <= tol:
        return False, f"inertia about the centre of mass is not positive definite (eigenvalues {ev})"
    if ev[0] + ev[1] < ev[2] * (1 - 1e-9):
        return False, f"principal moments {ev} violate the triangle inequality"
    return True, ""
