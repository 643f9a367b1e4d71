"""Physically consistent estimation.

A body is physically consistent iff its 4x4 pseudo-inertia

    J = [[Sigma, h], [h^T, m]],  Sigma = 0.5 tr(I) 1 - I,  h = m c   (I about the frame origin)

is positive definite (positive mass, and an inertia about the centre of mass that is
positive definite and satisfies the triangle inequalities). J is linear in the
standard parameters, so with a least-squares cost the problem is convex:

    min || S^-1 (W theta - y) ||^2 + prior_weight * || (theta - theta_cad) / scale ||^2
    s.t. J_b(theta) > 0 for every body b, armature, Coulomb and viscous >= 0

with S the per-joint noise levels of a WLS pass. The data are first compressed by a
QR decomposition of the weighted standard regressor (n_std rows instead of M). The
tiny prior term only decides the directions the data cannot see at all (the
regrouped parameters), pulling them toward the URDF's CAD values; a larger weight
would also bias directions that are weakly but genuinely excited (closed chains).

Solver: a log-barrier interior-point method (Newton on t f - sum log det J_b, see
`_barrier_solve`). Newton is affine-invariant, so the regressor's conditioning does
not slow it, and it reaches optima on the boundary of physical consistency (flat or
line-like mass distributions of poorly excited bodies). A trust-region polish in the
log-Cholesky parameterisation (Rucker & Wensing, 2022: J = U U^T with U upper
triangular, exponential diagonal, so every real vector is a physical body), solved
with scipy.optimize.least_squares, follows and is kept only if it lowers the cost; the
same map gives the Jacobian used for the standard deviations. The map is written here,
with its Jacobian, because Pinocchio only has it from 3.3 on
(``pin.LogCholeskyParameters``); the tests check it against Pinocchio's where present.
"""
from __future__ import annotations

import numpy as np
from scipy import optimize

from ..errors import IdentificationError
from .least_squares import _per_joint, wls
from .problem import IdentificationProblem
from .result import IdentificationResult

MIN_THICKNESS = 1e-4   # m
FTOL = 1e-4
EIG_FLOOR = 1e-10  # smallest pseudo-inertia eigenvalue relative to the largest
MAX_EXTENT = 10.0      # m

# Parameter order inside eta (kept in one place).
_A, _D1, _D2, _D3, _S12, _S23, _S13, _T1, _T2, _T3 = range(10)


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


def _barrier_solve(H: np.ndarray, c: np.ndarray, nb: int, nonneg: np.ndarray, theta0: np.ndarray,
                   scale: np.ndarray, gap: float = 1e-4, max_newton: int = 400) -> tuple[np.ndarray, int]:
    """min 1/2 theta^T H theta - c^T theta  s.t. every body's pseudo-inertia J_b(theta) > 0
    and theta[nonneg] > 0, by a log-barrier interior-point method (Boyd & Vandenberghe,
    ch. 11): Newton steps on t f(theta) - sum_b log det J_b - sum log theta_nn, t raised
    10x until the duality-gap bound (4 nb + #nonneg) / t is below `gap`.

    The cost is convex and each constraint a 4x4 linear matrix inequality, so this finds
    the constrained optimum even when bodies end on the boundary of physical consistency
    (poorly excited links), and Newton's affine invariance makes it indifferent to the
    conditioning of the regressor. Variables are theta / scale; theta0 (scaled likewise)
    must be strictly feasible."""
    E0 = _pseudo_basis()
    Eb = [E0 * scale[10 * k:10 * k + 10, None, None] for k in range(nb)]   # J is linear in theta
    idx_nn = np.flatnonzero(nonneg)
    m = 4 * nb + idx_nn.size

    def barrier(theta, need_derivatives):
        val = 0.0
        g = np.zeros_like(theta)
        Hb = np.zeros((theta.size, theta.size))
        for k in range(nb):
            sl = slice(10 * k, 10 * k + 10)
            E = Eb[k]
            J = np.tensordot(theta[sl], E, axes=1)
            try:
                C = np.linalg.cholesky(J)
            except np.linalg.LinAlgError:
                return np.inf, None, None
            val -= 2.0 * np.sum(np.log(np.diag(C)))
            if need_derivatives:
                Ji = np.linalg.inv(J)
                X = np.einsum("ij,kjl->kil", Ji, E)          # J^-1 E_k
                g[sl] = -np.einsum("kii->k", X)
                Hb[sl, sl] = np.einsum("kij,lji->kl", X, X)
        v = theta[idx_nn]
        if (v <= 0).any():
            return np.inf, None, None
        val -= np.sum(np.log(v))
        if need_derivatives:
            g[idx_nn] -= 1.0 / v
            Hb[idx_nn, idx_nn] += 1.0 / v ** 2
        return val, g, Hb

    f = lambda th: 0.5 * th @ H @ th - c @ th  # noqa: E731
    theta = theta0.copy()
    if not np.isfinite(barrier(theta, False)[0]):
        raise IdentificationError("interior-point start is not strictly physical")
    # Initial t: balance the cost's and the barrier's gradients.
    _, gb, _ = barrier(theta, True)
    gf = H @ theta - c
    t = max(np.linalg.norm(gb) / max(np.linalg.norm(gf), 1e-300), m / max(abs(f(theta)), 1.0))
    steps = 0
    while True:
        for _ in range(50):
            bv, gb, Hb = barrier(theta, True)
            grad = t * (H @ theta - c) + gb
            Hess = t * H + Hb
            try:
                dx = -np.linalg.solve(Hess, grad)
            except np.linalg.LinAlgError:
                dx = -np.linalg.lstsq(Hess, grad, rcond=None)[0]
            decrement = float(-grad @ dx)
            steps += 1
            if decrement / 2.0 <= 1e-9 or steps >= max_newton:
                break
            phi0 = t * f(theta) + bv
            s = 1.0
            while s > 1e-12:
                cand = theta + s * dx
                bc = barrier(cand, False)[0]
                if np.isfinite(bc) and t * f(cand) + bc <= phi0 - 0.25 * s * decrement:
                    break
                s *= 0.5
            theta = theta + s * dx
        if m / t < gap or steps >= max_newton:
            return theta, steps
        t *= 10.0


