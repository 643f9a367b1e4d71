"""Physically consistent, plausible estimation: the data where they speak, CAD elsewhere.

Two levels in one convex problem.

1. WLS gives the base parameters beta_hat, each joint's residual sigma and the
   autocorrelation-consistent covariance C (least_squares.py, uncertainty.py).
2. The standard parameters theta (10 per body + actuator terms) minimise

       1/2 (P theta - beta_hat)^T I (P theta - beta_hat)                  (the data)
     + lambda sum_b D(J_b(theta), J_b_cad)                                (the CAD)

   subject to every body's pseudo-inertia J_b > 0 (physical consistency) and the
   plausibility bounds of body_bounds.py (mass range, total mass, centre of mass and
   mass distribution inside the body's region), armature, Coulomb and viscous >= 0.

P maps standard to base parameters. I = W^T S^-2 W is WLS's own objective (the
weighted squared residual, S the joints' residual sigmas): the data term is exactly
the fit the physical estimate gives up. (It used to be C^-1, the HAC information:
on real arms, whose residuals are model error, that metric is not the prediction
error's and the estimate predicted 1.5-2.5 x worse than WLS on the KUKA log.)
D is the entropic (log-det Bregman) divergence D(J, J0) = tr(J0^-1 J) - log det(J0^-1 J)
- 4 (Lee & Park 2018): coordinate-free, convex, infinite at the boundary of physical
consistency, and for a body scaled by (1 + s) it is about 2 s^2; lambda = 1 / (4
sigma^2) with sigma = prior_relative_std (default 0.25). Accuracy first: when that
prior costs more than 1 % of in-sample RMS on any joint against WLS, it is weakened
(x 1/16, 1/256, 1/4096: `PRIOR_SCHEDULE`), never to zero, so directions the data
cannot see -- the regrouped parameters, combinations the excitation barely moves --
stay at the CAD values instead of drifting to whatever fits the noise (the 722 kg
links of issue 12). A body the data hold against a bound is named
(`data_against_bounds`, a warning): the data and the URDF disagree there. Actuator
terms have only a vanishing pull toward their nominal values.

A body whose CAD mass is below 1 g (unknown) is pulled, 100 x more weakly, toward a
uniform ball of 5 cm radius and the middle of its absolute mass range instead. The
interior-point solver is in lmi_barrier.py. The covariance is the sandwich
K (P^T I C I P + Hp) K with K the inverse Hessian of the cost and Hp the prior's
Hessian: C where the data decide, the prior's where only it speaks. Each body reports
how much of its mass the data determine (`mass_data_share`: 1 - posterior / prior
variance) and which bounds are active (`bounds_active`).
"""
from __future__ import annotations

import numpy as np

from ..errors import IdentificationError
from ..model.pseudo_inertia import dynamic_from_pseudo, is_physical, pseudo_inertia  # noqa: F401  (this module's interface)
from . import lmi_barrier
from .body_bounds import TINY_MASS, PhysicalBounds, _cad_total, body_regions, check_bodies, mass_range
from .least_squares import WlsFit, _per_joint
from .physical_findings import data_against_bounds, data_against_signs
from .problem import IdentificationProblem
from .result import IdentificationResult

ACTUATOR_PRIOR_WEIGHT = 1e-6   # the actuator terms' pull toward nominal (negligible on purpose)
# The CAD prior's weight is the configured one unless it costs fit: these multipliers are
# tried in turn, and the first whose in-sample RMS is within FIT_TOLERANCE of WLS's on
# every joint is taken (accuracy first, plausibility as a constraint, not a pull).
PRIOR_SCHEDULE = (1.0, 1.0 / 16, 1.0 / 256, 1.0 / 4096)   # never 0: unseen directions stay at CAD
FIT_TOLERANCE = 1.01
ACTIVE_SLACK = 1e-3            # relative slack below which a bound counts as active
UNKNOWN_CAD_WEIGHT = 0.01     # prior weight of a body without CAD mass (prior std x 10)
BOUNDARY_EIG = 1e-6            # smallest / largest pseudo-inertia eigenvalue: on the PSD boundary
COVARIANCE_ASIDE_ROWS = 100_000   # rows from which level 1's HAC covariance is computed beside level 2

# Parameter order inside eta (kept in one place).
_A, _D1, _D2, _D3, _S12, _S23, _S13, _T1, _T2, _T3 = range(10)


