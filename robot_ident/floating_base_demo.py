"""Free-floating space robot in MuJoCo, and `robot-ident demo --robot space`.

Ground truth for `robot_ident.floating_base`:

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
from typing import Sequence

import mujoco
import numpy as np
import pinocchio as pin

from .errors import ModelError
from .floating_base import (FloatingBaseEstimate, FloatingBaseModel, Guidance, MomentumExperiment, ga_bounds,
                            guidance, identify, payload_ga_bounds, rest_to_rest)
from .progress import Progress
from .resources import share_file
from .sim.mujoco_arm import _set_scalar_or_first, mujoco_ready_urdf

INERTIA_LABELS = ("Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz")


def dyn_to_mujoco(dyn10: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(mass, ipos, iquat (w x y z), principal moments) of 10 Pinocchio parameters."""
    I = pin.Inertia.FromDynamicParameters(np.asarray(dyn10, float))
    ev, R = np.linalg.eigh(I.inertia)
    if np.linalg.det(R) < 0:
        R[:, 0] = -R[:, 0]
    quat = pin.Quaternion(R)
    return float(I.mass), np.array(I.lever), np.array([quat.w, quat.x, quat.y, quat.z]), ev


def mujoco_body_dyn(m: mujoco.MjModel, body_id: int) -> np.ndarray:
    """10 Pinocchio parameters of one MuJoCo body about its body frame."""
    w, x, y, z = m.body_iquat[body_id]
    R = pin.Quaternion(w, x, y, z).toRotationMatrix()
    Ic = R @ np.diag(m.body_inertia[body_id]) @ R.T
    return pin.Inertia(float(m.body_mass[body_id]), np.array(m.body_ipos[body_id]), Ic).toDynamicParameters()


