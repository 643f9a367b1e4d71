"""A simulated arm in MuJoCo: the ground truth identification is judged against.

MuJoCo is an engine independent of Pinocchio. The arm is built from the same URDF
(visual and collision geometry dropped, since MuJoCo cannot resolve ``package://``
meshes and contacts play no part), with chosen per-joint armature, Coulomb friction
(MuJoCo ``frictionloss``), viscous friction (``damping``) and a constant offset
added to the *measured* effort (a current-sensor bias). Joints that are not
identified are removed, which welds their child links at the joint's zero position.

Coupled transmissions (`model.transmission`): each motor of a coupled group is a
MuJoCo ``fixed`` tendon whose coefficients are its row of the coupling matrix, so its
armature, damping and frictionloss act on the motor velocity ``M qd`` and reach the
joints through ``M.T`` -- the motor-side model, simulated by MuJoCo itself. The truth
arrays then hold motor values at the group's joint positions, and the offset is a
motor-torque bias (``M.T off`` on the joints).

Control: a 1 kHz loop (by default) of feed-forward from the nominal (CAD) model plus
a PD on position and velocity, gains set from each joint's effective inertia in the nominal
mass matrix at the desired pose (scheduled along the trajectory) for a chosen closed-loop
bandwidth. By default the PD acts on
the drive's own state (noise-free) and noise is added to the logged signals
(`SimNoise.controller_sees_noise`). The physics runs at a finer step (`substeps` per control
period, semi-implicit Euler with explicit damping), by default as fine as the arm's damping
over its inertia needs (`stable_substeps`): the xArm7's last joint, 2 N*m*s/rad of URDF
damping on 1.3e-4 kg*m^2 without a rotor, diverged within 4 ms at two substeps.

The recording holds the *measured* signals: positions and velocities with Gaussian
noise, efforts equal to the commanded effort plus the offset plus Gaussian noise
whose standard deviation is a fraction of each joint's effort RMS (or absolute).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Callable, Sequence

import mujoco
import numpy as np

from ..data.signals import Recording
from ..errors import ModelError
from ..model.robot import RobotModel
from ..model.transmission import Transmission


@dataclass(frozen=True)
class JointTruth:
    """True actuator-side parameters per identified joint (arrays in joint order)."""

    armature: np.ndarray
    coulomb: np.ndarray
    viscous: np.ndarray
    offset: np.ndarray

    @classmethod
    def zeros(cls, n: int) -> "JointTruth":
        z = np.zeros(n)
        return cls(z, z, z, z)

    def values(self) -> dict[str, np.ndarray]:
        return {"Ia": self.armature, "Fc": self.coulomb, "Fv": self.viscous, "off": self.offset}


@dataclass(frozen=True)
class SimNoise:
    position_std: float = 1e-5        # rad or m (a 19-bit encoder is ~1.2e-5 rad)
    velocity_std: float = 1e-3        # rad/s or m/s
    effort_rel_std: float = 0.01      # fraction of each joint's effort RMS
    effort_abs_std: np.ndarray | None = None   # overrides effort_rel_std when given, per joint
    seed: int = 0
    # False: the drive's loop uses its own (noise-free) state estimate and the noise is
    # added to the logged signals only. True: the PD acts on the noisy signals, which
    # injects white torque that no model of the filtered states can predict.
    controller_sees_noise: bool = False


@dataclass
class SimulationResult:
    recording: Recording           # measured (noisy) signals
    effort_true: np.ndarray        # commanded effort actually applied, (N, n)
    q_true: np.ndarray
    qd_true: np.ndarray
    effort_noise_std: np.ndarray   # (n,)
    tau_external: np.ndarray | None = None   # (N, n) joint torques of the external force (its truth)


@dataclass(frozen=True)
class ExternalForce:
    """A force pushing on a link's centre of mass from `start` to `end` (s), in the world
    frame (N): a contact, for the monitor's truth (MuJoCo ``xfrc_applied``)."""

    link: str
    force: tuple
    start: float
    end: float


