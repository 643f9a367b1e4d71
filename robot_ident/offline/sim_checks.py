"""`simulate` re-checks the trajectory itself: the limit report stored in a trajectory
file is what its writer claimed, not a fact about this URDF (a hand-edited or foreign
file can be 5 x over the limits and still say "valid")."""
from __future__ import annotations

import numpy as np

from ..errors import TrajectoryError

TOLERANCE = 1e-6     # relative: round-off of a trajectory designed right at a limit


def check_trajectory_against_urdf(traj, model, label: str, dt: float = 1e-3) -> None:
    """Raise `TrajectoryError` naming the joint, quantity, worst value and time when the
    trajectory leaves the URDF position or velocity limits of `model`'s joints."""
    T = float(traj.duration)
    t = np.linspace(0.0, T, int(np.ceil(T / dt)) + 1)
    q, qd, _ = traj.sample(t)
    idx = [model.joint_names.index(j) for j in traj.joint_names]
    lim = model.limits
    problems = []
    for c, k in enumerate(idx):
        j = model.joint_names[k]
        lo, hi, v = float(lim.lower[k]), float(lim.upper[k]), float(lim.velocity[k])
        span = max(hi - lo, 1.0) if np.isfinite(hi - lo) else 1.0
        if np.isfinite(lo) and q[:, c].min() < lo - TOLERANCE * span:
            i = int(np.argmin(q[:, c]))
            problems.append(f"joint {j!r} position {q[i, c]:.4g} below the URDF limit {lo:.4g} at t={t[i]:.3f} s")
        if np.isfinite(hi) and q[:, c].max() > hi + TOLERANCE * span:
            i = int(np.argmax(q[:, c]))
            problems.append(f"joint {j!r} position {q[i, c]:.4g} above the URDF limit {hi:.4g} at t={t[i]:.3f} s")
        if np.isfinite(v) and v > 0 and np.abs(qd[:, c]).max() > v * (1 + TOLERANCE):
            i = int(np.argmax(np.abs(qd[:, c])))
            problems.append(f"joint {j!r} velocity {qd[i, c]:.4g} beyond the URDF limit {v:.4g} at t={t[i]:.3f} s")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise TrajectoryError(f"trajectory {label} leaves the limits of the URDF: {problems[0]}{more}; "
                              "its stored limit report is not trusted")