def _failure_reason(prior: np.ndarray, layout, exc: BaseException) -> str:
    """One line for a failed interior-point solve, naming the CAD bodies that are not
    physical (the usual cause: a zero or negative mass, a missing <inertial>)."""
    bad = []
    for b, joint in enumerate(layout.body_joints):
        ph = prior[10 * b:10 * b + 10]
        ev = np.linalg.eigvalsh(np.tensordot(ph, _pseudo_basis(), axes=1))
        if not (ph[0] > 0 and ev.min() > 0):
            bad.append(f"{joint!r} (" + (f"mass {ph[0]:.4g} kg" if not ph[0] > 0 else "impossible inertia") + ")")
    if bad:
        return (f"physically consistent estimation failed: the CAD inertia of the body moved by joint "
                f"{', '.join(bad)} is not physical (a missing <inertial>, a zero or negative mass in the URDF); "
                "fix it, or use --method wls (base parameters only)")
    return (f"physically consistent estimation failed ({type(exc).__name__}: {exc}); use --method wls "
            "(base parameters only)")


def physically_consistent(problem: IdentificationProblem, prior_weight: float = 1e-6,
                          max_nfev: int = 1000) -> IdentificationResult:
    """Standard parameters with every body physically consistent; see the module doc."""
    if problem.W_standard is None or problem.layout is None or problem.prior is None:
        raise IdentificationError("physically consistent estimation needs the standard regressor and the "
                                  "CAD prior (build the problem with build_problem)")
    layout = problem.layout
    nb = len(layout.body_joints)
    n_std = layout.size
    first = wls(problem)                       # noise levels per joint, and the reference fit
    sigma = first.joint_sigma
    w = 1.0 / sigma[problem.joint_of_row]
    Q, R = np.linalg.qr(problem.W_standard * w[:, None], mode="reduced")
    z = Q.T @ (problem.y * w)
    rest_ss = float(np.sum((problem.y * w) ** 2) - z @ z)

    prior = problem.prior
    scale = _parameter_scale(prior, nb)
    sqrt_prior = np.sqrt(prior_weight) / scale
    act = slice(10 * nb, n_std)
    act_names = layout.names[act]
    lower_act = np.array([0.0 if n.rsplit(".", 1)[1] in ("Ia", "Fc", "Fv") else -np.inf for n in act_names])

    def unpack(x):
        theta = np.empty(n_std)
        dtheta = np.zeros((n_std, n_std))
        for b in range(nb):
            sl = slice(10 * b, 10 * b + 10)
            theta[sl], dtheta[sl, sl] = dynamic_from_log_cholesky(x[sl])
        theta[act] = x[act]
        dtheta[act, act] = np.eye(n_std - 10 * nb)
        return theta, dtheta

    def fun(x):
        theta, _ = unpack(x)
        return np.concatenate([R @ theta - z, sqrt_prior * (theta - prior)])

    def jac(x):
        _, dtheta = unpack(x)
        return np.vstack([R @ dtheta, sqrt_prior[:, None] * dtheta])

    # 1. The constrained optimum by an interior-point method (convex in theta); 2. a
    # log-Cholesky trust-region polish from there, kept only if it lowers the cost.
    A = np.vstack([R, np.diag(sqrt_prior)])
    bvec = np.concatenate([z, sqrt_prior * prior])
    nonneg = np.zeros(n_std, bool)
    nonneg[act] = np.isfinite(lower_act)
    start = prior.copy()          # the CAD values, moved strictly inside the feasible set
    for b in range(nb):
        sl = slice(10 * b, 10 * b + 10)
        start[sl] = dynamic_from_log_cholesky(log_cholesky_from_dynamic(prior[sl], 1e-3))[0]
    start[nonneg] = np.maximum(start[nonneg], 1e-3 * scale[nonneg])
    # In units of the parameter scales, so the barrier's Newton systems are well scaled.
    Asc = A * scale
    try:
        with np.errstate(over="ignore", invalid="ignore"):   # a diverging solve is reported below
            phi, newton_steps = _barrier_solve(Asc.T @ Asc, Asc.T @ bvec, nb, nonneg, start / scale, scale)
    except (TypeError, ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
        raise IdentificationError(_failure_reason(prior, layout, exc)) from exc
    theta0 = phi * scale
    cost = lambda th: float(np.sum((A @ th - bvec) ** 2))  # noqa: E731
    x0 = np.empty(n_std)
    for b in range(nb):
        sl = slice(10 * b, 10 * b + 10)
        x0[sl] = log_cholesky_from_dynamic(theta0[sl])
    x0[act] = theta0[act]
    # Bounds on the exponential coordinates: e^a = sqrt(mass) and e^d_i is a length (the
    # body's extent along a principal direction of its second moment). Bodies of
    # 1 mg .. 1000 t that are at least MIN_THICKNESS thick in every direction cover every
    # real link, and keep the optimum finite when the data push a body to the boundary
    # of physical consistency (a flat or line-like mass distribution).
    lb = np.full(n_std, -np.inf)
    ub = np.full(n_std, np.inf)
    for b in range(nb):
        lb[10 * b], ub[10 * b] = 0.5 * np.log(1e-6), 0.5 * np.log(1e6)
        lb[10 * b + 1: 10 * b + 4] = np.log(MIN_THICKNESS)
        ub[10 * b + 1: 10 * b + 4] = np.log(MAX_EXTENT)
    lb[act] = lower_act
    x0 = np.clip(x0, lb + 1e-9, ub - 1e-9)
    # The data residuals are normalised to unit noise, so the cost is chi^2 / 2; a relative
    # change of FTOL (~1e-3 in chi^2 here) is statistically meaningless, and the remaining
    # slow motion is along nearly flat, prior-only directions of nearly degenerate bodies.
    sol = optimize.least_squares(fun, x0, jac=jac, bounds=(lb, ub), method="trf", x_scale="jac",
                                 ftol=FTOL, max_nfev=max_nfev)
    if sol.status <= 0:
        raise IdentificationError(f"physically consistent solver did not converge in {max_nfev} evaluations "
                                  f"({sol.message})")
    theta, dtheta = unpack(sol.x)
    polished = cost(theta) < cost(theta0)
    if not polished:
        theta = theta0.copy()
        # Jacobian of theta(eta) at the interior-point solution (for the covariance below).
        x_ip = np.concatenate([np.concatenate([log_cholesky_from_dynamic(theta0[10 * b:10 * b + 10])
                                                 for b in range(nb)]), theta0[act]])
        _, dtheta = unpack(x_ip)
        sol.x = x_ip
    projected = []
    for b, body in enumerate(layout.body_joints):
        sl = slice(10 * b, 10 * b + 10)
        # U U^T is positive definite in exact arithmetic, but when the data push a body to
        # the boundary (a flat or line-like mass distribution of a poorly excited body)
        # its smallest eigenvalue can round to <= 0. Lift it to EIG_FLOOR of the largest
        # (a change at round-off level) so the body is strictly physical.
        J = pseudo_inertia(theta[sl])
        w, V = np.linalg.eigh(J)
        if w[0] < EIG_FLOOR * w[-1]:
            theta[sl] = dynamic_from_pseudo((V * np.maximum(w, EIG_FLOOR * w[-1])) @ V.T)
            projected.append(body)
        if not is_physical(theta[sl]):
            raise IdentificationError(f"physically consistent solver returned an infeasible body {body!r}")

    # Uncertainty by linearisation at the solution (data + prior information).
    Jx = jac(sol.x)
    M, p = problem.W.shape
    r_data = R @ theta - z
    s2 = (float(r_data @ r_data) + rest_ss) / max(M - p, 1)
    try:
        cov_x = s2 * np.linalg.pinv(Jx.T @ Jx)
    except np.linalg.LinAlgError as exc:  # pragma: no cover - pinv rarely fails
        raise IdentificationError(f"covariance of the physically consistent estimate failed: {exc}") from exc
    P = problem.base.projection
    G = P @ dtheta
    cov = G @ cov_x @ G.T
    values = P @ theta
    r = problem.y - problem.W @ values
    rms, sig = _per_joint(problem, r)
    res = IdentificationResult(method="physical", base=problem.base, values=values,
                               std=np.sqrt(np.clip(np.diag(cov), 0, None)), covariance=cov,
                               condition_number=first.condition_number, n_samples=problem.n_samples,
                               n_rows=problem.n_rows, joint_names=problem.joint_names, residual_rms=rms,
                               joint_sigma=sig)
    res.standard_values = theta
    res.extra.update({"prior_weight": prior_weight, "solver_status": int(sol.status),
                      "bodies_on_feasibility_boundary": projected, "interior_point_newton_steps": newton_steps,
                      "trust_region_polish_kept": bool(polished),
                      "solver_iterations": int(sol.nfev)})
    return res
