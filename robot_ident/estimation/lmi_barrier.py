"""A small log-barrier interior-point solver for the physically consistent estimate.

    min  1/2 x^T H x - c^T x + sum_b w_b (-log det F_b(x))
    s.t. F_b(x) = F_b0 + sum_k x[idx_b[k]] B_b[k]  > 0     (linear matrix inequalities)
         G x + g > 0                                       (scalar linear inequalities)

The -log det terms in the cost (w_b > 0) are the entropic (Bregman log-det) distance
of a pseudo-inertia to its CAD value, up to a linear term that goes into c. Newton
steps on t f(x) - sum log det F_b - sum log(G x + g), t raised 10x until the
duality-gap bound (sum of the LMI sizes + number of scalar constraints) / t is below
`gap` (Boyd & Vandenberghe, ch. 11). Everything is convex and self-concordant, so
Newton's method converges from any strictly feasible start and, being
affine-invariant, is indifferent to the conditioning of the regressor; optima on the
boundary (active bounds, flat bodies) are reached to the accuracy `gap`.

Hand-written because the problems are tiny (tens of variables, a few 4x4 LMIs) and
SciPy has no semidefinite solver; cvxpy + an SDP solver would be a heavy dependency.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import IdentificationError


@dataclass
class LMIBlock:
    idx: np.ndarray          # (k,) variable indices
    basis: np.ndarray        # (k, d, d) symmetric matrices
    const: np.ndarray        # (d, d)
    weight: float = 0.0      # w_b: -log det F_b also in the cost, with this weight


@dataclass
class BarrierProblem:
    H: np.ndarray
    c: np.ndarray
    blocks: list[LMIBlock] = field(default_factory=list)
    G: np.ndarray | None = None       # (nc, n)
    g: np.ndarray | None = None       # (nc,)

    def lmi(self, b: LMIBlock, x: np.ndarray) -> np.ndarray:
        return b.const + np.tensordot(x[b.idx], b.basis, axes=1)

    def slacks(self, x: np.ndarray) -> np.ndarray:
        return np.zeros(0) if self.G is None else self.G @ x + self.g

    def strictly_feasible(self, x: np.ndarray) -> bool:
        if (self.slacks(x) <= 0).any():
            return False
        for b in self.blocks:
            try:
                np.linalg.cholesky(self.lmi(b, x))
            except np.linalg.LinAlgError:
                return False
        return True


@dataclass
class BarrierSolution:
    x: np.ndarray
    newton_steps: int
    t: float


def _stack(problem: BarrierProblem):
    """The blocks as stacked arrays (all blocks have the same shape here: 10 parameters, 4x4)."""
    st = problem.__dict__.get("_stacked")
    if st is None:
        shapes = {b.basis.shape for b in problem.blocks}
        if len(shapes) > 1:
            raise IdentificationError(f"LMI blocks of different shapes {sorted(shapes)} are not supported")
        st = (np.array([b.idx for b in problem.blocks]), np.array([b.basis for b in problem.blocks]),
              np.array([b.const for b in problem.blocks]), np.array([b.weight for b in problem.blocks]))
        problem.__dict__["_stacked"] = st
    return st


def _terms(problem: BarrierProblem, x: np.ndarray, t: float, derivatives: bool):
    """Value, gradient and Hessian of t f(x) + barrier(x), without the quadratic part
    (blocks batched: one Cholesky / inverse call for all of them)."""
    n = x.size
    val = 0.0
    g = np.zeros(n)
    Hm = np.zeros((n, n)) if derivatives else None
    if problem.blocks:
        idx, basis, const, weight = _stack(problem)
        F = const + np.einsum("bk,bkij->bij", x[idx], basis)
        try:
            C = np.linalg.cholesky(F)
        except np.linalg.LinAlgError:
            return np.inf, None, None
        coef = t * weight + 1.0
        val -= float(coef @ (2.0 * np.log(np.diagonal(C, axis1=1, axis2=2)).sum(axis=1)))
        if derivatives:
            X = np.einsum("bij,bkjl->bkil", np.linalg.inv(F), basis)      # F^-1 B_k per block
            np.add.at(g, idx, -coef[:, None] * np.einsum("bkii->bk", X))
            Hb = coef[:, None, None] * np.einsum("bkij,blji->bkl", X, X)
            for b in range(idx.shape[0]):
                Hm[np.ix_(idx[b], idx[b])] += Hb[b]
    if problem.G is not None:
        s = problem.G @ x + problem.g
        if (s <= 0).any():
            return np.inf, None, None
        val -= np.sum(np.log(s))
        if derivatives:
            g -= problem.G.T @ (1.0 / s)
            Hm += (problem.G.T / s ** 2) @ problem.G
    return val, g, Hm


def solve(problem: BarrierProblem, x0: np.ndarray, gap: float = 1e-6, max_newton: int = 600,
          mu: float = 10.0) -> BarrierSolution:
    """Minimise from the strictly feasible x0 (see the module doc)."""
    H, c = problem.H, problem.c
    m = sum(b.basis.shape[1] for b in problem.blocks) + (0 if problem.G is None else problem.G.shape[0])
    x = np.asarray(x0, float).copy()
    if not problem.strictly_feasible(x):
        raise IdentificationError("interior-point start is not strictly feasible")
    quad = lambda v: 0.5 * v @ H @ v - c @ v  # noqa: E731
    # initial t: balance the cost's and the barrier's gradients
    _, gb, _ = _terms(problem, x, 0.0, True)
    gf = H @ x - c
    t = max(np.linalg.norm(gb) / max(np.linalg.norm(gf), 1e-300), 1e-8)
    steps = 0
    while True:
        for _ in range(60):
            bv, gb, Hb = _terms(problem, x, t, True)
            grad = t * (H @ x - c) + gb
            hess = t * H + Hb
            try:
                dx = -np.linalg.solve(hess, grad)
            except np.linalg.LinAlgError:
                dx = -np.linalg.lstsq(hess, grad, rcond=None)[0]
            decrement = float(-grad @ dx)
            steps += 1
            if decrement / 2.0 <= 1e-10 or steps >= max_newton:
                break
            phi0 = t * quad(x) + bv
            s = 1.0
            while s > 1e-14:
                cand = x + s * dx
                bc = _terms(problem, cand, t, False)[0]
                if np.isfinite(bc) and t * quad(cand) + bc <= phi0 - 0.25 * s * decrement:
                    break
                s *= 0.5
            else:
                break
            x = x + s * dx
        if m / t < gap or steps >= max_newton:
            return BarrierSolution(x, steps, t)
        t *= mu
