"""The free-floating space robot in MuJoCo (gravity off, torque-driven joints, RK4 at
1 kHz): the ground truth of the momentum-conservation identification and its demo."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import mujoco
import numpy as np
import pinocchio as pin

from ..errors import ModelError
from ..mechanisms.floating_base import (
    FloatingBaseModel,
    MomentumExperiment,
    rest_to_rest,
)
from ..util.resources import share_file
from .mujoco_arm import _set_scalar_or_first, mujoco_ready_urdf

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
