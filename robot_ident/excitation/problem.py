"""The excitation design problem that every optimiser sees through one interface.

`ExcitationProblem` holds the model, the base parameters, a parameterisation, the
limits and the criterion, and offers:

* ``value(x)`` / ``value_and_grad(x)`` -- criterion to minimise at the optimisation
  samples (log cond or -logdet), gradient exact through the affine basis;
* ``linear_constraints()`` -- ``A x <= b`` for position, velocity and acceleration on
  the constraint grid (exact, since states are affine in x);
* ``effort_constraints(x)`` -- nominal efforts inside the effort bound at the
  optimisation samples, with Jacobian (only if the limits include efforts);
* ``repair(x)`` -- pull any vector back inside the kinematic limits on the grid;
* ``fitness(x)`` -- repaired criterion plus an effort penalty and a collision penalty
  (larger than any criterion value: a feasibility rule): what the population methods
  minimise;
* ``collision`` -- optional `CollisionConstraint` (distance >= margin on sampled times);
* an evaluation counter and a budget (evaluations and/or wall time). One gradient
  counts as 3n + 1 evaluations, its real cost in regressor computations, so that an
  evaluation budget is fair between gradient and population methods.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..errors import TrajectoryError
from .constraints import LimitSpec
from .criteria import CRITERIA, criterion_values, objective_value
from .evaluator import RegressorEvaluator
from .parameterisation import Parameterisation


class BudgetExhausted(Exception):
    """Raised inside an optimiser when the evaluation or time budget is spent."""


@dataclass(frozen=True)
class Budget:
    max_evals: int | None = None
    max_time: float | None = None      # wall seconds (CPU seconds of this process if cpu)
    cpu: bool = False                  # count max_time in CPU time (a shared machine's fair clock)

    def __post_init__(self):
        if self.max_evals is None and self.max_time is None:
            raise TrajectoryError("an optimisation budget needs max_evals or max_time")


class ExcitationProblem:
    def __init__(self, model, base, param: Parameterisation, limits: LimitSpec,
                 criterion: str = "cond", joint_weights=None, n_samples: int = 100,
                 n_constraint: int = 250, collision=None):
        if criterion not in CRITERIA:
            raise TrajectoryError(f"unknown criterion {criterion!r}; choose one of {', '.join(CRITERIA)}")
        if tuple(param.joint_names) != tuple(model.joint_names) or limits.joint_names != tuple(model.joint_names):
            raise TrajectoryError("model, parameterisation and limits must list the same joints in the same order")
        self.model, self.base, self.param, self.limits = model, base, param, limits
        self.criterion = criterion
        self.progress = None             # line -> None: the best so far, now and then (search.Tracker)
        self.progress_at = -np.inf       # monotonic time of the last progress line (shared by the phases)
        self.evaluator = RegressorEvaluator(model, base, joint_weights)
        self.n = model.n
        T = param.duration
        self.t_opt = (np.arange(n_samples) + 0.5) * T / n_samples
        self.t_con = np.linspace(0.0, T, n_constraint)
        self.bounds = limits.bounds()
        self.effort_bound = limits.effort_bound()
        self._opt_off, self._opt_B = param.basis(self.t_opt)
        self._con_off, self._con_B = param.basis(self.t_con)
        self._Bz = np.concatenate(self._opt_B, axis=1)            # (N, 3n, K)
        self.box = param.box(self.bounds)
        self.collision = collision     # CollisionConstraint or None (distance >= margin on sampled times)
        self._n_samples0 = n_samples
        self._cost_scale = 1.0
        self.smooth = 0.0        # > 0: value_and_grad uses the smooth p-norm surrogate of log cond
        self.n_evals = 0
        self._budget: Budget | None = None
        self._clock = time.perf_counter
        self._t0 = self._clock()
        self._cache_x = None
        self._cache = None
        self._cache_smooth = None

    # ----------------------------------------------------------------- budget
    def start(self, budget: Budget):
        self._budget = budget
        self.n_evals = 0
        self._clock = time.process_time if budget.cpu else time.perf_counter
        self._t0 = self._clock()

    def used_fraction(self) -> float:
        """Share of the budget spent so far (the larger of evaluations and time)."""
        b = self._budget
        if b is None:
            return 0.0
        parts = [0.0]
        if b.max_evals is not None:
            parts.append(self.n_evals / b.max_evals)
        if b.max_time is not None:
            parts.append(self.elapsed / b.max_time)
        return max(parts)

    def set_samples(self, n_samples: int):
        """Change the optimisation grid to n uniform (mid-point) samples; evaluations on it
        are charged n / n_original each, so the budget stays fair."""
        T = self.param.duration
        self.t_opt = (np.arange(n_samples) + 0.5) * T / n_samples
        self._opt_off, self._opt_B = self.param.basis(self.t_opt)
        self._Bz = np.concatenate(self._opt_B, axis=1)
        self._cost_scale = n_samples / self._n_samples0
        self._cache_x = None

    def release(self):
        """End the budget (the counter keeps its value); later evaluations are free."""
        self._budget = None

    @property
    def elapsed(self) -> float:
        return self._clock() - self._t0

    def exhausted(self) -> bool:
        b = self._budget
        if b is None:
            return False
        return ((b.max_evals is not None and self.n_evals >= b.max_evals)
                or (b.max_time is not None and self.elapsed >= b.max_time))

    def _spend(self, cost: int):
        if self.exhausted():
            raise BudgetExhausted()
        self.n_evals += int(np.ceil(cost * self._cost_scale))

    # ----------------------------------------------------------------- states
    def states(self, x, grid: str = "opt"):
        off, B = (self._opt_off, self._opt_B) if grid == "opt" else (self._con_off, self._con_B)
        x = np.asarray(x, dtype=float)
        return tuple(o + Bm @ x for o, Bm in zip(off, B))

    # -------------------------------------------------------------- criterion
    def value(self, x) -> float:
        self._spend(1)
        q, qd, qdd = self.states(x)
        W = self.evaluator.base_regressor(q, qd, qdd)
        return objective_value(W, self.criterion, len(self.t_opt))

    def _jac_eval(self, x):
        x = np.asarray(x, dtype=float)
        if self._cache_x is not None and np.array_equal(x, self._cache_x) and self._cache_smooth == self.smooth:
            return self._cache
        self._spend(3 * self.n + 1)
        q, qd, qdd = self.states(x)
        theta = self.model.nominal if self.effort_bound is not None else None
        f, gz, tau, dtau = self.evaluator.objective_with_state_gradient(q, qd, qdd, self.criterion, theta,
                                                                          self.smooth)
        g = np.einsum("sz,szk->k", gz, self._Bz)
        dtau_x = None if tau is None else np.einsum("szi,szk->sik", dtau, self._Bz)
        self.last_true = self.evaluator.last_true
        self._cache_x, self._cache, self._cache_smooth = x.copy(), (f, g, tau, dtau_x), self.smooth
        return self._cache

    def value_and_grad(self, x):
        f, g, _, _ = self._jac_eval(x)
        return f, g

    def criterion_report(self, x, n_eval: int | None = None) -> tuple[float, float]:
        """(cond, logdet) of the trajectory of x on a uniform grid (default: the
        optimisation samples); not counted against the budget."""
        t = self.t_opt if n_eval is None else (np.arange(n_eval) + 0.5) * self.param.duration / n_eval
        traj = self.param.build(x)
        q, qd, qdd = traj.sample(t)
        return criterion_values(self.evaluator.base_regressor(q, qd, qdd), len(t))

    # ------------------------------------------------------------ constraints
    def linear_constraints(self, implied: bool = False, rows: bool = False):
        """(A, b) with A x <= b on the constraint grid. ``implied``: leave out the
        acceleration rows of joints whose velocity rows imply them
        (`Parameterisation.acceleration_implied`; a third fewer rows for the optimiser's
        QP on the Panda, the same feasible set). ``rows``: also (kind, joint) of each row,
        kind 0/1 position upper/lower, 2/3 velocity, 4/5 acceleration."""
        (qo, qdo, qddo), (Bq, Bqd, Bqdd) = self._con_off, self._con_B
        K = self.param.n_vars
        bd = self.bounds
        blocks = [(Bq, bd.upper - qo), (-Bq, qo - bd.lower),
                  (Bqd, bd.velocity - qdo), (-Bqd, bd.velocity + qdo),
                  (Bqdd, bd.acceleration - qddo), (-Bqdd, bd.acceleration + qddo)]
        A = np.concatenate([Bm.reshape(-1, K) for Bm, _ in blocks])
        b = np.concatenate([np.broadcast_to(r, Bm.shape[:2]).ravel() for Bm, r in blocks])
        keep = np.isfinite(b) & (np.abs(A).sum(1) > 0)
        n_t = len(self.t_con)
        kind = np.repeat(np.arange(6), n_t * self.n)            # block of every row
        joint = np.tile(np.arange(self.n), 6 * n_t)
        if implied and n_t > 1:
            spacing = float(np.max(np.diff(self.t_con)))
            drop = self.param.acceleration_implied(bd, spacing)
            keep &= ~((kind >= 4) & drop[joint])
        if rows:
            return A[keep], b[keep], (kind[keep], joint[keep])
        return A[keep], b[keep]

    def effort_constraints(self, x):
        """(c, J): c >= 0 iff |nominal effort| <= bound at every optimisation sample."""
        _, _, tau, dtau_x = self._jac_eval(x)
        eb = self.effort_bound
        c = np.concatenate([(eb - tau).ravel(), (eb + tau).ravel()])
        J = np.concatenate([-dtau_x.reshape(-1, dtau_x.shape[-1]), dtau_x.reshape(-1, dtau_x.shape[-1])])
        return c, J

    def effort_excess(self, x) -> float:
        """Largest relative excess of nominal efforts over the bound at the samples (0 if none)."""
        if self.effort_bound is None:
            return 0.0
        q, qd, qdd = self.states(x)
        tau = self.model.efforts(q, qd, qdd)
        return float(max(0.0, (np.abs(tau) / self.effort_bound - 1.0).max()))

    def collision_excess(self, x) -> float:
        """How far (m) the closest pair is inside the collision margin at the collision samples."""
        return 0.0 if self.collision is None else self.collision.excess(x)

    def kinematic_excess(self, x) -> float:
        A, b = self.linear_constraints_cached
        return float(max(0.0, (A @ x - b).max()))

    @property
    def linear_constraints_cached(self):
        if not hasattr(self, "_lin"):
            self._lin = self.linear_constraints()
        return self._lin

    @property
    def reduced_constraints_cached(self):
        """`linear_constraints(implied=True)`: the same feasible set in fewer rows."""
        if not hasattr(self, "_lin_reduced"):
            self._lin_reduced = self.linear_constraints(implied=True)
        return self._lin_reduced

    def repair(self, x) -> np.ndarray:
        return self.param.repair(x, self.bounds, self._con_off, self._con_B)

    def fitness(self, x) -> tuple[float, np.ndarray]:
        """(penalised objective, repaired x): what population methods minimise."""
        xr = self.repair(x)
        f = self.value(xr)
        if not np.isfinite(f):
            f = 1e6
        ex = self.effort_excess(xr)
        if ex > 0:
            f += 100.0 * (1.0 + ex)
        cx = self.collision_excess(xr)
        if cx > 0:         # feasibility rule: any collision-free point beats every colliding one
            f += 1000.0 * (1.0 + cx / max(self.collision.margin, 1e-3))
        return f, xr

    def _clear_centre(self, rng, lo, hi, scal, pool: int = 400) -> np.ndarray:
        """A random point whose centre pose (the excursions shrunk to nothing: the offset of a
        Fourier family, the start of the others) keeps every pair's margin, so that shrinking
        the excursions can end collision-free. The offsets come from a pool of `pool` random
        centre poses kept if clear (drawn once: on the UR5 over its +-2 pi limits above a
        floor, about one pose in ten is); without a clear one, any draw."""
        x = self.repair(rng.uniform(lo, hi))
        off = self.param.offset_var[self.param.offset_var >= 0]
        if off.size == 0:
            return x
        if getattr(self, "_centre_pool", None) is None:
            X = rng.uniform(lo, hi, (pool, len(lo)))
            C = np.array([self.collision.q(np.where(scal, 0.0, xx))[0] for xx in X])
            ok = (self.collision.cm.distances(C) >= self.collision.margins).all(axis=1)
            self._centre_pool = X[ok][:, off]
        if len(self._centre_pool):
            x = x.copy()
            x[off] = self._centre_pool[rng.integers(len(self._centre_pool))]
            x = self.repair(x)
        return x

    def random_start(self, rng: np.random.Generator) -> np.ndarray:
        lo, hi = self.box
        if self.collision is None:
            return self.repair(rng.uniform(lo, hi))
        # With collision constraints: a random feasible point, its excursions shrunk toward
        # the centre pose until it is collision-free on the samples (SLSQP copes badly with
        # deeply colliding starts); the least colliding of a few draws otherwise.
        scal = np.ones(self.param.n_vars, dtype=bool)
        scal[self.param.offset_var[self.param.offset_var >= 0]] = False
        best, best_ex = None, np.inf
        for _ in range(8):
            x = self._clear_centre(rng, lo, hi, scal)
            for f in (1.0, 0.7, 0.5, 0.35, 0.25):
                xs = np.where(scal, x * f, x)
                ex = self.collision.excess(xs, stride=4)
                if ex == 0 and self.collision.excess(xs) == 0:
                    return xs
                if ex < best_ex:
                    best, best_ex = xs, ex
        return best
