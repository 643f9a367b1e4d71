"""What every excitation optimiser shares: the best feasible point so far and its
history (`Tracker`), screened random starts, the recorder of one local descent, the
result, and the signals that end a phase or find nothing feasible. (optimizers.py holds
the optimisers, minimax.py the minimax descent; both build on this.)"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import TrajectoryError
from .problem import ExcitationProblem


@dataclass
class OptimizerResult:
    optimizer: str
    x: np.ndarray
    f: float                      # objective (log cond or -logdet) at the optimisation samples
    initial_f: float              # best objective of the starting point / population
    n_evals: int
    wall_time: float
    history: list = field(default_factory=list)    # (evals, seconds, best f)
    info: dict = field(default_factory=dict)


PROGRESS_EVERY_S = 2.0


class NoFeasiblePoint(TrajectoryError):
    """The optimiser evaluated no point that keeps every constraint."""


class Tracker:
    """Best feasible point so far and the convergence history."""

    def __init__(self, problem: ExcitationProblem):
        self.problem = problem
        self.best_f = np.inf
        self.best_x = None
        self.initial_f = None
        self.history = []

    def offer(self, f, x):
        if self.initial_f is None:
            self.initial_f = float(f)
        if f < self.best_f:
            self.best_f, self.best_x = float(f), np.array(x, dtype=float)
        self.history.append((self.problem.n_evals, self.problem.elapsed, self.best_f))
        self._report()

    def _report(self, every_s: float = PROGRESS_EVERY_S) -> None:
        """The best so far to `problem.progress`, at most every `every_s` seconds."""
        report = getattr(self.problem, "progress", None)
        now = time.monotonic()
        if report is None or not np.isfinite(self.best_f) or now - self.problem.progress_at < every_s:
            return
        self.problem.progress_at = now
        value = (f"cond {np.exp(min(self.best_f, 700.0)):.4g}" if self.problem.criterion == "cond"
                 else f"logdet {-self.best_f:.4g}")
        used = self.problem.used_fraction()
        left = (f"about {self.problem.elapsed * (1.0 - used) / used:.0f} s left" if 0.0 < used < 1.0
                else "finishing its last step")      # an optimiser's step may end past the budget
        report(f"best {value} so far, {self.problem.n_evals} evaluations, "
               f"{100 * min(used, 1.0):.0f} % of this phase's budget, {left}")

    def result(self, name, info=None) -> OptimizerResult:
        self.problem.release()
        if self.best_x is None:
            raise NoFeasiblePoint(f"optimiser {name!r} evaluated no feasible point within its budget")
        return OptimizerResult(name, self.best_x, self.best_f, self.initial_f, self.problem.n_evals,
                               self.problem.elapsed, self.history, info or {})


def screened_start(problem: ExcitationProblem, rng, screen: int, tracker: Tracker):
    """The best of `screen` random feasible points by the criterion (collision-free ones
    preferred), offered to `tracker` when its efforts and collisions are admissible.
    Returns (x0, its value, admissible)."""
    cands = [problem.random_start(rng) for _ in range(screen)]
    fs0 = [problem.value(c) for c in cands]
    if problem.collision is not None:      # prefer collision-free starts
        fs0 = [f + 1e3 * problem.collision_excess(c) for f, c in zip(fs0, cands)]
    k = int(np.argmin(fs0))
    x0, f0 = cands[k], fs0[k]
    ok = problem.effort_excess(x0) == 0 and problem.collision_excess(x0) == 0
    if ok:
        tracker.offer(f0, x0)
    return x0, f0, ok


def run_recorder(problem: ExcitationProblem, tracker: Tracker, feasible):
    """(run, on_point): `on_point(f, x)` keeps in `run` ({"f", "x"}) the best feasible point
    of one local descent and adds it to the tracker's history when it beats the best so far."""
    run = {"f": np.inf, "x": None}

    def on_point(f, x):
        if np.isfinite(f) and f < run["f"] and feasible(x):
            run.update(f=f, x=x.copy())
            if f < tracker.best_f:
                tracker.history.append((problem.n_evals, problem.elapsed, float(f)))
    return run, on_point


class PhaseOver(Exception):
    """A local descent's phase of the budget is over."""
