"""Excitation design end to end: family + limits + criterion + optimiser -> a checked
trajectory.

`design_excitation` builds the parameterisation and the problem, runs the chosen
optimiser within its budget, then checks the result on a dense grid. If the dense
check finds a violation between the constraint-grid points (possible but small,
since states are smooth), the trajectory is pulled in by repairing it against
slightly tightened limits and checked again; if it still violates, a
`TrajectoryError` naming the violations is raised. A violating trajectory is never
returned.

With a `CollisionModel` (``collision=``), distance >= margin between every checked pair
and to the environment is a constraint of the optimiser on sampled times
(collision/constraint.py); the result is then checked on the same dense grid, and
where the distance dips below the margin between samples those times join the
constraint samples and SLSQP descends again from the current point (a few rounds);
as a last resort every excursion is scaled toward the centre pose. A colliding
trajectory is never returned: `TrajectoryError` names the closest pair instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .. import defaults
from ..errors import TrajectoryError
from .constraints import LimitReport, LimitSpec, check_trajectory
from .optimizers import NoFeasiblePoint, OptimizerResult, make_optimizer
from .parameterisation import (
    Bounds,
    FourierParameters,
    JointMovesParameters,
    ModifiedFourierParameters,
    Parameterisation,
    PolynomialParameters,
)
from .problem import Budget, ExcitationProblem

FAMILIES = ("fourier", "modified_fourier", "polynomial7", "joint_moves")


@dataclass(frozen=True)
class DesignSpec:
    family: str = defaults.FAMILY
    optimizer: str = defaults.OPTIMIZER
    criterion: str = defaults.CRITERION
    harmonics: int = 5
    base_frequency: float = 0.2 * np.pi       # wf [rad/s]
    duration: float = 10.0                    # polynomial7 duration [s]
    move_duration: float = 2.0                # joint_moves: seconds per move
    start_pose: tuple | None = None           # identified joint order; None: free (Fourier) or mid-range
    joint_weights: tuple | None = None
    max_time: float | None = defaults.MAX_TIME_S
    max_evals: int | None = None
    cpu_time: bool = False                    # max_time in CPU seconds of this process, not wall seconds
    seed: int = defaults.SEED
    n_samples: int = 100                      # optimisation samples over the trajectory
    n_constraint: int = 100                   # constraint-grid points (both ends included)
    check_dt: float = 1e-3                    # dense check step [s]
    n_evaluation: int = 1000                  # samples for the reported cond / logdet
    point_rate: float = 100.0                 # trajectory_msgs points per second
    optimizer_options: dict = field(default_factory=dict)
    collision_samples: int = 100              # collision-constraint samples (both ends included)
    position_limits: tuple | None = None      # per joint (lower, upper) or None: the design's own range

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise TrajectoryError(f"unknown trajectory family {self.family!r}; choose one of {', '.join(FAMILIES)}")


@dataclass(frozen=True)
class DesignResult:
    trajectory: object
    spec: DesignSpec
    limits: LimitSpec
    cond: float            # on spec.n_evaluation uniform samples
    logdet: float
    report: LimitReport
    optimizer: OptimizerResult
    base_size: int
    collision_report: object = None    # CollisionReport of the dense check (None: no collision model given)
    collision_info: str = ""           # what was checked and skipped (CollisionModel.describe)
    collision_environment: dict | None = None   # CollisionModel.to_dict: environment, pairs, skipped
    range_note: str = ""               # the excitation ranges given to unbounded (continuous) joints

    @property
    def valid(self) -> bool:
        return self.report.valid


def make_parameterisation(spec: DesignSpec, joint_names, limits: LimitSpec) -> Parameterisation:
    start = None if spec.start_pose is None else np.asarray(spec.start_pose, dtype=float)
    if start is not None and start.shape != (len(joint_names),):
        raise TrajectoryError(f"start pose has {start.shape} entries, expected {len(joint_names)}")
    if start is not None:
        b = limits.bounds()
        bad = [j for k, j in enumerate(joint_names) if not b.lower[k] <= start[k] <= b.upper[k]]
        if bad:
            raise TrajectoryError(f"start pose of joint(s) {', '.join(bad)} is outside the position "
                                  "limits (with margin)")
    if spec.family == "fourier":
        return FourierParameters(joint_names, spec.base_frequency, spec.harmonics, start)
    if start is None:
        b = limits.bounds()
        start = 0.5 * (np.where(np.isfinite(b.lower), b.lower, 0.0) + np.where(np.isfinite(b.upper), b.upper, 0.0))
    if spec.family == "modified_fourier":
        return ModifiedFourierParameters(joint_names, spec.base_frequency, spec.harmonics, start)
    if spec.family == "polynomial7":
        return PolynomialParameters(joint_names, spec.duration, start)
    return JointMovesParameters(joint_names, start, spec.move_duration)


def design_ranges(limits: LimitSpec, spec: DesignSpec) -> tuple[LimitSpec, str]:
    """The limits the design keeps: the URDF's, narrowed to ``excitation.position_limits``
    where the config gives them, and a joint without position limits (continuous) moved
    within +-pi of its start pose (0 without one): an excitation needs a finite range.
    Returns the limits and a note naming the ranges given to unbounded joints."""
    lo, hi = limits.lower.copy(), limits.upper.copy()
    names = limits.joint_names
    if spec.position_limits is not None:
        for k, r in enumerate(spec.position_limits):
            if r is not None:
                lo[k], hi[k] = max(lo[k], float(r[0])), min(hi[k], float(r[1]))
                if not hi[k] > lo[k]:
                    raise TrajectoryError(f"joint {names[k]!r}: excitation.position_limits {list(r)} do not "
                                          f"overlap the URDF's [{limits.lower[k]:.4g}, {limits.upper[k]:.4g}]")
    free = [k for k in range(len(names)) if not (np.isfinite(lo[k]) and np.isfinite(hi[k]))]
    note = ""
    if free:
        c = np.zeros(len(names)) if spec.start_pose is None else np.asarray(spec.start_pose, dtype=float)
        for k in free:
            lo[k] = lo[k] if np.isfinite(lo[k]) else c[k] - np.pi
            hi[k] = hi[k] if np.isfinite(hi[k]) else c[k] + np.pi
        note = ("joint(s) without position limits (continuous) excited within +-pi of the start pose: "
                + ", ".join(f"{names[k]} [{lo[k]:.3f}, {hi[k]:.3f}] rad" for k in free)
                + "; set excitation.position_limits to choose")
    if note or spec.position_limits is not None:
        limits = replace(limits, lower=lo, upper=hi)
    return limits, note


def _tightened(b: Bounds, f: float) -> Bounds:
    mid = 0.5 * (b.lower + b.upper)
    half = 0.5 * (b.upper - b.lower) * f
    return Bounds(mid - half, mid + half, b.velocity * f, b.acceleration * f)


def _scale_excursion(param: Parameterisation, x: np.ndarray, f: float) -> np.ndarray:
    """Every joint's excursion times f (offset variables kept): smaller velocities and
    accelerations, positions closer to the offset/start, never outside the limits again."""
    scal = np.ones(param.n_vars, dtype=bool)
    off = param.offset_var[param.offset_var >= 0]
    scal[off] = False
    return np.where(scal, x * f, x)


def _limit_repair(problem, param, x, limits, model, spec, start):
    traj = param.build(x)
    report = check_trajectory(traj, limits, model, spec.check_dt, start)
    for f in (0.999, 0.995, 0.99, 0.98, 0.95, 0.9, 0.8, 0.7):
        if report.valid:
            break
        x = param.repair(x, _tightened(problem.bounds, f), problem._con_off, problem._con_B)
        if any(r["quantity"] == "effort" for r in report.violations()):
            # Efforts are not repaired by the kinematic repair: slow the whole motion down.
            x = _scale_excursion(param, x, f)
        traj = param.build(x)
        report = check_trajectory(traj, limits, model, spec.check_dt, start)
    return x, traj, report


def _clear_start(spec: DesignSpec, joint_names, limits: LimitSpec, collision) -> tuple[DesignSpec, str]:
    """A rest-to-rest family without a configured start pose starts mid-range; where that pose
    is closer than the collision margin, the nearest clear pose instead (collision/design.py),
    said in a note. Unchanged when mid-range is clear or no clear pose is found (the start
    clearance check then names the pair)."""
    from dataclasses import replace

    from .collision.design import clear_start_pose
    b = limits.bounds()
    lo = np.where(np.isfinite(b.lower), b.lower, 0.0)
    hi = np.where(np.isfinite(b.upper), b.upper, 0.0)
    mid = 0.5 * (lo + hi)
    q = clear_start_pose(collision, mid, lo, hi, seed=spec.seed)
    if q is None:
        return spec, ""
    pose = ", ".join(f"{j}: {v:.3g}" for j, v in zip(joint_names, q))
    return replace(spec, start_pose=tuple(float(v) for v in q)), (
        f"note: the mid-range start pose is closer than the collision margin; the excitation starts and ends at "
        f"the nearest clear pose instead ({pose}); set excitation.start_pose to choose it")


def design_excitation(model, limits: LimitSpec, spec: DesignSpec, base=None,
                      problem: ExcitationProblem | None = None, collision=None, progress=None) -> DesignResult:
    from ..model.base import BaseParameters
    from ..util.blas import single_threaded_blas
    from .collision.constraint import CollisionConstraint

    if limits.joint_names != tuple(model.joint_names):
        raise TrajectoryError("limits and model list different joints")
    limits, range_note = design_ranges(limits, spec)
    base = base if base is not None else BaseParameters.from_model(model)
    use_collision = collision is not None and collision.active
    if use_collision and problem is None and spec.start_pose is None and spec.family != "fourier":
        spec, note = _clear_start(spec, model.joint_names, limits, collision)
        range_note = "\n".join(x for x in (range_note, note) if x)
    if problem is None:
        param = make_parameterisation(spec, model.joint_names, limits)
        problem = ExcitationProblem(model, base, param, limits, spec.criterion, spec.joint_weights,
                                    spec.n_samples, spec.n_constraint)
    problem.progress = progress          # line -> None: the best so far while the optimisers run
    param = problem.param
    if use_collision:
        from .collision.design import check_start_clearance
        check_start_clearance(collision, param, spec)
        problem.collision = CollisionConstraint(collision, param, spec.collision_samples)
    opt = make_optimizer(spec.optimizer, **spec.optimizer_options)
    with single_threaded_blas():   # small matrices, thousands of evaluations (see robot_ident.util.blas)
        # With collisions, 15 % of a wall-time budget is kept for the dense check and the
        # refinement rounds (collision/design.py), so the whole design fits the budget.
        t_opt = spec.max_time if spec.max_time is None or not use_collision else 0.85 * spec.max_time
        try:
            res = opt.run(problem, Budget(spec.max_evals, t_opt, spec.cpu_time), seed=spec.seed)
        except NoFeasiblePoint as exc:
            from .infeasibility import explain_infeasible
            raise TrajectoryError(f"{exc}; {explain_infeasible(problem, spec.seed)}") from None
    x = res.x
    start = None if spec.start_pose is None else np.asarray(spec.start_pose, dtype=float)
    if start is None and spec.family != "fourier":
        start = param.start
    x, traj, report = _limit_repair(problem, param, x, limits, model, spec, start)
    if not report.valid:
        raise TrajectoryError(f"the designed trajectory violates its limits: {report.summary()}")
    crep, info, env = None, "", None
    if collision is not None:
        env = collision.to_dict()
        from .collision.check import check_collisions
        from .collision.design import enforce_collision_free
        info = collision.describe()
        if use_collision:
            x, traj, report, crep = enforce_collision_free(
                problem, param, x, collision, spec, lambda xx: _limit_repair(problem, param, xx, limits, model,
                                                                             spec, start),
                lambda xx, f: _scale_excursion(param, xx, f))
        else:
            crep = check_collisions(traj, collision, spec.check_dt)
    cond, logdet = problem.criterion_report(x, spec.n_evaluation)
    if not np.array_equal(x, res.x):
        res = replace(res, x=x)
    return DesignResult(traj, spec, limits, cond, logdet, report, res, base.size, crep, info, env, range_note)
