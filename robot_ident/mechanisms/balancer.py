"""Source D's design question for a gravity balancer: which spring stiffness minimises the
peak (or the ripple) of a joint's torque along a given cycle?

With the attachment geometry and the spring's free length ``L0`` kept, the joint's torque
along the cycle is affine in the stiffness:

    tau(t; K) = a(t) + K b(t),    b(t) = (L(q(t)) - L0) dL/dq_j(q(t))

where ``a`` is the torque of everything else (rigid body, friction, offsets and the other
springs, from the model's parameters). The peak ``max_t |a + K b|`` and the ripple
``max_t (a + K b) - min_t (a + K b)`` are convex in K; both are minimised exactly as
linear programmes (scipy.optimize.linprog, HiGHS) on the sampled cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from ..errors import ModelError


@dataclass
class BalancerDesign:
    spring: str
    joint: str
    free_length: float
    stiffness_before: float
    stiffness_peak: float          # minimises the peak |tau|
    stiffness_ripple: float        # minimises max tau - min tau
    peak_before: float
    peak_after: float              # at stiffness_peak
    ripple_before: float
    ripple_after: float            # at stiffness_ripple
    t: np.ndarray
    tau_before: np.ndarray
    tau_peak: np.ndarray
    tau_ripple: np.ndarray
    tau_without_spring: np.ndarray

    @property
    def peak_reduction_percent(self) -> float:
        return 100.0 * (1.0 - self.peak_after / self.peak_before)

    def summary(self) -> str:
        return (f"{self.spring} on {self.joint} (free length {self.free_length:.4g} m kept): "
                f"K {self.stiffness_before:.5g} N/m -> {self.stiffness_peak:.5g} N/m cuts the peak torque "
                f"{self.peak_before:.5g} -> {self.peak_after:.5g} N·m ({self.peak_reduction_percent:.2f} %); "
                f"K {self.stiffness_ripple:.5g} N/m cuts the ripple {self.ripple_before:.5g} -> "
                f"{self.ripple_after:.5g} N·m; without the spring the peak is "
                f"{np.abs(self.tau_without_spring).max():.5g} N·m")


def _peak_lp(a, b, lo, hi):
    # variables (K, s): minimise s with a + K b <= s and -(a + K b) <= s
    A = np.vstack([np.column_stack([b, -np.ones_like(b)]), np.column_stack([-b, -np.ones_like(b)])])
    ub = np.concatenate([-a, a])
    r = linprog([0.0, 1.0], A_ub=A, b_ub=ub, bounds=[(lo, hi), (None, None)], method="highs")
    if r.status != 0:
        raise ModelError(f"balancer design: the peak problem did not solve ({r.message})")
    return float(r.x[0])


def _ripple_lp(a, b, lo, hi):
    # variables (K, u, l): minimise u - l with l <= a + K b <= u
    one = np.ones_like(b)
    A = np.vstack([np.column_stack([b, -one, 0 * one]), np.column_stack([-b, 0 * one, one])])
    ub = np.concatenate([-a, a])
    r = linprog([0.0, 1.0, -1.0], A_ub=A, b_ub=ub, bounds=[(lo, hi), (None, None), (None, None)], method="highs")
    if r.status != 0:
        raise ModelError(f"balancer design: the ripple problem did not solve ({r.message})")
    return float(r.x[0])


def design_balancer(model, theta, t, q, qd, qdd, spring: str, joint: str,
                    stiffness_bounds=(0.0, None)) -> BalancerDesign:
    """Stiffness of `spring` (free length kept) minimising the peak and the ripple of
    `joint`'s torque along the sampled cycle (t, q, qd, qdd), with the model's standard
    parameters `theta` (e.g. an identified result's, or the nominal ones)."""
    springs = getattr(model, "springs", None)
    if springs is None:
        raise ModelError("balancer design needs a model with springs (the config's `springs:` section)")
    names = [s.name for s in springs.specs]
    if spring not in names:
        raise ModelError(f"no spring named {spring!r}; springs: {', '.join(names)}")
    if joint not in model.joint_names:
        raise ModelError(f"joint {joint!r} is not identified ({', '.join(model.joint_names)})")
    theta = np.asarray(theta, float)
    iK, iF = model.layout.index(f"{spring}.K"), model.layout.index(f"{spring}.F0")
    K0, F0 = theta[iK], theta[iF]
    if not K0 > 0:
        raise ModelError(f"spring {spring!r}: stiffness {K0:.4g} N/m is not positive; the free length is undefined")
    k = springs.specs.index(next(s for s in springs.specs if s.name == spring))
    L0 = float(springs.reference_lengths[k] - F0 / K0)
    j = model.joint_names.index(joint)
    tau = model.efforts(q, qd, qdd, theta)[:, j]
    cols = springs.columns(q)[:, j, 2 * k: 2 * k + 2]
    b = cols[:, 0] + cols[:, 1] * (springs.reference_lengths[k] - L0)     # (L - L0) dL/dq_j
    a = tau - K0 * b
    lo, hi = stiffness_bounds
    Kp = _peak_lp(a, b, lo, hi)
    Kr = _ripple_lp(a, b, lo, hi)
    tp, tr = a + Kp * b, a + Kr * b
    return BalancerDesign(spring, joint, L0, float(K0), Kp, Kr, float(np.abs(tau).max()), float(np.abs(tp).max()),
                          float(np.ptp(tau)), float(np.ptp(tr)), np.asarray(t, float), tau, tp, tr, a)
