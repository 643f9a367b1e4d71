"""Distance >= margin as constraints of the excitation problem, on sampled times.

With the trajectory affine in the decision vector x (q(t) = q_off(t) + Bq(t) x), the
distance of pair p at sample t has the exact gradient

    d d_p(t) / d x = (d d_p / d q)(q(t)) . Bq(t),

d d_p / d q from the witness points and normal (CollisionModel.distances_and_jacobians).
SLSQP gets one smooth constraint per sample: the soft minimum over pairs

    c(t) = -1/beta log sum_p exp(-beta g_p(t)),   g_p = min(d_p, margin + activation) - margin,

a lower bound of min_p g_p (so c >= 0 implies every pair keeps the margin), within
log(#pairs near the minimum) / beta of it (beta = 30 / margin: about 1 mm for 3 cm).
A pair whose distance hardly changes (a shoulder just above the floor) must then sit
a little more than that above its own margin, or the constraint is infeasible
everywhere (SLSQP: "inequality constraints incompatible"): hence the 2 mm of
`CollisionModel`'s reduced margins. One
constraint per (sample, pair) was tried first: SLSQP's least-squares subproblem
with thousands of rows failed ("more than 3n iterations") and took seconds per
iteration on the UR5. Pairs farther than margin + activation are constant (zero
gradient), which saves their Jacobians. Population methods use `excess`.
The sample set starts uniform (both ends included) and the designer adds the times
where the dense check found the distance below the margin (an exchange method for the
semi-infinite constraint), so the final dense check is met without a blanket buffer.
"""
from __future__ import annotations

import numpy as np


class CollisionConstraint:
    def __init__(self, cm, param, n_samples: int = 100, activation: float = 0.1):
        self.cm, self.param = cm, param
        self.margin = float(cm.margin)
        self.margins = np.asarray(cm.hull_margins, dtype=float)   # per pair, on the hulls
        self._activation = float(activation)
        self.cap = self.margins + self._activation
        self.beta = 30.0 / max(self.margin, 1e-3)
        T = param.duration
        self.set_times(np.linspace(0.0, T, max(2, int(n_samples))))

    def set_times(self, t):
        self.t = np.unique(np.asarray(t, dtype=float))
        off, B = self.param.basis(self.t)
        self._q_off, self._Bq = off[0], B[0]
        self._cache_key = None

    def add_times(self, t_new):
        self.set_times(np.concatenate([self.t, np.asarray(t_new, dtype=float)]))

    def tighten(self, D, margins):
        """Raise the hull margin of each pair whose acceptance distances D (N, P) fell short of
        `margins` by the shortfall (capped at `margins`): the hulls kept their margin where the
        original geometry did not keep its own."""
        short = np.maximum(0.0, margins - D.min(axis=0)) if D.size else np.zeros(0)
        self.margins = np.minimum(self.margins + np.where(short > 0, short + 1e-3, 0.0), margins)
        self.cap = self.margins + self._activation
        self._cache_key = None

    def q(self, x):
        return self._q_off + self._Bq @ np.asarray(x, dtype=float)

    def _eval(self, x, jac: bool):
        key = (np.asarray(x, dtype=float).tobytes(), jac)
        if self._cache_key == key or (not jac and self._cache_key == (key[0], True)):
            return self._cache
        Q = self.q(x)
        if jac:
            D, J = self.cm.distances_and_jacobians(Q, self.cap)
        else:
            D, J = self.cm.distances(Q), None
        self._cache_key, self._cache = key, (D, J)
        return D, J

    def distances(self, x) -> np.ndarray:
        return self._eval(x, False)[0]

    def _soft(self, D):
        g = np.minimum(D, self.cap) - self.margins
        gmin = g.min(axis=1, keepdims=True)
        e = np.exp(-self.beta * (g - gmin))
        ssum = e.sum(axis=1, keepdims=True)
        c = gmin[:, 0] - np.log(ssum[:, 0]) / self.beta
        w = e / ssum
        w[D >= self.cap] = 0.0
        return c, w

    def values(self, x) -> np.ndarray:
        D, _ = self._eval(x, True)
        return self._soft(D)[0] if D.shape[1] else np.ones(len(D))

    def jacobian(self, x) -> np.ndarray:
        D, J = self._eval(x, True)
        if not D.shape[1]:
            return np.zeros((len(D), self._Bq.shape[-1]))
        _, w = self._soft(D)
        dq = np.einsum("sp,spi->si", w, J)
        return np.einsum("si,sik->sk", dq, self._Bq)

    def excess(self, x, stride: int = 1) -> float:
        """How far (m) the closest sampled pair is inside the margin (0: none); on every
        `stride`-th sample only (a cheap screen) if stride > 1."""
        D = self.distances(x) if stride == 1 else self.cm.distances(self.q(x)[::stride])
        return float(max(0.0, (self.margins - D).max())) if D.size else 0.0
