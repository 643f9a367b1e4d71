"""Why a design found no feasible point: the constraint that holds every candidate, named.

When an optimiser evaluated no point that keeps every constraint, `explain_infeasible`
draws random candidates the way the optimisers start (uniform in the family's box,
repaired into the kinematic limits, the collision starts' centre poses) and counts, per
constraint, in how many of them it is violated: a joint's position, velocity or
acceleration rows, the nominal efforts, each checked collision pair. The constraints
violated by every candidate (else the most often violated) are named with the worst
excess seen and what to change.
"""
from __future__ import annotations

import numpy as np

_QUANTITY = ("position (upper)", "position (lower)", "velocity", "velocity", "acceleration", "acceleration")
_ADVICE = {
    "position": "widen the joint's range (excitation.position_limits, the URDF limits, excitation.margins.position) "
                "or move excitation.start_pose off the limit",
    "velocity": "check the URDF velocity limit and excitation.margins.velocity, or lower the base frequency",
    "acceleration": "raise excitation.acceleration_limits of the joint or lower the base frequency",
    "effort": "set excitation.effort_limits: false or slow the excitation (base frequency, margins)",
    "pair": "give the pair room: a start_pose where it is clear, a smaller excitation.collision.margin, the floor "
            "or boxes moved, or the vendor's SRDF (excitation.collision.srdf) if it disables the pair",
}


def _violations(problem, x, A, b, labels):
    """{constraint name: excess} of one candidate."""
    out = {}
    ex = A @ x - b
    for k in np.flatnonzero(ex > 1e-9):
        name = labels[k]
        out[name] = max(out.get(name, 0.0), float(ex[k]))
    if problem.effort_bound is not None:
        e = problem.effort_excess(x)
        if e > 0:
            out["nominal efforts over the URDF effort limits"] = e
    col = problem.collision
    if col is not None:
        D = col.distances(x)
        short = (col.margins - D).max(axis=0) if D.size else np.zeros(0)
        for p in np.flatnonzero(short > 0):
            mesh = float(col.cm.margins[p])
            where = (f"margin {mesh:.3g} m" if np.isclose(mesh, col.margins[p]) else
                     f"margin {mesh:.3g} m on the meshes, {col.margins[p]:.3g} m on their convex hulls")
            out[f"collision pair {col.cm.pair_label(p)} ({where})"] = float(short[p])
    return out


def explain_infeasible(problem, seed: int = 0, n: int = 40) -> str:
    """One sentence: which constraint holds every candidate (or most), the worst excess, what to change."""
    A_full, b_full, (kind, joint) = problem.linear_constraints(rows=True)
    names = problem.param.joint_names
    labels = [f"joint {names[j]!r} {_QUANTITY[k]}" for k, j in zip(kind, joint)]
    rng = np.random.default_rng(seed)
    counts: dict[str, int] = {}
    worst: dict[str, float] = {}
    for _ in range(n):
        x = problem.random_start(rng)        # as the optimisers start (repaired; collision-aware centre)
        for name, e in _violations(problem, x, A_full, b_full, labels).items():
            counts[name] = counts.get(name, 0) + 1
            worst[name] = max(worst.get(name, 0.0), e)
    if not counts:
        return ("random candidates keep every constraint: the optimiser's budget was too small; give it more time "
                "(--time-limit / excitation.max_time) or evaluations")
    ranked = sorted(counts, key=lambda c: (-counts[c], -worst[c]))
    every = [c for c in ranked if counts[c] == n]
    shown = every[:3] or ranked[:3]
    head = (f"in every one of {n} random candidates: " if every else f"most often in {n} random candidates: ")

    def advice(c):
        for key in ("position", "velocity", "acceleration", "effort"):
            if key in c and not c.startswith("collision"):
                return _ADVICE[key]
        return _ADVICE["pair"]

    parts, given = [], set()
    for c in shown:
        a = advice(c)
        parts.append(f"{c} violated ({counts[c]}/{n}, by up to {worst[c]:.3g})" + ("" if a in given else f": {a}"))
        given.add(a)
    return head + "; ".join(parts)
