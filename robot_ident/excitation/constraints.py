"""Joint limits with margins, and the dense check every returned trajectory passes.

`LimitSpec` combines the URDF limits of the identified joints (position range,
velocity, effort) with the config (acceleration limits, which URDFs do not carry)
and margins:

* position: ``margins.position`` radians (or metres) inside each end of the range;
* velocity, acceleration, effort: the limit times ``1 - margins.<kind>``.

`check_trajectory` samples a trajectory on a dense grid (default 1 ms, far finer
than the optimisation samples) and reports, per joint and quantity, the worst
value, where it happens and whether it is inside the effective limit. Efforts are
the nominal model's (URDF inertias and friction) and are checked only when asked.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..errors import TrajectoryError
from .parameterisation import Bounds


@dataclass(frozen=True)
class Margins:
    position: float = 0.05       # rad or m, inside each end of the range
    velocity: float = 0.05       # fraction of the limit kept in reserve
    acceleration: float = 0.05
    effort: float = 0.1

    def __post_init__(self):
        for name in ("position", "velocity", "acceleration", "effort"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise TrajectoryError(f"margin {name!r} must be a non-negative number, got {v!r}")
        for name in ("velocity", "acceleration", "effort"):
            if getattr(self, name) >= 1:
                raise TrajectoryError(f"margin {name!r} is a fraction of the limit and must be < 1")


@dataclass(frozen=True)
class LimitSpec:
    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    effort: np.ndarray | None = None     # None: efforts are not constrained
    margins: Margins = field(default_factory=Margins)

    def __post_init__(self):
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        n = len(self.joint_names)
        for name in ("lower", "upper", "velocity", "acceleration", "effort"):
            v = getattr(self, name)
            if v is None:
                continue
            v = np.asarray(v, dtype=float)
            if v.shape != (n,):
                raise TrajectoryError(f"{name} limits must have {n} entries, got {v.shape}")
            object.__setattr__(self, name, v)
        for k, j in enumerate(self.joint_names):
            for name in ("velocity", "acceleration") + (("effort",) if self.effort is not None else ()):
                v = getattr(self, name)[k]
                if not (np.isfinite(v) and v > 0):
                    raise TrajectoryError(f"joint {j!r}: {name} limit must be a positive number, got {v}")
        b = self.bounds()
        for k, j in enumerate(self.joint_names):
            if not b.upper[k] > b.lower[k]:
                raise TrajectoryError(f"joint {j!r}: position range [{self.lower[k]}, {self.upper[k]}] "
                                      f"is empty after the margin of {self.margins.position}")

    @classmethod
    def from_model(cls, model, acceleration: Mapping[str, float] | Sequence[float],
                   margins: Margins | None = None, use_effort: bool = False) -> "LimitSpec":
        """URDF position/velocity/effort limits of the model's joints; accelerations by name."""
        names = model.joint_names
        if isinstance(acceleration, Mapping):
            missing = [j for j in names if j not in acceleration]
            if missing:
                raise TrajectoryError(f"no acceleration limit for joint(s) {', '.join(missing)}")
            acc = np.array([float(acceleration[j]) for j in names])
        else:
            acc = np.asarray(acceleration, dtype=float)
        lim = model.limits
        vel = np.asarray(lim.velocity, dtype=float)
        for k, j in enumerate(names):
            if not (np.isfinite(vel[k]) and vel[k] > 0):
                raise TrajectoryError(f"joint {j!r}: the URDF has no positive velocity limit")
        eff = np.asarray(lim.effort, dtype=float) if use_effort else None
        return cls(names, lim.lower, lim.upper, vel, acc, eff, margins or Margins())

    def bounds(self) -> Bounds:
        m = self.margins
        return Bounds(self.lower + m.position, self.upper - m.position,
                      self.velocity * (1 - m.velocity), self.acceleration * (1 - m.acceleration))

    def effort_bound(self) -> np.ndarray | None:
        return None if self.effort is None else self.effort * (1 - self.margins.effort)

    def to_dict(self) -> dict:
        d = {"lower": self.lower.tolist(), "upper": self.upper.tolist(),
             "velocity": self.velocity.tolist(), "acceleration": self.acceleration.tolist(),
             "margins": {k: getattr(self.margins, k) for k in ("position", "velocity",
                                                              "acceleration", "effort")}}
        d["effort"] = None if self.effort is None else self.effort.tolist()
        return d