def mujoco_ready_urdf(urdf_xml: str) -> str:
    """URDF text with visuals and collisions removed and MuJoCo compiler hints added."""
    root = ET.fromstring(urdf_xml)
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for el in link.findall(tag):
                link.remove(el)
    for el in root.findall("mujoco"):
        root.remove(el)
    mj = ET.Element("mujoco")
    ET.SubElement(mj, "compiler", discardvisual="true", fusestatic="false", balanceinertia="false")
    root.insert(0, mj)
    return ET.tostring(root, encoding="unicode")


def set_simulation_options(spec, control_rate_hz: float, substeps: int) -> None:
    """Physics step of control period / substeps, semi-implicit Euler with explicit damping
    (so the damping force is b * v at the step's start, as the model writes it), no contacts."""
    spec.option.timestep = 1.0 / (control_rate_hz * substeps)
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(
        mujoco.mjtDisableBit.mjDSBL_EULERDAMP)


MIN_SUBSTEPS = 2
MAX_SUBSTEPS = 1000


def stable_substeps(m, d, control_rate_hz: float, poses: int = 16, seed: int = 0) -> int:
    """Physics steps per control period for which the explicit damping stays stable: the step
    h must keep h * lambda below 1 (explicit Euler diverges at 2), lambda the largest
    generalised eigenvalue of (damping, mass matrix) -- joint and tendon damping over the
    inertia they act on, rotors included -- over `poses` random poses within the joint
    ranges. At least MIN_SUBSTEPS; more than MAX_SUBSTEPS is an error naming the joint."""
    from scipy.linalg import eigh
    rng = np.random.default_rng(seed)
    lo = np.where(m.jnt_limited, m.jnt_range[:, 0], -np.pi)
    hi = np.where(m.jnt_limited, m.jnt_range[:, 1], np.pi)
    worst, dof = 0.0, 0
    M = np.zeros((m.nv, m.nv))
    for _ in range(poses):
        d.qpos[m.jnt_qposadr] = rng.uniform(lo, hi)
        mujoco.mj_forward(m, d)
        _full_mass_matrix(m, d, M)
        D = np.diag(np.asarray(m.dof_damping, float).reshape(m.nv, -1)[:, 0])
        if m.ntendon:
            J = _tendon_jacobian(m, d)
            D += J.T @ np.diag(np.asarray(m.tendon_damping, float).reshape(m.ntendon, -1)[:, 0]) @ J
        w, v = eigh(D, M)
        if w[-1] > worst:
            worst, dof = float(w[-1]), int(np.argmax(np.abs(v[:, -1])))
    mujoco.mj_resetData(m, d)
    n = max(MIN_SUBSTEPS, int(np.ceil(worst / control_rate_hz)))
    if n > MAX_SUBSTEPS:
        joint = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, int(m.dof_jntid[dof]))
        raise ModelError(f"joint {joint!r}: its damping over its inertia ({worst:.3g} 1/s) needs more than "
                         f"{MAX_SUBSTEPS} physics steps per control period; give it an armature (a rotor) in the "
                         "simulation: section, or less damping")
    return n


def _tendon_jacobian(m, d) -> np.ndarray:
    """(ntendon, nv) tendon Jacobian: dense in MuJoCo 3, sparse rows in MuJoCo 4."""
    flat = np.asarray(d.ten_J, float).ravel()
    if flat.size == m.ntendon * m.nv and not hasattr(m, "ten_J_rownnz"):
        return flat.reshape(m.ntendon, m.nv)
    J = np.zeros((m.ntendon, m.nv))
    for t in range(m.ntendon):
        a, k = int(m.ten_J_rowadr[t]), int(m.ten_J_rownnz[t])
        J[t, np.asarray(m.ten_J_colind[a:a + k], int)] = flat[a:a + k]
    return J


