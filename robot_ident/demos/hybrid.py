"""`robot-ident demo --robot hybrid5`: source A's hybrid machining robot end to end.

1. CAD model: urdf/hybrid5.urdf + urdf/hybrid5_closures.yaml as a `ClosedChainModel`
   (the three actuated limbs tied: identical limbs), Coulomb smoothing 1 mm/s.
2. The "real" robot differs from the CAD: every body's mass and inertia scaled by a few
   percent and its centre of mass shifted by a few millimetres (the tied limbs alike), a
   cutting tool on the spindle; armature, Coulomb and viscous friction on the five
   actuated joints; current-sensor offsets.
3. Excitation (source A): 7th-order polynomials per actuated joint, rest to rest at the
   home pose, chained into segments; the coefficients are optimised for the condition
   number of the base regressor within the strokes and angle ranges, velocity and
   acceleration limits (the excitation designer, GA with an evaluation budget).
4. MuJoCo simulates the whole tree with the loop closures as `connect` equalities, driven
   by limb forces and head torques (1 kHz feed-forward + PD); the drives report motor
   currents (screw limbs: F = 2 pi r k_t eta i / lead, rotary head), with noise.
5. Currents -> efforts (robot_ident.model.actuation), filter, differentiate, decimate; identify by
   WLS and by source A's Sobol + GA (and its exact bounded-LS twin) on the same data;
   validate every method on a held-out polynomial trajectory: RMS / noise std per actuator.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..data.signals import FilterOptions, process
from ..errors import IdentificationError, ModelError, TrajectoryError
from ..estimation import ESTIMATORS, IdentificationResult, build_problem
from ..estimation.validation import ValidationReport, validate
from ..excitation import LimitSpec, Margins, PolynomialTrajectory
from ..excitation.designer import DesignSpec, design_excitation
from ..excitation.parameterisation import Bounds, Parameterisation
from ..excitation.problem import ExcitationProblem
from ..mechanisms.closed_chain import ClosedChainModel, ClosedChainSpec
from ..model.actuation import ActuatorSet
from ..model.base import BaseParameters
from ..model.robot import FrictionOptions
from ..sim.closed_chain_sim import ClosedChainSim
from ..sim.mujoco_arm import SimNoise
from ..util.progress import Progress
from ..util.resources import share_file


# ----------------------------------------------------------------------------- trajectories
@dataclass(frozen=True)
class ChainedPolynomialTrajectory:
    """Segments of source A's 7th-order polynomial, each rest to rest at ``start``.

    Segment s covers [s T, (s + 1) T] and is ``PolynomialTrajectory(start, coefficients[s])``;
    position, velocity and acceleration are continuous at the joins (at rest at ``start``)."""

    joint_names: tuple
    segment_duration: float
    start: np.ndarray            # (n,)
    coefficients: np.ndarray     # (S, n, 2)

    family = "polynomial7_chain"

    def __post_init__(self):
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        c = np.asarray(self.coefficients, float)
        if c.ndim != 3 or c.shape[1:] != (len(self.joint_names), 2):
            raise TrajectoryError(f"chained polynomial coefficients must be (S, {len(self.joint_names)}, 2), "
                                  f"got {c.shape}")
        object.__setattr__(self, "coefficients", c)
        object.__setattr__(self, "start", np.asarray(self.start, float))

    @property
    def segments(self) -> int:
        return self.coefficients.shape[0]

    @property
    def duration(self) -> float:
        return self.segments * self.segment_duration

    def segment(self, s: int) -> PolynomialTrajectory:
        return PolynomialTrajectory(self.joint_names, self.segment_duration, self.start, self.coefficients[s])

    def sample(self, t):
        t = np.clip(np.atleast_1d(np.asarray(t, float)), 0.0, self.duration)
        T = self.segment_duration
        seg = np.minimum((t // T).astype(int), self.segments - 1)
        n = len(self.joint_names)
        out = [np.empty((t.size, n)) for _ in range(3)]
        for s in np.unique(seg):
            k = seg == s
            for o, v in zip(out, self.segment(s).sample(t[k] - s * T)):
                o[k] = v
        return tuple(out)


class ChainedPolynomialParameters(Parameterisation):
    """x = coefficients (c0, c1) per segment and joint (segment-major) of the chain."""

    family = "polynomial7_chain"

    def __init__(self, joint_names, segments: int, segment_duration: float, start):
        self.joint_names = tuple(joint_names)
        self.S, self.T = int(segments), float(segment_duration)
        self.start = np.asarray(start, float)
        self.var_joint = np.tile(np.repeat(np.arange(self.n), 2), self.S)
        self.offset_var = -np.ones(self.n, dtype=int)

    def build(self, x) -> ChainedPolynomialTrajectory:
        return ChainedPolynomialTrajectory(self.joint_names, self.T, self.start,
                                           np.asarray(x, float).reshape(self.S, self.n, 2))

    def to_vector(self, traj) -> np.ndarray:
        return traj.coefficients.ravel().copy()

    def box(self, bounds: Bounds):
        rng = bounds.upper - bounds.lower
        hi = np.tile(np.repeat(64.0 * rng, 2) * np.tile([1.0, 2.0], self.n), self.S)
        return -hi, hi


def random_chain(model, segments: int, duration: float, start, bounds: Bounds, seed: int,
                 fraction=(0.3, 0.45)) -> ChainedPolynomialTrajectory:
    """Random coefficients with excursions of `fraction` of each joint's range, then
    scaled into the velocity and acceleration bounds."""
    rng = np.random.default_rng(seed)
    span = bounds.upper - bounds.lower
    room = np.minimum(bounds.upper - start, start - bounds.lower)
    c = np.empty((segments, model.n, 2))
    for s in range(segments):
        amp = rng.uniform(*fraction, size=model.n) * np.minimum(span, 2 * room) * 64 * rng.choice([-1, 1], model.n)
        c[s] = np.stack([amp, -rng.uniform(0.0, 1.0, size=model.n) * amp], axis=1)
    param = ChainedPolynomialParameters(model.joint_names, segments, duration, start)
    t = np.linspace(0.0, segments * duration, 40 * segments + 1)
    off, B = param.basis(t)
    x = param.repair(c.ravel(), bounds, off, B)
    return param.build(x)


# ----------------------------------------------------------------------------- setup
@dataclass(frozen=True)
class HybridDemoSetup:
    """Everything the hybrid demo varies; defaults are the figures quoted in docs/user-guide.md."""

    effort_noise: float = 0.01               # fraction of each actuator's effort RMS
    position_noise: float = 2e-6             # m or rad (linear scales on the limbs, encoders on the head)
    velocity_noise: float = 2e-4             # m/s or rad/s
    segments: int = 4                        # identification polynomial segments
    validation_segments: int = 2
    segment_duration: float = 6.0
    velocity_limits: tuple | None = None     # None: the URDF's
    acceleration_limits: tuple = (0.5, 0.5, 0.5, 4.0, 4.0)
    design_evals: int = 200                  # excitation GA budget in criterion evaluations (0: random coefficients)
    methods: tuple = ("wls", "sobol-ga", "sobol-ls")
    ga_generations: int = 1000
    tie_limbs: bool = True
    coulomb_velocity_scale: float = 1e-3
    moving_threshold: tuple = (0.005, 0.005, 0.005, 0.02, 0.02)   # m/s, rad/s
    seed: int = 7
    # The "real" robot's drives (actuated joint order).
    armature: tuple = (35.0, 35.0, 35.0, 0.8, 0.3)       # kg (limbs), kg m^2 (head)
    coulomb: tuple = (60.0, 55.0, 65.0, 4.0, 2.0)        # N, N m
    viscous: tuple = (400.0, 380.0, 420.0, 6.0, 3.0)     # N s/m, N m s/rad
    effort_offset: tuple = (12.0, -9.0, 7.0, 0.6, -0.4)  # N, N m (current-sensor bias)
    tool_mass: float = 3.5
    tool_com: tuple = (0.0, 0.0, -0.28)                  # in the spindle frame
    filter: FilterOptions = field(default_factory=lambda: FilterOptions(cutoff_hz=8.0, target_rate_hz=100.0))


def hybrid_spec_path() -> Path:
    return share_file("urdf", "hybrid5_closures.yaml")


def load_hybrid(setup: HybridDemoSetup) -> tuple[ClosedChainModel, ClosedChainSpec]:
    spec = ClosedChainSpec.from_yaml(hybrid_spec_path())
    model = ClosedChainModel(spec.urdf, spec.actuated, spec.closures, spec.home,
                             FrictionOptions(coulomb_velocity_scale=setup.coulomb_velocity_scale),
                             tie=spec.tie if setup.tie_limbs else None)
    return model, spec


def true_parameters(model: ClosedChainModel, setup: HybridDemoSetup) -> np.ndarray:
    """The simulated robot's standard parameters: CAD perturbed physically (tied limbs alike,
    since a tied block is one set of parameters), a tool on the spindle, drive parameters."""
    rng = np.random.default_rng(setup.seed)
    theta = model.nominal.copy()
    lay = model.layout
    for b in lay.body_joints:
        I = model.body_inertia(theta, b)
        s = 1.0 + rng.uniform(-0.08, 0.08)
        J = pin.Inertia(I.mass * s, I.lever + rng.uniform(-0.005, 0.005, 3), I.inertia * s)
        if b == "head_c":
            J = J + pin.Inertia(setup.tool_mass, np.array(setup.tool_com), np.diag([0.02, 0.02, 0.004]))
        theta[lay.inertial_slice(b)] = J.toDynamicParameters()
    for k, j in enumerate(model.joint_names):
        for sym, vals in (("Ia", setup.armature), ("Fc", setup.coulomb), ("Fv", setup.viscous),
                          ("off", setup.effort_offset)):
            if sym in lay.actuator_symbols:
                theta[lay.index(f"{j}.{sym}")] = vals[k]
    return theta


@dataclass
class MethodOutcome:
    result: IdentificationResult
    validation: ValidationReport
    wall_time: float


@dataclass
class HybridOutcome:
    model: ClosedChainModel
    base: BaseParameters
    outcomes: dict                     # method -> MethodOutcome
    noise_std: np.ndarray              # validation run's effort noise std per actuator
    condition_number: float            # of the identification data's base regressor
    design_cond: float | None          # designer's figure (uniform samples of the trajectory)
    random_cond: float | None          # same figure for the random start
    max_violation: float
    true_base: np.ndarray
    timings: dict
    class_counts: dict | None
    output: Path | None = None
    failures: dict = field(default_factory=dict)    # method -> reason it refused

    @property
    def n_standard(self) -> int:
        return self.model.layout.size


def _actuators(spec: ClosedChainSpec, model: ClosedChainModel) -> ActuatorSet:
    acts = ActuatorSet.from_mapping(model.joint_names, spec.actuators)
    acts.check_joint_kinds({j: model.is_prismatic(j) for j in model.joint_names})
    return acts


def _record(sim: ClosedChainSim, traj, noise: SimNoise, acts: ActuatorSet, setup: HybridDemoSetup):
    run = sim.run(traj, noise=noise)
    # The drives report motor currents; the identification converts them back (screw lead, gears).
    rec = run.recording
    currents = acts.currents(rec.effort, rec.joint_names)
    from dataclasses import replace
    rec_i = replace(rec, effort=currents, meta={**rec.meta, "effort_from": "current"})
    data = process(acts.apply(rec_i), setup.filter)
    return run, data


def run_hybrid_demo(setup: HybridDemoSetup | None = None, progress: Progress | None = None) -> HybridOutcome:
    setup = setup or HybridDemoSetup()
    progress = progress or Progress(quiet=True)
    with progress.stage("model"):
        model, spec = load_hybrid(setup)
        n = model.n
        for label in ("acceleration_limits", "armature", "coulomb", "viscous", "effort_offset", "moving_threshold"):
            if len(getattr(setup, label)) != n:
                raise ModelError(f"hybrid demo setup {label} needs {n} entries ({', '.join(model.joint_names)})")
        truth = true_parameters(model, setup)
        acts = _actuators(spec, model)
    with progress.stage("base parameters"):
        base = BaseParameters.from_model(model, n_samples=300, seed=0, velocity_scale=0.2, acceleration_scale=2.0)
        true_base = base.project(truth)
    vel = model.limits.velocity if setup.velocity_limits is None else np.asarray(setup.velocity_limits, float)
    limits = LimitSpec(model.joint_names, model.limits.lower, model.limits.upper, vel,
                       np.asarray(setup.acceleration_limits, float),
                       margins=Margins(position=0.004, velocity=0.05, acceleration=0.05))
    bounds = limits.bounds()
    start = model.home_actuated()
    with progress.stage("excitation"):
        ident_traj = random_chain(model, setup.segments, setup.segment_duration, start, bounds, setup.seed)
        param = ChainedPolynomialParameters(model.joint_names, setup.segments, setup.segment_duration, start)
        problem = ExcitationProblem(model, base, param, limits, "cond", None, n_samples=30 * setup.segments,
                                    n_constraint=40 * setup.segments + 1)
        random_cond = problem.criterion_report(param.to_vector(ident_traj), 30 * setup.segments)[0]
        design_cond = None
        if setup.design_evals > 0:
            ds = DesignSpec(family="polynomial7", optimizer="ga", max_time=None, max_evals=setup.design_evals,
                            seed=setup.seed, n_evaluation=30 * setup.segments, check_dt=5e-3)
            try:
                designed = design_excitation(model, limits, ds, base, problem=problem)
            except TrajectoryError:      # nothing within the limits found in the budget: keep the random start
                designed = None
            design_cond = random_cond
            if designed is not None and designed.cond < random_cond:
                ident_traj, design_cond = designed.trajectory, designed.cond
        valid_traj = random_chain(model, setup.validation_segments, setup.segment_duration, start, bounds,
                                  setup.seed + 1000)
    with progress.stage("simulate"):
        sim = ClosedChainSim(model, truth, nominal=model.nominal)
        run_i, ident_data = _record(sim, ident_traj, SimNoise(setup.position_noise, setup.velocity_noise, setup.effort_noise, seed=setup.seed + 1),
                                    acts, setup)
        run_v, valid_data = _record(sim, valid_traj, SimNoise(setup.position_noise, setup.velocity_noise, setup.effort_noise, seed=setup.seed + 2),
                                    acts, setup)
    thr = np.asarray(setup.moving_threshold, float)
    guard = 1.0 / setup.filter.cutoff_hz
    with progress.stage("identify"):
        problem_id = build_problem(model, base, ident_data, thr, guard)
        W = problem_id.W
        cond = float(np.linalg.cond(W))
        outcomes = {}
        counts = None
        failures = {}
        for method in setup.methods:
            t0 = time.perf_counter()
            fn = ESTIMATORS[method]
            try:
                if method == "sobol-ga":
                    res = fn(problem_id, generations=setup.ga_generations, seed=setup.seed)
                else:
                    res = fn(problem_id)
            except IdentificationError as exc:
                failures[method] = str(exc)
                continue
            wall = time.perf_counter() - t0
            if "class_counts" in res.extra:
                counts = res.extra["class_counts"]
            rep = validate(res, model, valid_data, thr, run_v.effort_noise_std, guard)
            outcomes[method] = MethodOutcome(res, rep, wall)
    if not outcomes:
        raise IdentificationError("every estimator failed: " + "; ".join(f"{k}: {v}" for k, v in failures.items()))
    return HybridOutcome(model, base, outcomes, run_v.effort_noise_std, cond, design_cond, random_cond,
                         max(run_i.max_violation, run_v.max_violation), true_base, dict(progress.timings), counts,
                         failures=failures)


def format_hybrid_summary(o: HybridOutcome) -> str:
    m = o.model
    lines = ["", "hybrid5: 5-DOF hybrid machining robot (3 screw-driven limbs + passive support limb, A/C head)",
             f"standard parameters: {o.n_standard} ({m.layout.n_inertial} inertial"
             f"{', three limbs tied' if m.tie_groups else ''}, {o.n_standard - m.layout.n_inertial} actuator); "
             f"base parameters: {o.base.size}",
             f"excitation: condition number of the base regressor {o.condition_number:.3g} (identification data)"
             + (f"; designer {o.design_cond:.3g} vs random start {o.random_cond:.3g}" if o.design_cond else ""),
             f"MuJoCo closure violation: max {o.max_violation:.2e} m"]
    if o.class_counts:
        c = o.class_counts
        lines.append(f"Sobol classes of the {m.layout.n_inertial} inertial parameters: high {c['high']}, "
                     f"low {c['low']}, zero {c['zero']}")
    lines += ["", "Validation on a held-out trajectory: RMS / noise std per actuator", ""]
    head = f"{'actuator':<14}{'noise std':>16}" + "".join(f"{k:>11}" for k in o.outcomes)
    lines.append(head)
    for k, j in enumerate(m.joint_names):
        unit = "N" if m.is_prismatic(j) else "N*m"
        row = f"{j:<14}{o.noise_std[k]:>11.4g} {unit:<4}" + "".join(f"{mo.validation.noise_ratio[k]:>11.3f}"
                                                         for mo in o.outcomes.values())
        lines.append(row)
    lines.append("")
    for name, mo in o.outcomes.items():
        r = mo.result
        lines.append(f"{name}: {r.n_rows} equations, wall time {mo.wall_time:.2f} s"
                     + (f", GA {r.extra['ga_generations']} generations x {r.extra['ga_population']}"
                        if "ga_generations" in r.extra else ""))
    for name, why in o.failures.items():
        lines.append(f"{name}: refused: {why}")
    lines.append("stage wall time: " + ", ".join(f"{k} {t:.1f} s" for k, t in o.timings.items()))
    if o.output is not None:
        lines.append(f"result folder: {o.output}/ (result.yaml" + (", identified.urdf" if (o.output / "identified.urdf").exists()
                                                                   else "") + ")")
    return "\n".join(lines)


def write_hybrid_results(folder, o: HybridOutcome) -> Path:
    """result.yaml of the first method (with every method's validation under ``demo``) and, when
    an estimator produced standard parameters, identified.urdf of the tree (tied limbs expanded)."""
    from dataclasses import replace

    from ..io.results import result_to_dict, write_result_yaml
    from ..io.urdf_export import write_parameters
    from ..util.atomic import atomic_write_text
    out = Path(folder)
    methods = list(o.outcomes)
    first = o.outcomes[methods[0]]
    val = replace(first.validation, moving_threshold=[float(x) for x in np.atleast_1d(first.validation.moving_threshold)])
    extra = {"demo": {
        "robot": "hybrid5",
        "standard_parameters": o.n_standard, "base_parameters": o.base.size,
        "condition_number": float(o.condition_number),
        "max_closure_violation_m": float(o.max_violation),
        "sobol_class_counts": o.class_counts,
        "effort_noise_std": {j: float(s) for j, s in zip(o.model.joint_names, o.noise_std)},
        "validation_rms_over_noise_std": {m: {j: float(r) for j, r in zip(o.model.joint_names,
                                                                             mo.validation.noise_ratio)}
                                          for m, mo in o.outcomes.items()},
        "true_base_parameters": [float(v) for v in o.true_base],
    }}
    d = result_to_dict(first.result, o.model, val, extra)
    d["settings"] = {k: v for k, v in d["settings"].items() if k != "sensitivity"}
    write_result_yaml(out, d)
    std = next((mo.result for mo in o.outcomes.values() if mo.result.standard_values is not None), None)
    if std is not None:
        xml, report = write_parameters(o.model.tree, o.model.full_inertial(std.standard_values))
        note = f"<!-- identified by robot_ident ({std.method}); kept CAD values: {sorted(report.kept_cad)} -->\n"
        head, sep, body = xml.partition("\n")
        atomic_write_text(out / "identified.urdf", head + sep + note + body)
    o.output = out
    return out