def com_and_inertia(dyn10: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, centre of mass, inertia about the centre of mass) of 10 parameters."""
    I = pin.Inertia.FromDynamicParameters(np.asarray(dyn10, float))
    return float(I.mass), np.array(I.lever), np.array(I.inertia)


@dataclass
class SpaceRun:
    measured: MomentumExperiment
    true: MomentumExperiment
    # world-frame momentum of the whole system and of the arm (angular: about the system COM)
    p_total: np.ndarray
    L_total: np.ndarray
    p_arm: np.ndarray
    L_arm: np.ndarray
    noise_std: dict

    def momentum_drift(self) -> tuple[float, float]:
        """max |total momentum| / max |arm momentum|, linear and angular."""
        return (float(np.linalg.norm(self.p_total, axis=1).max() / np.linalg.norm(self.p_arm, axis=1).max()),
                float(np.linalg.norm(self.L_total, axis=1).max() / np.linalg.norm(self.L_arm, axis=1).max()))


class SpaceRobotSim:
    """Free-floating MuJoCo model of a space robot (see the module docstring)."""

    def __init__(self, urdf=None, base_params: np.ndarray | None = None, payload_params: np.ndarray | None = None,
                 payload_frame: str = "tool0", rate_hz: float = 1000.0, integrator: str = "rk4",
                 bandwidth_hz: float = 2.0):
        urdf = share_file("urdf", "space_robot.urdf") if urdf is None else urdf
        self.cad = FloatingBaseModel(urdf)
        spec = mujoco.MjSpec.from_string(mujoco_ready_urdf(self.cad.urdf_xml))
        root = spec.body(self.cad.base_link)
        if root is None:
            raise ModelError(f"root link {self.cad.base_link!r} not found in the MuJoCo model")
        root.add_freejoint()
        if base_params is not None:
            self._set_inertial(root, base_params)
        self.payload_frame = payload_frame if payload_params is not None else None
        if payload_params is not None:
            parent = spec.body(payload_frame)
            if parent is None:
                raise ModelError(f"payload frame {payload_frame!r} is not a link of the URDF")
            body = parent.add_body(name="payload")
            self._set_inertial(body, payload_params)
        for j in spec.joints:
            if j.type == mujoco.mjtJoint.mjJNT_HINGE:
                j.armature = 0.0
                _set_scalar_or_first(j, "damping", 0.0)
                j.frictionloss = 0.0
                j.limited = 0
        spec.option.gravity = np.zeros(3)
        spec.option.timestep = 1.0 / rate_hz
        spec.option.integrator = {"rk4": mujoco.mjtIntegrator.mjINT_RK4,
                                  "euler": mujoco.mjtIntegrator.mjINT_EULER}[integrator]
        spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        self.spec = spec
        self.m = spec.compile()
        self.d = mujoco.MjData(self.m)
        self.rate_hz = float(rate_hz)
        self.bandwidth_hz = float(bandwidth_hz)
        self.joint_names = self.cad.joint_names
        jid = [mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in self.joint_names]
        if min(jid) < 0:
            raise ModelError("an arm joint is missing from the MuJoCo model")
        self._qadr = np.array([self.m.jnt_qposadr[i] for i in jid])
        self._dadr = np.array([self.m.jnt_dofadr[i] for i in jid])
        self._base_id = mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_BODY, self.cad.base_link)
        first = [b for b in range(self.m.nbody) if self.m.body_parentid[b] == self._base_id and b != self._base_id]
        self._arm_roots = first

    @staticmethod
    def _set_inertial(body, dyn10) -> None:
        mass, ipos, iquat, ev = dyn_to_mujoco(dyn10)
        body.mass, body.ipos, body.iquat, body.inertia = mass, ipos, iquat, ev
        body.fullinertia = np.full(6, np.nan)       # the URDF import sets the full tensor
        body.explicitinertial = True

    # -------------------------------------------------------------- truth
    def true_parameters(self, model: FloatingBaseModel) -> np.ndarray:
        """True parameters in `model`'s layout: the base (and payload) read back from the
        compiled MuJoCo model, the arm bodies from the URDF (MuJoCo simulates the same)."""
        theta = model.nominal.copy()
        theta[model.body_slice(model.base_name)] = mujoco_body_dyn(self.m, self._base_id)
        if model.payload_name is not None:
            if self.payload_frame is None:
                theta[model.body_slice(model.payload_name)] = 0.0
            else:
                if model.payload_frame != self.payload_frame:
                    raise ModelError(f"model's payload frame {model.payload_frame!r} differs from the "
                                     f"simulator's {self.payload_frame!r}")
                pid = mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_BODY, "payload")
                theta[model.body_slice(model.payload_name)] = mujoco_body_dyn(self.m, pid)
        return theta

    def _reduced_inertia_diag(self) -> np.ndarray:
        M = np.zeros((self.m.nv, self.m.nv))
        if hasattr(self.d, "qM"):       # MuJoCo 3: mj_fullM(m, dst, qM)
            mujoco.mj_fullM(self.m, M, self.d.qM)
        else:                           # MuJoCo 4: mj_fullM(m, d, dst)
            mujoco.mj_fullM(self.m, self.d, M)
        b = np.arange(6)
        a = self._dadr
        Hs = M[np.ix_(a, a)] - M[np.ix_(a, b)] @ np.linalg.solve(M[np.ix_(b, b)], M[np.ix_(b, a)])
        return np.diag(Hs).copy()

    # ----------------------------------------------------------------- run
    def run(self, joint: str | Sequence[str], q0: np.ndarray, delta: float | Sequence[float] = 0.5,
            duration: float = 8.0, hold: float = 0.5, record_hz: float = 50.0, noise: float = 0.0,
            seed: int = 0) -> SpaceRun:
        """Drive `joint` (or several at once) through a rest-to-rest motion of `delta` rad in
        `duration` s from rest at `q0`, the others held; record `hold` s more."""
        joints = (joint,) if isinstance(joint, str) else tuple(joint)
        for j in joints:
            if j not in self.joint_names:
                raise ModelError(f"joint {j!r} is not an arm joint ({', '.join(self.joint_names)})")
        deltas = np.broadcast_to(np.asarray(delta, float), (len(joints),))
        drive = np.array([self.joint_names.index(j) for j in joints])
        q0 = np.asarray(q0, float)
        m, d = self.m, self.d
        mujoco.mj_resetData(m, d)
        d.qpos[self._qadr] = q0
        mujoco.mj_forward(m, d)
        diag = self._reduced_inertia_diag()
        wn = 2 * np.pi * self.bandwidth_hz
        kp, kd = diag * wn ** 2, 2.0 * diag * wn
        h = 1.0 / self.rate_hz
        n_steps = int(round((duration + hold) * self.rate_hz))
        every = max(1, int(round(self.rate_hz / record_hz)))
        rec_t, rec_q, rec_qd, rec_tw, p_tot, L_tot, p_arm, L_arm = ([] for _ in range(8))
        n = len(self.joint_names)
        for k in range(n_steps + 1):
            t = k * h
            if k % every == 0:
                rec_t.append(t)
                rec_q.append(d.qpos[self._qadr].copy())
                rec_qd.append(d.qvel[self._dadr].copy())
                R = d.xmat[self._base_id].reshape(3, 3)
                rec_tw.append(np.concatenate([R.T @ d.qvel[0:3], d.qvel[3:6]]))
                self._momentum(p_tot, L_tot, p_arm, L_arm)
            if k == n_steps:
                break
            q_des = q0.copy()
            qd_des = np.zeros(n)
            for i, dl in zip(drive, deltas):
                s, ds, _ = rest_to_rest(np.array([t]), duration, dl)
                q_des[i] += s[0]
                qd_des[i] = ds[0]
            tau = kp * (q_des - d.qpos[self._qadr]) + kd * (qd_des - d.qvel[self._dadr])
            d.qfrc_applied[:] = 0.0
            d.qfrc_applied[self._dadr] = tau
            mujoco.mj_step(m, d)
        t = np.array(rec_t)
        q, qd, tw = np.array(rec_q), np.array(rec_qd), np.array(rec_tw)
        if not np.isfinite(q).all():
            raise ModelError("the space robot simulation diverged")
        true = MomentumExperiment(t, q, qd, tw, joints, meta={"source": "SpaceRobotSim", "noise": 0.0})
        rng = np.random.default_rng(seed)
        rms = lambda x: float(np.sqrt(np.mean(x ** 2)))  # noqa: E731
        std = {"base_linear": noise * rms(tw[:, :3]), "base_angular": noise * rms(tw[:, 3:]),
               "joint_rate": noise * np.sqrt(np.mean(qd ** 2, axis=0))}
        tw_m = tw.copy()
        tw_m[:, :3] += rng.normal(0, 1, tw[:, :3].shape) * std["base_linear"]
        tw_m[:, 3:] += rng.normal(0, 1, tw[:, 3:].shape) * std["base_angular"]
        qd_m = qd + rng.normal(0, 1, qd.shape) * std["joint_rate"]
        measured = MomentumExperiment(t, q.copy(), qd_m, tw_m, joints,
                                      meta={"source": "SpaceRobotSim", "noise": noise, "noise_std": std})
        return SpaceRun(measured, true, np.array(p_tot), np.array(L_tot), np.array(p_arm), np.array(L_arm), std)

    def _momentum(self, p_tot, L_tot, p_arm, L_arm) -> None:
        m, d = self.m, self.d
        mujoco.mj_subtreeVel(m, d)
        b = self._base_id
        c_sys = d.subtree_com[b]
        p_tot.append(m.body_subtreemass[b] * d.subtree_linvel[b])
        L_tot.append(d.subtree_angmom[b].copy())
        pa, La = np.zeros(3), np.zeros(3)
        for r in self._arm_roots:
            p = m.body_subtreemass[r] * d.subtree_linvel[r]
            pa += p
            La += d.subtree_angmom[r] + np.cross(d.subtree_com[r] - c_sys, p)
        p_arm.append(pa)
        L_arm.append(La)


# ------------------------------------------------------------------------ demo
@dataclass(frozen=True)
class SpaceDemoSetup:
    """What `robot-ident demo --robot space` varies; defaults are the README figures.

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