def _full_mass_matrix(m, d, out: np.ndarray) -> None:
    """mj_fullM: MuJoCo 4 takes (m, d, dst); MuJoCo 3 (m, dst, d.qM)."""
    if hasattr(d, "qM"):
        mujoco.mj_fullM(m, out, d.qM)
    else:
        mujoco.mj_fullM(m, d, out)


def _set_scalar_or_first(element, attr: str, value: float) -> None:
    """MuJoCo 3 stores joint damping as a scalar, MuJoCo 4 as polynomial coefficients
    whose first entry is the linear (viscous) one."""
    current = getattr(element, attr)
    if np.ndim(current) == 0:
        setattr(element, attr, value)
    else:
        arr = np.zeros(np.shape(current))
        arr[0] = value
        setattr(element, attr, arr)


BADQACC = int(mujoco.mjtWarning.mjWARN_BADQACC)
MAX_TRACKING_ERROR = 0.1     # rad or m: the simulated controller tracks the demo arm to 0.006


class SimulatedArm:
    """MuJoCo arm that follows trajectories and returns noisy recordings."""

    def __init__(self, urdf: str, joint_names: Sequence[str], truth: JointTruth,
                 control_rate_hz: float = 1000.0, substeps: int | None = None, bandwidth_hz: float = 8.0,
                 nominal: RobotModel | None = None, transmission: Transmission | None = None,
                 spec_hook: Callable | None = None):
        self.joint_names = tuple(joint_names)
        self.transmission = (Transmission.identity(self.joint_names) if transmission is None
                             else transmission.for_joints(self.joint_names))
        self.truth = truth
        self.control_rate_hz = float(control_rate_hz)
        self.substeps = int(substeps or MIN_SUBSTEPS)
        # The truth model (for parameters) and the controller's nominal model.
        self.truth_model = RobotModel(urdf, self.joint_names)
        self.nominal = nominal or self.truth_model
        n = len(self.joint_names)
        for label, arr in truth.values().items():
            if np.shape(arr) != (n,):
                raise ModelError(f"simulated joint truth {label!r} must have {n} entries")

        spec = mujoco.MjSpec.from_string(mujoco_ready_urdf(self.truth_model.urdf_xml))
        removed = {j.name for j in spec.joints if j.name not in self.joint_names}
        # Equalities (URDF <mimic> becomes one) that refer to a removed joint go with it.
        for eq in list(spec.equalities):
            if eq.type == mujoco.mjtEq.mjEQ_JOINT and ({eq.name1, eq.name2} & removed):
                spec.delete(eq)
        for j in list(spec.joints):
            if j.name in removed:
                spec.delete(j)
        by_name = {j.name: j for j in spec.joints}
        tr = self.transmission
        coupled = {j for g in tr.groups for j in g.joints}
        for k, name in enumerate(self.joint_names):
            if name in coupled:
                # The motor of this position is a tendon over its group's joints.
                ten = spec.add_tendon()
                ten.name = f"motor_{tr.motors[k]}"
                for i, jn in enumerate(self.joint_names):
                    if tr.motor_from_joint[k, i] != 0.0:
                        ten.wrap_joint(jn, float(tr.motor_from_joint[k, i]))
                ten.armature = float(truth.armature[k])
                _set_scalar_or_first(ten, "damping", float(truth.viscous[k]))
                ten.frictionloss = float(truth.coulomb[k])
            j = by_name[name]
            own = name not in coupled      # a coupled joint's friction is all on its motors
            j.armature = float(truth.armature[k]) if own else 0.0
            _set_scalar_or_first(j, "damping", float(truth.viscous[k]) if own else 0.0)
            j.frictionloss = float(truth.coulomb[k]) if own else 0.0
        set_simulation_options(spec, self.control_rate_hz, self.substeps)
        if spec_hook is not None:       # e.g. sim/balancer.py: spring tendons between links
            spec_hook(spec)
        self.mj_model = spec.compile()
        self.mj_data = mujoco.MjData(self.mj_model)
        if substeps is None:
            self.substeps = stable_substeps(self.mj_model, self.mj_data, self.control_rate_hz)
            self.mj_model.opt.timestep = 1.0 / (self.control_rate_hz * self.substeps)
        jid = [mujoco.mj_name2id(self.mj_model, mujoco.mjtObj.mjOBJ_JOINT, nm) for nm in self.joint_names]
        self._qadr = np.array([self.mj_model.jnt_qposadr[i] for i in jid])
        self._dadr = np.array([self.mj_model.jnt_dofadr[i] for i in jid])
        self.bandwidth_hz = bandwidth_hz

    def true_parameters(self, model: RobotModel) -> np.ndarray:
        """The simulator's true standard parameters in `model`'s layout."""
        if model.layout.body_joints != self.truth_model.layout.body_joints:
            raise ModelError("the model's bodies differ from the simulated arm's")
        theta = np.zeros(model.layout.size)
        theta[: model.layout.n_inertial] = self.truth_model.nominal[: self.truth_model.layout.n_inertial]
        values = self.truth.values()
        for k, j in enumerate(self.transmission.motors):
            for s in model.layout.actuator_symbols:
                theta[model.layout.index(f"{j}.{s}")] = values[s][k]
        return theta

    def _gains(self, q0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """PD gains for the desired pose(s) `q0` ((n,) or (N, n)): each joint's effective inertia
        there, 1 / (M^-1)_ii of the nominal mass matrix with the rotors, times wn^2 and 2 wn.
        Scheduled along the trajectory and from the effective inertia, not the diagonal M_ii at
        the start pose: M_ii overstates what a joint moves when others are coupled to it (the
        Panda's joints 1 and 3 near alignment: 30 x; the UR10's base joint, folded after starting
        stretched: 29 x), and the 1 kHz derivative loop went unstable. With these gains the
        loop's fastest mode is at most n x 2 wn (M^-1 K_d has a unit diagonal, so its
        eigenvalues sum to n): 2 wn T n < 2 for the default 8 Hz and 1 kHz up to 19 joints."""
        import pinocchio as pin
        nm = self.nominal
        T = self.transmission.motor_from_joint
        rotor = T.T @ np.diag(self.truth.armature) @ T
        q0 = np.asarray(q0, dtype=float)
        poses = np.atleast_2d(q0)
        eff = np.empty(poses.shape)
        for k, q in enumerate(poses):
            M = pin.crba(nm.model, nm.data, nm.to_pinocchio_q(q))
            M = np.triu(M) + np.triu(M, 1).T          # crba fills the upper triangle
            eff[k] = 1.0 / np.diag(np.linalg.inv(M[np.ix_(nm._idx_v, nm._idx_v)] + rotor))
        eff = eff.reshape(q0.shape)
        wn = 2 * np.pi * self.bandwidth_hz
        return eff * wn ** 2, 2.0 * eff * wn

    def run(self, trajectory, duration: float | None = None, noise: SimNoise | None = None,
            progress: Callable[[float], None] | None = None, external: ExternalForce | None = None
            ) -> SimulationResult:
        """Follow `trajectory` (anything with `sample(t)` and `duration`) from its start state;
        `external`: a force on a link during part of it (the controller is not told)."""
        noise = noise or SimNoise()
        duration = float(trajectory.duration if duration is None else duration)
        if list(getattr(trajectory, "joint_names", self.joint_names)) != list(self.joint_names):
            raise ModelError(f"trajectory joints {trajectory.joint_names} differ from the arm's {self.joint_names}")
        h = 1.0 / self.control_rate_hz
        N = int(round(duration * self.control_rate_hz)) + 1
        t = np.arange(N) * h
        q_des, qd_des, qdd_des = trajectory.sample(t)
        nominal_theta = self.nominal.nominal
        ff = self.nominal.efforts(q_des, qd_des, qdd_des, nominal_theta)
        kp, kd = self._gains(q_des)
        rng = np.random.default_rng(noise.seed)
        n = len(self.joint_names)
        nq_noise = rng.normal(0.0, noise.position_std, size=(N, n))
        nqd_noise = rng.normal(0.0, noise.velocity_std, size=(N, n))

        m, d = self.mj_model, self.mj_data
        mujoco.mj_resetData(m, d)
        d.qpos[self._qadr] = q_des[0]
        d.qvel[self._dadr] = qd_des[0]
        mujoco.mj_forward(m, d)
        q_true = np.empty((N, n))
        qd_true = np.empty((N, n))
        tau = np.empty((N, n))
        report_every = max(1, N // 20)
        push = self._external(external)
        tau_ext = np.zeros((N, n)) if push is not None else None
        for k in range(N):
            q_true[k] = d.qpos[self._qadr]
            qd_true[k] = d.qvel[self._dadr]
            qm, qdm = q_true[k], qd_true[k]
            if noise.controller_sees_noise:
                qm, qdm = qm + nq_noise[k], qdm + nqd_noise[k]
            tau[k] = ff[k] + kp[k] * (q_des[k] - qm) + kd[k] * (qd_des[k] - qdm)
            d.qfrc_applied[self._dadr] = tau[k]
            if push is not None:
                tau_ext[k] = push(t[k])
            for _ in range(self.substeps):
                mujoco.mj_step(m, d)
            if d.warning[BADQACC].number:      # MuJoCo resets the state and carries on: a bag of nonsense
                raise ModelError(f"the simulation is unstable at t = {t[k]:.4g} s (MuJoCo: NaN, Inf or huge "
                                 "accelerations); nothing is written. Check the URDF's inertias (a link far "
                                 "lighter than its limits suggest?) and the trajectory's accelerations")
            if progress is not None and k % report_every == 0:
                progress(k / N)
        if not np.isfinite(q_true).all():
            raise ModelError("the simulation diverged (non-finite joint positions)")
        err = np.abs(q_true - q_des)
        if err.max() > MAX_TRACKING_ERROR:
            k, j = np.unravel_index(int(np.argmax(err)), err.shape)
            raise ModelError(f"the simulated arm does not follow the trajectory: joint {self.joint_names[j]!r} is "
                             f"{err[k, j]:.3g} rad (m) off at t = {t[k]:.4g} s (at most {MAX_TRACKING_ERROR:g} is "
                             "plausible); nothing is written. The efforts the trajectory needs may exceed what the "
                             "simulated controller gives this arm (light links, high accelerations)")
        if noise.effort_abs_std is not None:
            std = np.broadcast_to(np.asarray(noise.effort_abs_std, float), (n,)).copy()
        else:
            std = noise.effort_rel_std * np.sqrt(np.mean(tau ** 2, axis=0))
        effort_meas = tau + self.transmission.joint_efforts(self.truth.offset) + rng.normal(size=(N, n)) * std
        rec = Recording(t, self.joint_names, q_true + nq_noise, effort_meas, qd=qd_true + nqd_noise,
                        meta={"source": "robot_ident.sim.SimulatedArm", "effort_noise_std": std.tolist()})
        if progress is not None:
            progress(1.0)
        return SimulationResult(rec, tau, q_true, qd_true, std, tau_ext)

    def _external(self, external: ExternalForce | None):
        """A function of t that sets the force (or clears it) and returns its joint torques."""
        if external is None:
            return None
        m, d = self.mj_model, self.mj_data
        body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, external.link)
        if body < 0:
            raise ModelError(f"external force: no link {external.link!r} in the simulated arm")
        force = np.asarray(external.force, float)

        def push(t: float) -> np.ndarray:
            on = external.start <= t < external.end
            d.xfrc_applied[body] = np.concatenate([force, np.zeros(3)]) if on else 0.0
            if not on:
                return np.zeros(len(self._dadr))
            qfrc = np.zeros(m.nv)
            mujoco.mj_applyFT(m, d, force, np.zeros(3), d.xipos[body].copy(), body, qfrc)
            return qfrc[self._dadr]
        return push
