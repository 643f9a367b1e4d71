"""Free-floating space robot in MuJoCo, and `robot-ident demo --robot space`.

Ground truth for `robot_ident.mechanisms.floating_base`:

* `SpaceRobotSim`: the URDF (urdf/space_robot.urdf by default) in MuJoCo with a free
  joint on the root link, gravity off, contacts off, no joint damping, friction or
  armature (MuJoCo's armature is not reacted on the base and would break momentum
  conservation). The base's true inertial parameters may differ from the URDF's (the
  URDF is then only the CAD guess), and a payload can be welded to a frame of the
  arm (a child body without a joint). The arm is driven by joint torques only
  (``qfrc_applied`` on the hinge DOFs: internal torque pairs between adjacent bodies,
  no external force): a PD per joint tracks a 7th-order rest-to-rest profile on the
  driven joint and holds the others at their start angle. RK4 at 1 kHz, torques held
  over each step. The system starts at rest, so its momentum stays zero.
* measured signals, decimated to `record_hz`: joint angles, joint rates and the base
  twist in base coordinates (linear velocity of the base frame origin, angular
  velocity), with Gaussian noise whose standard deviation is a fraction (`noise`) of
  the signal's RMS over the experiment (base linear and angular velocity: the RMS of
  the vector's components; joint rates: each joint's own RMS, so a held joint, which
  barely moves, is measured almost exactly, like a braked joint read by its encoder).

`run_space_demo` runs both stages of source C: identify the base (mass, centre of mass,
inertia) from single-joint experiments, then, with a payload welded to ``tool0``,
identify the payload with the base's estimate taken as known.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from ..mechanisms.floating_base import (
    FloatingBaseEstimate,
    FloatingBaseModel,
    Guidance,
    ga_bounds,
    guidance,
    identify,
    payload_ga_bounds,
)
from ..sim.space_robot_sim import INERTIA_LABELS, SpaceRobotSim, SpaceRun, com_and_inertia
from ..util.progress import Progress
from ..util.resources import share_file


# ------------------------------------------------------------------------ demo
@dataclass(frozen=True)
class SpaceDemoSetup:
    """What `robot-ident demo --robot space` varies; defaults are the figures of docs/user-guide.md.

    The URDF is the CAD model. The simulated base differs from it (propellant used:
    6 % lighter, centre of mass moved by ~2 cm, inertia changed by a few percent), so
    the identification cannot succeed by returning the URDF's base. The payload is a
    6 kg box held 12 cm in front of the grasp frame, its axes tilted."""

    noise: float = 0.001                     # velocity noise std / signal RMS
    # stage 1 (base): joints that turn the base about three independent axes
    joints: tuple = ("shoulder_yaw", "shoulder_pitch", "upper_arm_roll", "elbow_pitch")
    # stage 2 (payload): the elbow carries it around, the wrist turns it about three axes
    payload_joints: tuple = ("elbow_pitch", "wrist_pitch", "wrist_yaw", "wrist_roll")
    q0: tuple = (0.3, -0.5, 0.4, 1.3, -0.6, 0.5, 0.2)
    delta: float = 0.5                       # rad per experiment
    duration: float = 8.0                    # s of motion per experiment
    hold: float = 0.5
    record_hz: float = 100.0                 # measured signals (gyro, encoders) at 100 Hz
    methods: tuple = ("ls", "ga")
    ga_generations: int = 1600
    ga_population: int = 100
    ga_rounds: int = 8
    seed: int = 7
    base_mass_scale: float = 0.94
    base_com_shift: tuple = (0.012, -0.008, 0.015)
    base_inertia_scale: tuple = (0.95, 0.97, 0.96)
    payload_mass: float = 6.0
    payload_com: tuple = (0.12, 0.02, -0.03)           # in the grasp frame
    payload_box: tuple = (0.3, 0.2, 0.25)              # m, for the inertia
    payload_rpy: tuple = (0.2, -0.15, 0.3)             # tilt of the box's axes
    payload_max_mass: float = 20.0                     # GA search box for the payload
    payload_max_distance: float = 0.5


def demo_truth(setup: SpaceDemoSetup, cad: FloatingBaseModel) -> tuple[np.ndarray, np.ndarray]:
    """(true base parameters, true payload parameters about tool0) of the demo."""
    m, c, Ic = com_and_inertia(cad.nominal[cad.body_slice(cad.base_name)])
    S = np.diag(np.sqrt(setup.base_inertia_scale))
    base = pin.Inertia(m * setup.base_mass_scale, c + np.asarray(setup.base_com_shift), S @ Ic @ S)
    a, b, h = setup.payload_box
    mp = setup.payload_mass
    Ibox = np.diag([mp / 12 * (b * b + h * h), mp / 12 * (a * a + h * h), mp / 12 * (a * a + b * b)])
    R = pin.rpy.rpyToMatrix(*setup.payload_rpy)
    payload = pin.Inertia(mp, np.asarray(setup.payload_com, float), R @ Ibox @ R.T)
    return base.toDynamicParameters(), payload.toDynamicParameters()


@dataclass
class BodyErrors:
    """Errors of one identified body against the truth (inertia about the centre of mass)."""

    mass: float                 # relative
    com_mm: float               # |c_hat - c| in mm
    com_rel: float              # |c_hat - c| / |c|
    inertia: dict               # label -> relative error of that component (own magnitude)
    inertia_norm: float         # ||I_hat - I||_F / ||I||_F

    @classmethod
    def of(cls, estimate10: np.ndarray, truth10: np.ndarray) -> "BodyErrors":
        me, ce, Ie = com_and_inertia(estimate10)
        mt, ct, It = com_and_inertia(truth10)
        idx = {"Ixx": (0, 0), "Iyy": (1, 1), "Izz": (2, 2), "Ixy": (0, 1), "Ixz": (0, 2), "Iyz": (1, 2)}
        return cls(abs(me - mt) / mt, 1000 * float(np.linalg.norm(ce - ct)),
                   float(np.linalg.norm(ce - ct) / np.linalg.norm(ct)),
                   {k: abs(Ie[i] - It[i]) / abs(It[i]) for k, i in idx.items()},
                   float(np.linalg.norm(Ie - It) / np.linalg.norm(It)))

    @property
    def max_diagonal(self) -> float:
        return max(self.inertia[k] for k in ("Ixx", "Iyy", "Izz"))


@dataclass
class SpaceStage:
    name: str
    body: str
    truth: np.ndarray
    estimates: dict             # method -> FloatingBaseEstimate
    errors: dict                # method -> BodyErrors
    runs: list


@dataclass
class SpaceDemoOutcome:
    setup: SpaceDemoSetup
    stages: list
    guidance: Guidance
    momentum_drift: float       # worst max|h_total| / max|h_arm| over all runs
    timings: dict = field(default_factory=dict)


def _experiments(sim: SpaceRobotSim, setup: SpaceDemoSetup, joints, seed: int) -> list[SpaceRun]:
    return [sim.run(j, np.asarray(setup.q0, float), setup.delta, setup.duration, setup.hold, setup.record_hz,
                    setup.noise, seed=seed + 101 * k) for k, j in enumerate(joints)]


def run_space_demo(setup: SpaceDemoSetup | None = None, progress: Progress | None = None,
                   urdf=None) -> SpaceDemoOutcome:
    """Both stages of source C on the simulated space robot: base, then payload."""
    setup = setup or SpaceDemoSetup()
    progress = progress or Progress(quiet=True)
    urdf = share_file("urdf", "space_robot.urdf") if urdf is None else urdf
    cad = FloatingBaseModel(urdf, payload_frame="tool0")
    base_true, payload_true = demo_truth(setup, cad)
    theta_cad = cad.nominal.copy()          # arm from the URDF, payload zero
    stages = []
    drift = 0.0

    with progress.stage("simulate base experiments"):
        sim1 = SpaceRobotSim(urdf, base_params=base_true)
        runs1 = _experiments(sim1, setup, setup.joints, setup.seed)
    truth1 = sim1.true_parameters(cad)
    est1, err1 = {}, {}
    lo, hi = ga_bounds(theta_cad[cad.body_slice(cad.base_name)])
    for method in setup.methods:
        with progress.stage(f"identify base ({method})"):
            est1[method] = identify(cad, [r.measured for r in runs1], [cad.base_name], theta_cad, method=method,
                                    bounds=(lo, hi), generations=setup.ga_generations,
                                    population=setup.ga_population, rounds=setup.ga_rounds, seed=setup.seed) if method == "ga" else \
                identify(cad, [r.measured for r in runs1], [cad.base_name], theta_cad, method=method)
        err1[method] = BodyErrors.of(est1[method].body(cad.base_name), truth1[cad.body_slice(cad.base_name)])
    stages.append(SpaceStage("base", cad.base_name, truth1[cad.body_slice(cad.base_name)], est1, err1, runs1))

    with progress.stage("simulate payload experiments"):
        sim2 = SpaceRobotSim(urdf, base_params=base_true, payload_params=payload_true, payload_frame="tool0")
        runs2 = _experiments(sim2, setup, setup.payload_joints, setup.seed + 1)
    truth2 = sim2.true_parameters(cad)
    est2, err2 = {}, {}
    plo, phi = payload_ga_bounds(setup.payload_max_mass, setup.payload_max_distance)
    for method in setup.methods:
        known = est1[method].into(theta_cad, cad)      # the base as identified by the same method
        with progress.stage(f"identify payload ({method})"):
            if method == "ga":
                est2[method] = identify(cad, [r.measured for r in runs2], [cad.payload_name], known, method="ga",
                                        bounds=(plo, phi), generations=setup.ga_generations,
                                        population=setup.ga_population, rounds=setup.ga_rounds,
                                        seed=setup.seed)
            else:
                est2[method] = identify(cad, [r.measured for r in runs2], [cad.payload_name], known, method=method)
        err2[method] = BodyErrors.of(est2[method].body(cad.payload_name), truth2[cad.body_slice(cad.payload_name)])
    stages.append(SpaceStage("payload", cad.payload_name, truth2[cad.body_slice(cad.payload_name)], est2, err2,
                             runs2))
    for r in runs1 + runs2:
        drift = max(drift, *r.momentum_drift())
    g = guidance(cad, theta_cad, [r.measured for r in runs1])
    return SpaceDemoOutcome(setup, stages, g, drift, dict(progress.timings))


def format_space_summary(o: SpaceDemoOutcome) -> str:
    s = o.setup
    lines = ["", f"Free-floating space robot (urdf/space_robot.urdf), momentum conservation, "
                 f"velocity noise {100 * s.noise:g} % of signal RMS",
             f"experiments: one joint at a time from rest, {s.delta} rad in {s.duration} s; base stage: "
             f"{', '.join(s.joints)}; payload stage: {', '.join(s.payload_joints)}",
             f"momentum conservation in the simulation: max |h_total| / max |h_arm| = {o.momentum_drift:.1e}", ""]
    lines += ["measurability guidance (source C), from the CAD parameters:"]
    lines += ["  " + x for x in o.guidance.summary().splitlines()]
    for st in o.stages:
        lines += ["", f"stage {st.name}: true mass {com_and_inertia(st.truth)[0]:.4g} kg, centre of mass "
                      + np.array2string(1000 * com_and_inertia(st.truth)[1], precision=1) + " mm"]
        hdr = f"{'method':<7}{'mass':>8}{'com [mm]':>10}" + "".join(f"{k:>8}" for k in INERTIA_LABELS) \
            + f"{'|dI|/|I|':>10}{'rank':>6}{'cond':>8}{'physical':>10}{'time [s]':>10}"
        lines += ["relative errors in % (inertia about the centre of mass; products relative to their own value)",
                  hdr]
        for method, e in st.errors.items():
            est: FloatingBaseEstimate = st.estimates[method]
            rep = est.identifiability
            lines.append(f"{method:<7}{100 * e.mass:>8.3f}{e.com_mm:>10.2f}"
                         + "".join(f"{100 * e.inertia[k]:>8.3f}" for k in INERTIA_LABELS)
                         + f"{100 * e.inertia_norm:>10.3f}{rep.rank:>6d}{rep.condition_number:>8.1f}"
                           f"{'yes' if est.physical()[st.body][0] else 'NO':>10}{est.wall_time:>10.3f}")
        spans = next(iter(st.estimates.values())).identifiability.omega_span
        lines.append("angular-velocity span (singular values / largest): "
                     + "; ".join(f"{b} " + " ".join(f"{x:.3f}" for x in v) for b, v in spans.items()))
    lines += ["", "stage wall time: " + ", ".join(f"{k} {t:.2f} s" for k, t in o.timings.items())]
    return "\n".join(lines)