@dataclass(frozen=True)
class LimitReport:
    """Outcome of the dense check; ``rows`` are plain dicts (joint, quantity, limit, worst,
    time, ok) so the report goes into the trajectory YAML as is."""

    valid: bool
    dt: float
    n_samples: int
    rows: tuple[dict, ...]

    def violations(self) -> list[dict]:
        return [r for r in self.rows if not r["ok"]]

    def summary(self) -> str:
        if self.valid:
            return f"all limits respected on {self.n_samples} samples (dt {self.dt:g} s)"
        v = self.violations()
        parts = [f"{r['joint']} {r['quantity']} {r['worst']:.4g} (limit {r['limit']:.4g}) at t={r['time']:.4g} s"
                 for r in v[:5]]
        return f"{len(v)} limit violation(s): " + "; ".join(parts)

    def to_dict(self) -> dict:
        return {"valid": self.valid, "dt": self.dt, "n_samples": self.n_samples,
                "checks": [dict(r) for r in self.rows]}

    @classmethod
    def from_dict(cls, d) -> "LimitReport":
        return cls(bool(d["valid"]), float(d["dt"]), int(d["n_samples"]),
                   tuple(dict(r) for r in d["checks"]))


def check_trajectory(traj, limits: LimitSpec, model=None, dt: float = 1e-3, start=None,
                     start_tol: float = 1e-9, chunk: int = 2000) -> LimitReport:
    """Check positions, velocities, accelerations (and nominal efforts if the spec has effort
    limits and a model is given) on a grid of step ``dt`` that includes both ends; and, if
    ``start`` is given, that the trajectory begins there."""
    if tuple(traj.joint_names) != limits.joint_names:
        raise TrajectoryError(f"trajectory joints {traj.joint_names} differ from the limit joints "
                              f"{limits.joint_names}")
    T = float(traj.duration)
    n_pts = int(np.ceil(T / dt)) + 1
    t = np.linspace(0.0, T, n_pts)
    q, qd, qdd = traj.sample(t)
    b = limits.bounds()
    rows = []

    def add(j, quantity, limit, values, worst_idx, ok):
        rows.append({"joint": limits.joint_names[j], "quantity": quantity, "limit": float(limit),
                     "worst": float(values[worst_idx]), "time": float(t[worst_idx]), "ok": bool(ok)})

    for j in range(len(limits.joint_names)):
        i = int(np.argmin(q[:, j]))
        add(j, "position_min", b.lower[j], q[:, j], i, q[i, j] >= b.lower[j])
        i = int(np.argmax(q[:, j]))
        add(j, "position_max", b.upper[j], q[:, j], i, q[i, j] <= b.upper[j])
        a = np.abs(qd[:, j])
        i = int(np.argmax(a))
        add(j, "velocity", b.velocity[j], a, i, a[i] <= b.velocity[j])
        a = np.abs(qdd[:, j])
        i = int(np.argmax(a))
        add(j, "acceleration", b.acceleration[j], a, i, a[i] <= b.acceleration[j])
    if limits.effort is not None and model is not None:
        eb = limits.effort_bound()
        tau = np.concatenate([model.efforts(q[s:s + chunk], qd[s:s + chunk], qdd[s:s + chunk])
                              for s in range(0, n_pts, chunk)])
        for j in range(len(limits.joint_names)):
            a = np.abs(tau[:, j])
            i = int(np.argmax(a))
            add(j, "effort", eb[j], a, i, a[i] <= eb[j])
    if start is not None:
        start = np.asarray(start, dtype=float)
        dev = np.abs(q[0] - start)
        for j in range(len(limits.joint_names)):
            rows.append({"joint": limits.joint_names[j], "quantity": "start_pose", "limit": float(start_tol),
                         "worst": float(dev[j]), "time": 0.0, "ok": bool(dev[j] <= start_tol)})
    valid = all(r["ok"] for r in rows)
    return LimitReport(valid, float(t[1] - t[0]) if n_pts > 1 else 0.0, n_pts, tuple(rows))
