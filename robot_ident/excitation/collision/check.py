"""The dense collision check every trajectory passes before it is returned, simulated or sent.

`check_collisions` samples the trajectory every ``dt`` (default 1 ms, both ends
included; a coarser step is refused unless it is below margin / (2 v_max), where
v_max bounds the Cartesian speed of any geometry point from the joint speeds and
the lever bounds of the model) and reports the closest pair, its distance and its
time, and every pair closer than its margin. Distances are the original geometry's where a
convex hull is closer than the margin (`CollisionModel.clearances`): a trajectory is never
accepted on hulls alone near a contact.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import TrajectoryError


@dataclass(frozen=True)
class CollisionReport:
    valid: bool
    checked: bool                 # False: no collision model (nothing was checked)
    margin: float
    dt: float
    n_samples: int
    n_pairs: int
    closest_pair: str | None
    closest_distance: float | None
    closest_time: float | None
    violations: tuple[dict, ...] = ()     # {pair, distance, time} per pair below the margin, worst first

    def summary(self) -> str:
        if not self.checked:
            return "collisions NOT checked (no collision geometry)"
        head = (f"closest pair {self.closest_pair}: {self.closest_distance:.4g} m at t={self.closest_time:.4g} s "
                f"({self.n_pairs} pairs, {self.n_samples} samples, dt {self.dt:g} s, margin {self.margin:g} m)")
        if self.valid:
            return "no collision: " + head
        v = "; ".join(f"{r['pair']} {r['distance']:.3g} m at t={r['time']:.4g} s" for r in self.violations[:5])
        return f"{len(self.violations)} pair(s) closer than the margin {self.margin:g} m: {v}"

    def to_dict(self) -> dict:
        return {"valid": self.valid, "checked": self.checked, "margin": self.margin, "dt": self.dt,
                "n_samples": self.n_samples, "pairs": self.n_pairs,
                "closest": {"pair": self.closest_pair, "distance": self.closest_distance, "time": self.closest_time},
                "violations": [dict(v) for v in self.violations]}

    @classmethod
    def from_dict(cls, d) -> "CollisionReport":
        c = d.get("closest") or {}
        return cls(bool(d["valid"]), bool(d.get("checked", True)), float(d["margin"]), float(d["dt"]),
                   int(d["n_samples"]), int(d.get("pairs", 0)), c.get("pair"), c.get("distance"), c.get("time"),
                   tuple(dict(v) for v in d.get("violations") or ()))


def unchecked_report() -> CollisionReport:
    return CollisionReport(True, False, 0.0, 0.0, 0, 0, None, None, None)


def report_from_distances(cm, t, D, dt) -> CollisionReport:
    """The report of the acceptance distances D (`CollisionModel.clearances`) at times t."""
    margin = cm.margin
    if D.shape[1] == 0:
        return CollisionReport(True, True, margin, dt, len(t), 0, None, None, None)
    pmin = D.min(axis=0)
    imin = D.argmin(axis=0)
    p = int(np.argmin(pmin))
    viol = [{"pair": cm.pair_label(k), "distance": float(pmin[k]), "time": float(t[imin[k]]),
             "margin": float(cm.margins[k])}
            for k in np.argsort(pmin - cm.margins) if pmin[k] < cm.margins[k]]
    return CollisionReport(not viol, True, margin, float(dt), len(t), cm.n_pairs, cm.pair_label(p),
                           float(pmin[p]), float(t[imin[p]]), tuple(viol))


def check_collisions(traj, cm, dt: float = 1e-3) -> CollisionReport:
    """Distances of every checked pair on a grid of step ``dt`` over the whole trajectory."""
    if cm is None or not cm.has_geometry:
        return unchecked_report()
    if not dt > 0:
        raise TrajectoryError(f"collision check step must be positive, got {dt}")
    T = float(traj.duration)
    n_pts = int(np.ceil(T / dt)) + 1
    t = np.linspace(0.0, T, n_pts)
    D = cm.clearances(traj.sample(t)[0], path=True)
    return report_from_distances(cm, t, D, float(t[1] - t[0]) if n_pts > 1 else 0.0)


