"""Which pairs are checked, and with which margin: no pair is left out without proof.

A candidate pair (two bodies of the reduced model, or a moving body and an environment
object) is left out only when
  (a) its geometries hang on the same body or on a parent and child (model.py),
  (b) the SRDF disables every link pair between the two bodies (model.py), or
  (c) its original geometry (not the hulls) is in contact in at least ALWAYS_FRACTION of
      the poses sampled uniformly inside the joint limits (a continuous joint: the whole
      turn) -- MoveIt's setup assistant calls such pairs "always in collision". A moving
      body always inside the floor or a box is a configuration error, not a pair to skip.
Every other pair is checked. A pair that is never as far apart as the margin over the
sampled poses is close by construction (the UR5's forearm and wrist 2 are at most 1.6 cm
apart, its shoulder stays 2.4 cm above its mounting plane); it is checked with a reduced
margin, never dropped: REDUCED_FRACTION of the best clearance (at least MIN_MARGIN) its original geometry reaches
over the sampled poses, where that is below the margin (so a pair that can get only a
little farther than the margin, the UR5's upper arm 3.2 cm above its mounting plane at
best, is not confined to the few poses where it does). No decision is taken at a pose outside the limits: the
zero pose of the Kinova JACO2 is outside them and folds the arm into itself.

Two margins per checked pair: `margin`, kept by the original geometry (what a trajectory
is accepted on), and `hull_margin` <= margin, what the optimiser keeps on the convex hulls
(the hulls' own best clearance times REDUCED_FRACTION where it is below the margin).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError

ALWAYS_FRACTION = 0.99      # in contact in at least this fraction of the sampled poses: left out
REDUCED_FRACTION = 0.75     # a structurally close pair keeps this fraction of its best clearance
N_POSES = 1000              # poses sampled inside the joint limits
MIN_MARGIN = 1e-3          # m: no reduced margin below this (meshes in contact measure 0)
N_BEST = 64                 # original geometry measured at the poses of the N_BEST farthest hulls and N_BEST others


@dataclass(frozen=True)
class PairDecision:
    first: str                      # geometry names (a body's hull: link+link+...; environment: floor, box:<name>)
    second: str
    kind: str                       # "self" or "environment"
    status: str                     # "checked", "reduced" (checked with a reduced margin) or "skipped"
    reason: str
    margin: float | None = None     # kept by the original geometry (None: skipped)
    hull_margin: float | None = None
    best_clearance: float | None = None     # the original geometry's, over the sampled poses (where measured)

    @property
    def label(self) -> str:
        return f"{self.first} - {self.second}"

    def to_dict(self) -> dict:
        d = {"pair": self.label, "status": self.status, "reason": self.reason}
        if self.margin is not None:
            d["margin"] = float(self.margin)
        return d


def in_limit_poses(lower, upper, n: int = N_POSES, seed: int = 0) -> np.ndarray:
    """(n, len(lower)) poses uniform inside [lower, upper]; an unbounded joint (continuous)
    over one whole turn [-pi, pi]."""
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    free = ~(np.isfinite(lo) & np.isfinite(hi))
    lo, hi = np.where(free, -np.pi, lo), np.where(free, np.pi, hi)
    return np.random.default_rng(seed).uniform(lo, hi, (int(n), len(lo)))


def decide_pairs(names, kinds, D_hull, original_distances, margin: float):
    """One PairDecision per candidate pair from the hull distances `D_hull` (N poses, P pairs)
    at the sampled in-limit poses; `original_distances(k, rows)` gives the original
    geometry's distances of pair k at those rows of the poses (measured only where a hull
    could not decide)."""
    N = D_hull.shape[0]
    rng = np.random.default_rng(0)
    out = []
    for k, ((a, b), kind) in enumerate(zip(names, kinds)):
        d_h = D_hull[:, k]
        hull_best = float(d_h.max())
        if REDUCED_FRACTION * hull_best >= margin:
            out.append(PairDecision(a, b, kind, "checked", "checked", margin, margin))
            continue
        # The hull contains the original geometry: a hull never in contact proves the original
        # never is, and the original cannot touch more often than its hull. The original
        # (meshes: milliseconds a distance) is measured at every pose only for a pair whose hull
        # is in contact nearly always; its best clearance at the poses where the hull is
        # farthest and at as many others.
        if np.mean(d_h <= 0.0) >= ALWAYS_FRACTION:
            d_o = original_distances(k, np.arange(N))
            n_contact = int(np.sum(d_o <= 0.0))
            if n_contact >= ALWAYS_FRACTION * N:
                if kind == "environment":
                    raise ConfigError(f"{a} is inside {b} in {n_contact} of {N} poses sampled inside the joint "
                                      "limits: the environment (excitation.collision floor or boxes) cuts through "
                                      "the arm's mounting; move it")
                out.append(PairDecision(a, b, kind, "skipped",
                                        f"always in contact: its geometry touches in {n_contact} of {N} poses "
                                        "sampled inside the joint limits"))
                continue
        else:
            rows = np.union1d(np.argsort(d_h)[-N_BEST:], rng.choice(N, min(N, N_BEST), replace=False))
            d_o = original_distances(k, rows)
        best = max(float(d_o.max()), hull_best)
        m = min(margin, max(MIN_MARGIN, REDUCED_FRACTION * best))
        hm = min(m, REDUCED_FRACTION * hull_best)
        if m >= margin:
            out.append(PairDecision(a, b, kind, "checked",
                                    f"checked (its convex hulls are at most {hull_best:.3g} m apart over {N} poses "
                                    f"inside the limits: the optimiser keeps {hm:.3g} m on the hulls, the original "
                                    "geometry the margin)", margin, hm, best))
            continue
        out.append(PairDecision(a, b, kind, "reduced",
                                f"close by construction: at most {best:.3g} m apart over {N} poses sampled inside "
                                f"the joint limits; margin reduced to {m:.3g} m ({REDUCED_FRACTION:.0%} of that)",
                                m, hm, best))
    return out