def _U(eta: np.ndarray) -> np.ndarray:
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = eta
    return np.exp(a) * np.array([[np.exp(d1), s12, s13, t1],
                                 [0.0, np.exp(d2), s23, t2],
                                 [0.0, 0.0, np.exp(d3), t3],
                                 [0.0, 0.0, 0.0, 1.0]])


def dynamic_from_log_cholesky(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """theta10 of one body and d theta10 / d eta (10x10)."""
    U = _U(eta)
    theta = dynamic_from_pseudo(U @ U.T)
    jac = np.empty((10, 10))
    for k in range(10):
        dU = np.zeros((4, 4))
        if k == _A:
            dU = U
        elif k in (_D1, _D2, _D3):
            i = k - _D1
            dU[i, i] = U[i, i]
        else:
            i, j = {_S12: (0, 1), _S23: (1, 2), _S13: (0, 2), _T1: (0, 3), _T2: (1, 3), _T3: (2, 3)}[k]
            dU[i, j] = U[3, 3]   # = e^a
        dJ = dU @ U.T + U @ dU.T
        jac[:, k] = dynamic_from_pseudo(dJ)
    return theta, jac


def log_cholesky_from_dynamic(theta10: np.ndarray, min_eig_fraction: float = 1e-6) -> np.ndarray:
    """eta of one body; an infeasible body is first moved to the nearest feasible one
    (eigenvalues of the pseudo-inertia clipped to a small positive floor)."""
    J = pseudo_inertia(theta10)
    w, V = np.linalg.eigh(J)
    floor = min_eig_fraction * max(abs(w).max(), 1e-12)
    if w[0] <= floor:
        J = (V * np.maximum(w, floor)) @ V.T
    P = np.eye(4)[::-1]
    L = np.linalg.cholesky(P @ J @ P)
    U = P @ L @ P
    a = np.log(U[3, 3])
    e = np.exp(a)
    return np.array([a, np.log(U[0, 0] / e), np.log(U[1, 1] / e), np.log(U[2, 2] / e),
                     U[0, 1] / e, U[1, 2] / e, U[0, 2] / e, U[0, 3] / e, U[1, 3] / e, U[2, 3] / e])


def _parameter_scale(prior: np.ndarray, n_bodies: int) -> np.ndarray:
    """A typical magnitude per standard parameter, for the prior term."""
    scale = np.abs(prior).astype(float)
    for b in range(n_bodies):
        sl = slice(10 * b, 10 * b + 10)
        m = max(abs(prior[sl][0]), 1e-3)
        scale[sl][0] = m
        scale[10 * b + 1: 10 * b + 4] = np.maximum(scale[10 * b + 1: 10 * b + 4], 0.05 * m)
        scale[10 * b + 4: 10 * b + 10] = np.maximum(scale[10 * b + 4: 10 * b + 10], 2.5e-3 * m)
    rest = slice(10 * n_bodies, None)
    scale[rest] = np.maximum(scale[rest], 0.05)
    return scale


_E = None


def _pseudo_basis() -> np.ndarray:
    """(10, 4, 4): pseudo-inertia of each unit parameter vector (the map is linear)."""
    global _E
    if _E is None:
        _E = np.stack([pseudo_inertia(e) for e in np.eye(10)])
    return _E


def _reference_bodies(prior: np.ndarray, layout, bounds: PhysicalBounds) -> np.ndarray:
    """The CAD bodies moved strictly inside physical consistency; a body of (almost) no
    CAD mass becomes a uniform ball of the middle of its absolute mass range."""
    ref = prior.copy()
    for b in layout.body_joints:
        sl = layout.inertial_slice(b)
        if prior[sl][0] < TINY_MASS:
            lo, hi = mass_range(bounds, b, prior[sl][0], _cad_total(prior, layout))
            m, r = 0.5 * (lo + hi), 0.05
            ref[sl] = dynamic_from_pseudo(np.diag([m * r * r / 5] * 3 + [m]))
        else:
            ref[sl] = dynamic_from_log_cholesky(log_cholesky_from_dynamic(prior[sl], 1e-3))[0]
    return ref


def _fallback_regions(layout, ref, bounds):
    """Without the robot model (a hand-built problem): spheres of com_radius, else 1.2 x
    the CAD centre-of-mass distance + 0.3 m."""
    from .body_bounds import BodyRegion
    out = {}
    for b in layout.body_joints:
        th = ref[layout.inertial_slice(b)]
        r = bounds.bodies.get(b, {}).get("com_radius") or bounds.com_radius or \
            1.2 * np.linalg.norm(th[1:4] / th[0]) + 0.3
        out[b] = BodyRegion("sphere", np.zeros(3), np.full(3, r), "config" if bounds.com_radius else "default")
    return out


def physically_consistent(problem: IdentificationProblem, bounds: PhysicalBounds | None = None,
                          model=None) -> IdentificationResult:
    """Standard parameters with every body physically consistent and plausible; see the module doc."""
    if problem.W_standard is None or problem.layout is None or problem.prior is None:
        raise IdentificationError("physically consistent estimation needs the standard regressor and the "
                                  "CAD prior (build the problem with build_problem)")
    bounds = bounds or PhysicalBounds()
    check_bodies(bounds, problem.layout.body_joints)
    # level 1, WLS: the data's base parameters; their HAC covariance, which re-reads every row,
    # is computed beside level 2 for a large problem (a forked process when one may be)
    aside = problem.n_rows >= COVARIANCE_ASIDE_ROWS
    level1 = WlsFit(problem, aside=aside)
    if not aside:                           # already there: a covariance that determines nothing stops here
        _determined(level1.result())
    try:
        return _two_levels(problem, bounds, model if model is not None else getattr(problem, "model", None), level1)
    except Exception:
        _determined(level1.result())        # a covariance that determines nothing is the first error
        raise
    finally:
        level1.close()


def _determined(first: IdentificationResult) -> IdentificationResult:
    if not np.abs(first.covariance).max() > 0:
        raise IdentificationError("the WLS covariance is zero: the data do not determine the base parameters")
    return first


def _two_levels(problem, bounds, model, level1) -> IdentificationResult:
    layout = problem.layout
    nb = len(layout.body_joints)
    n_std = layout.size
    first = level1.fit                      # its covariance comes after level 2
    P = problem.base.projection
    # The data term is WLS's own objective: the weighted squared residual, whose Hessian in the
    # base parameters is the white-noise information W^T S^-2 W (S: each joint's residual
    # sigma). So the physical estimate trades exactly what it costs in fit.
    sigma = np.asarray(first.joint_sigma, float)
    if not (sigma > 0).all():
        raise IdentificationError("a joint's WLS residual is zero: no noise level to weight the data by")
    Ww = problem.W / sigma[problem.joint_of_row][:, None]
    info = Ww.T @ Ww
    del Ww
    Hd = P.T @ info @ P                       # the data term's Hessian in the standard parameters
    H = Hd.copy()
    c = P.T @ (info @ first.values)

    prior = problem.prior
    ref = _reference_bodies(prior, layout, bounds)
    if bounds.com_region == "none":
        regions, geo_note = {}, None
    elif model is not None:
        regions, geo_note = body_regions(model, bounds, ref)
    else:
        regions, geo_note = _fallback_regions(layout, ref, bounds), "no robot model: default spheres"

    scale = _parameter_scale(prior, nb)
    act = slice(10 * nb, n_std)
    act_names = layout.names[act]
    w_act = ACTUATOR_PRIOR_WEIGHT / scale[act] ** 2
    H[act, act] += np.diag(w_act)
    c[act] += w_act * prior[act]
    lam = 1.0 / (4.0 * bounds.prior_relative_std ** 2)
    E = _pseudo_basis()
    blocks, rows, g, labels = [], [], [], []
    c_prior = np.zeros_like(c)                 # the prior's linear part at full weight

    def row(vec, const, label):
        rows.append(vec)
        g.append(const)
        labels.append(label)

    ranges = {}
    for k, b in enumerate(layout.body_joints):
        idx = np.arange(10 * k, 10 * k + 10)
        Jref_inv = np.linalg.inv(pseudo_inertia(ref[idx]))
        lam_b = lam * (UNKNOWN_CAD_WEIGHT if prior[idx][0] < TINY_MASS else 1.0)
        c_prior[idx] -= lam_b * np.einsum("ij,kji->k", Jref_inv, E)   # the linear part of lam_b * D
        blocks.append(lmi_barrier.LMIBlock(idx, E, np.zeros((4, 4)), lam_b))
        lo, hi = ranges[b] = mass_range(bounds, b, prior[idx][0], _cad_total(prior, layout))
        e_m = np.zeros(n_std)
        e_m[idx[0]] = 1.0
        row(e_m, -lo, (b, "mass_min", hi - lo))
        row(-e_m, hi, (b, "mass_max", hi - lo))
        reg = regions.get(b)
        if reg is not None:
            if reg.kind == "box":
                for a in range(3):
                    v = np.zeros(n_std)
                    v[idx[1 + a]], v[idx[0]] = 1.0, -(reg.center[a] - reg.half[a])
                    row(v.copy(), 0.0, (b, "com_box", None))
                    v[idx[1 + a]], v[idx[0]] = -1.0, reg.center[a] + reg.half[a]
                    row(v, 0.0, (b, "com_box", None))
            Q = reg.ellipsoid_Q()
            v = np.zeros(n_std)
            v[idx] = np.einsum("ij,kji->k", Q, E)                     # tr(J Q), linear in theta
            row(v, 0.0, (b, "com_box_density" if reg.kind == "box" else "com_sphere", None))
    if bounds.total_mass is not None:
        e_tot = np.zeros(n_std)
        e_tot[0:10 * nb:10] = 1.0
        span = bounds.total_mass[1] - bounds.total_mass[0]
        row(e_tot, -bounds.total_mass[0], (None, "total_mass_min", span))
        row(-e_tot, bounds.total_mass[1], (None, "total_mass_max", span))
    for i, name in enumerate(act_names):
        if name.rsplit(".", 1)[1] in ("Ia", "Fc", "Fv"):
            v = np.zeros(n_std)
            v[10 * nb + i] = 1.0
            row(v, 0.0, (None, f"{name} >= 0", None))

    # Strictly feasible start: the reference bodies, each mass moved inside its range.
    start = ref.copy()
    for k, b in enumerate(layout.body_joints):
        sl = slice(10 * k, 10 * k + 10)
        lo, hi = ranges[b]
        m = start[sl][0]
        target = min(max(m, lo + 0.01 * (hi - lo)), hi - 0.01 * (hi - lo))
        start[sl] *= target / m
    start[act] = prior[act]
    for i, (vec, const) in enumerate(zip(rows, g)):
        if labels[i][0] is None and labels[i][1].endswith(">= 0"):
            j = int(np.flatnonzero(vec)[0])
            start[j] = max(start[j], 1e-3 * scale[j])
    G = np.array(rows) if rows else None
    gv = np.array(g) if rows else None
    if G is not None:
        bad = np.flatnonzero(G @ start + gv <= 0)
        if bad.size:
            b, what, _ = labels[bad[0]]
            raise IdentificationError(f"identification.physical: the {what} bound"
                                      + (f" of body {b!r}" if b else "")
                                      + " excludes the CAD values scaled into the mass ranges; widen it")
    wls_rms = np.asarray(first.residual_rms, float)
    newton, start0, previous = 0, start.copy(), PRIOR_SCHEDULE[0]
    for mult in PRIOR_SCHEDULE:
        # in units of the parameter scales, so the Newton systems are well scaled
        sc_blocks = [lmi_barrier.LMIBlock(bl.idx, bl.basis * scale[bl.idx, None, None], bl.const, mult * bl.weight)
                     for bl in blocks]
        bp = lmi_barrier.BarrierProblem(H * np.outer(scale, scale), (c + mult * c_prior) * scale, sc_blocks,
                                        None if G is None else G * scale, gv)
        try:
            sol = lmi_barrier.solve(bp, start / scale)
        except (np.linalg.LinAlgError, IdentificationError) as exc:
            if mult == PRIOR_SCHEDULE[0]:
                if isinstance(exc, IdentificationError):
                    raise
                raise IdentificationError("the physically consistent solver met a numerically singular step "
                                          "(residuals near zero: noise-free or exactly fitted data?); identify "
                                          "with --method wls") from None
            mult = previous                    # a weaker prior the solver cannot take: keep the last
            break
        newton += int(sol.newton_steps)
        theta, previous = sol.x * scale, mult
        fit_rms = _per_joint(problem, problem.y - problem.W @ (P @ theta))[0]
        if np.all(fit_rms <= FIT_TOLERANCE * wls_rms + 1e-12 * max(float(wls_rms.max()), 1e-300)):
            break
        # the next, weaker prior starts near there, strictly inside (the solution may sit on a bound)
        start = 0.9 * theta + 0.1 * start0
    blocks = [lmi_barrier.LMIBlock(bl.idx, bl.basis, bl.const, mult * bl.weight) for bl in blocks]

    # Which bounds hold the solution, body by body.
    slack = np.zeros(0) if G is None else G @ theta + gv
    active: dict = {b: [] for b in layout.body_joints}
    active_global = []
    for i, (b, what, span) in enumerate(labels):
        if b is not None:
            m = theta[layout.inertial_slice(b)][0]
            norm = span if span is not None else max(m, 1e-12) * (
                (2 * regions[b].half.max()) if what == "com_box" else regions[b].half.max() ** 2)
            if slack[i] < ACTIVE_SLACK * norm and what not in active[b]:
                active[b].append(what)
        elif span is not None and slack[i] < ACTIVE_SLACK * span:
            active_global.append(what)

    first = _determined(level1.result())
    # Covariance: the sandwich of the estimator's Hessian K^-1 = H (the white data information)
    # + the prior's, around the data's HAC covariance C and the prior taken as pseudo-data of
    # covariance Hp^-1: K (P^T info C info P + Hp) K. Where the data decide, it is the data's
    # autocorrelation-consistent covariance; where only the prior speaks, the prior's.
    Hp = np.zeros_like(H)
    Hp[act, act] = np.diag(w_act)
    prior_var_mass = {}
    for k, b in enumerate(layout.body_joints):
        idx = np.arange(10 * k, 10 * k + 10)
        X = np.einsum("ij,kjl->kil", np.linalg.inv(pseudo_inertia(theta[idx])), E)
        Hb = blocks[k].weight * np.einsum("kij,lji->kl", X, X)
        Hp[np.ix_(idx, idx)] += Hb
        prior_var_mass[b] = float(np.linalg.pinv(Hb)[0, 0])
    K = np.linalg.pinv(0.5 * (Hd + Hp + (Hd + Hp).T))
    middle = P.T @ info @ first.covariance @ info @ P + Hp
    cov_theta = K @ (0.5 * (middle + middle.T)) @ K
    cov = P @ cov_theta @ P.T
    bodies = {}
    for k, b in enumerate(layout.body_joints):
        sl = layout.inertial_slice(b)
        th = theta[sl]
        J = pseudo_inertia(th)
        ev = np.linalg.eigvalsh(J)
        if ev[0] < BOUNDARY_EIG * ev[-1]:
            active[b].append("physical_boundary")
        share = 1.0 - cov_theta[10 * k, 10 * k] / prior_var_mass[b] if prior_var_mass[b] > 0 else 0.0
        bodies[b] = {"mass": float(th[0]), "mass_cad": float(prior[sl][0]),
                     "mass_bounds": [float(v) for v in ranges[b]],
                     "com": [float(v) for v in th[1:4] / th[0]],
                     "mass_data_share": float(np.clip(share, 0.0, 1.0)),
                     "bounds_active": active[b]}
        if b in regions:
            bodies[b]["com_region"] = regions[b].as_dict()
        if not is_physical(th):
            raise IdentificationError(f"physically consistent solver returned an infeasible body {b!r}")
    values = P @ theta
    r = problem.y - problem.W @ values
    rms, sig = _per_joint(problem, r)
    effort_rms = np.sqrt(np.bincount(problem.joint_of_row, problem.y ** 2, minlength=len(problem.joint_names))
                         / np.maximum(problem.rows_per_joint(), 1))
    against, bound_notes = data_against_bounds(bodies, ranges, rms, wls_rms, problem.joint_names, effort_rms)
    signs, sign_notes = data_against_signs(first, values, rms, wls_rms, problem.joint_names, FIT_TOLERANCE,
                                           effort_rms)
    against += signs
    sign_notes = bound_notes + sign_notes
    res = IdentificationResult(method="physical", base=problem.base, values=values,
                               std=np.sqrt(np.clip(np.diag(cov), 0, None)), covariance=cov,
                               condition_number=first.condition_number, n_samples=problem.n_samples,
                               n_rows=problem.n_rows, joint_names=problem.joint_names, residual_rms=rms,
                               joint_sigma=sig)
    res.standard_values = theta
    res.bodies = bodies
    res.data_fit, res.data_gain = first, P @ K @ P.T @ info      # the data part of `cov`: gain C gain^T
    res.extra.update({"prior_relative_std": bounds.prior_relative_std,
                      "prior_weight_factor": float(mult),
                      "interior_point_newton_steps": newton,
                      "hac_lag_samples": first.extra.get("hac_lag_samples"),
                      "total_mass": float(np.sum(theta[0:10 * nb:10])),
                      "total_mass_cad": float(np.sum(prior[0:10 * nb:10]))})
    if active_global:
        res.extra["bounds_active_global"] = ", ".join(active_global)
    if against:
        res.extra["data_against_bounds"] = against
    if sign_notes:
        res.extra["data_against_notes"] = sign_notes
    if geo_note:
        res.extra["com_region_note"] = geo_note
    return res
