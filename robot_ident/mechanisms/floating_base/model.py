"""Pinocchio model of a free-floating base and its arm, and its momentum regressor (see
the package docstring for the formulation)."""
from __future__ import annotations

import math
import os
from typing import Sequence

import numpy as np
import pinocchio as pin

from ...errors import ModelError
from ...model.robot import INERTIAL_SYMBOLS, _parse_urdf_joints, read_urdf_text


def _dual_action(M: pin.SE3) -> np.ndarray:
    """6x6 matrix mapping a force (linear; angular) in frame B to frame A, M = aMb."""
    R, p = M.rotation, M.translation
    px = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
    X = np.zeros((6, 6))
    X[:3, :3] = R
    X[3:, 3:] = R
    X[3:, :3] = px @ R
    return X


def _momentum_block(v: np.ndarray) -> np.ndarray:
    """6x10 matrix Y with I v = Y @ theta for one body (v = [lin; ang] in the body frame)."""
    return pin.bodyRegressor(pin.Motion.Zero(), pin.Motion(np.asarray(v, float)))


class FloatingBaseModel:
    """Pinocchio model of a free-floating base (the URDF root link) and its arm.

    Bodies, in order: the base (the free-flyer joint, named `base_name`, with every link
    rigidly attached to the root link), one body per arm joint in Pinocchio's tree order,
    then the payload (if `payload_frame` is given) attached rigidly to that frame.
    Parameter names are ``<body>.<symbol>``, e.g. ``base.Izz``, ``elbow_pitch.m``,
    ``payload.mx``; each body's parameters are about its joint frame (the payload's about
    `payload_frame`).
    """

    def __init__(self, urdf: str | os.PathLike, base_name: str = "base",
                 payload_frame: str | None = None, payload_name: str = "payload"):
        self.urdf_xml, self.urdf_label = read_urdf_text(urdf)
        urdf_joints = _parse_urdf_joints(self.urdf_xml, self.urdf_label)
        if base_name in urdf_joints:
            raise ModelError(f"base name {base_name!r} is already a joint of URDF {self.urdf_label}")
        try:
            model = pin.buildModelFromXML(self.urdf_xml, pin.JointModelFreeFlyer())
        except Exception as exc:  # noqa: BLE001 - ValueError/RuntimeError depending on version
            raise ModelError(f"Pinocchio cannot build a model from URDF {self.urdf_label}: {exc}") from exc
        model.names[1] = base_name
        for f in model.frames:
            if f.parentJoint == 1 and f.name == "root_joint":
                f.name = base_name
        for j in range(2, model.njoints):
            if model.joints[j].nv != 1:
                raise ModelError(f"joint {model.names[j]!r} has {model.joints[j].nv} DOF; "
                                 "only 1-DOF arm joints are supported")
        self.model = model
        self.data = model.createData()
        self.base_name = base_name
        self.base_link = self._root_link()
        self.joint_names: tuple[str, ...] = tuple(model.names[j] for j in range(2, model.njoints))
        self.n = len(self.joint_names)
        if self.n < 1:
            raise ModelError(f"URDF {self.urdf_label} has no arm joint")
        self._is_unbounded = np.array([model.joints[j].nq == 2 for j in range(2, model.njoints)])
        self._idx_q = np.array([model.joints[j].idx_q for j in range(2, model.njoints)])
        self._idx_v = np.array([model.joints[j].idx_v for j in range(2, model.njoints)])

        self.payload_name = payload_name if payload_frame is not None else None
        self.payload_frame = payload_frame
        self._payload_fid = None
        if payload_frame is not None:
            if payload_name in (base_name, *self.joint_names):
                raise ModelError(f"payload name {payload_name!r} clashes with a body name")
            if not model.existFrame(payload_frame):
                raise ModelError(f"payload frame {payload_frame!r} is not a frame of URDF {self.urdf_label}")
            self._payload_fid = int(model.getFrameId(payload_frame))
        self.bodies: tuple[str, ...] = (base_name, *self.joint_names) + (
            (payload_name,) if payload_frame is not None else ())
        self.names: tuple[str, ...] = tuple(f"{b}.{s}" for b in self.bodies for s in INERTIAL_SYMBOLS)
        self.nominal = np.zeros(len(self.names))
        for k in range(1, model.njoints):
            self.nominal[10 * (k - 1): 10 * k] = model.inertias[k].toDynamicParameters()

    # ----------------------------------------------------------------- layout
    def _root_link(self) -> str:
        for f in self.model.frames:
            if f.type == pin.FrameType.BODY and f.parentJoint == 1:
                return f.name
        return self.base_name

    @property
    def n_params(self) -> int:
        return len(self.names)

    def body_slice(self, body: str) -> slice:
        try:
            k = self.bodies.index(body)
        except ValueError:
            raise KeyError(f"no body named {body!r}; bodies: {', '.join(self.bodies)}") from None
        return slice(10 * k, 10 * k + 10)

    def columns(self, bodies: Sequence[str]) -> np.ndarray:
        return np.concatenate([np.arange(10 * self.bodies.index(b), 10 * self.bodies.index(b) + 10)
                               for b in bodies]) if bodies else np.zeros(0, int)

    # ------------------------------------------------------------- kinematics
    def pin_state(self, q_arm, qd_arm, base_twist, base_pose: pin.SE3 | None = None):
        """Pinocchio (q, v) from joint angles, joint rates and the base twist
        ``[v; omega]`` in base coordinates (linear velocity of the base frame origin)."""
        q = pin.neutral(self.model)
        if base_pose is not None:
            q[:7] = pin.SE3ToXYZQUAT(base_pose)
        for k in range(self.n):
            i = self._idx_q[k]
            if self._is_unbounded[k]:
                q[i], q[i + 1] = math.cos(q_arm[k]), math.sin(q_arm[k])
            else:
                q[i] = q_arm[k]
        v = np.zeros(self.model.nv)
        v[:6] = base_twist
        v[self._idx_v] = qd_arm
        return q, v

    def momentum_regressor_pin(self, q: np.ndarray, v: np.ndarray, frame: str = "base",
                               point: np.ndarray | None = None) -> np.ndarray:
        """(6, n_params) regressor of the total momentum [linear; angular].

        frame="base": base coordinates, angular momentum about the base frame origin
        (`point` must be None). frame="world": world coordinates, angular momentum about
        `point` (world coordinates, default the world origin)."""
        m, d = self.model, self.data
        pin.forwardKinematics(m, d, q, v)
        if frame == "base":
            if point is not None:
                raise ValueError("point is only used with frame='world'")
            ref_inv = d.oMi[1].inverse()
        elif frame == "world":
            ref_inv = pin.SE3(np.eye(3), -np.asarray(point if point is not None else np.zeros(3), float))
        else:
            raise ValueError(f"frame must be 'base' or 'world', got {frame!r}")
        Y = np.zeros((6, self.n_params))
        for k in range(1, m.njoints):
            Y[:, 10 * (k - 1): 10 * k] = _dual_action(ref_inv * d.oMi[k]) @ _momentum_block(d.v[k].vector)
        if self._payload_fid is not None:
            fid = self._payload_fid
            fr = m.frames[fid]
            oMf = d.oMi[fr.parentJoint] * fr.placement
            vf = fr.placement.actInv(d.v[fr.parentJoint]).vector
            Y[:, -10:] = _dual_action(ref_inv * oMf) @ _momentum_block(vf)
        return Y

    def momentum_regressor(self, q_arm, qd_arm, base_twist) -> np.ndarray:
        """(N, 6, n_params) base-frame momentum regressors for N measured samples."""
        q_arm = np.atleast_2d(np.asarray(q_arm, float))
        qd_arm = np.atleast_2d(np.asarray(qd_arm, float))
        base_twist = np.atleast_2d(np.asarray(base_twist, float))
        N = q_arm.shape[0]
        if q_arm.shape != (N, self.n) or qd_arm.shape != (N, self.n) or base_twist.shape != (N, 6):
            raise ValueError(f"expected q_arm, qd_arm of shape (N, {self.n}) and base_twist (N, 6); got "
                             f"{q_arm.shape}, {qd_arm.shape}, {base_twist.shape}")
        out = np.empty((N, 6, self.n_params))
        for s in range(N):
            q, v = self.pin_state(q_arm[s], qd_arm[s], base_twist[s])
            out[s] = self.momentum_regressor_pin(q, v, "base")
        return out

    def base_twist_at_rest_momentum(self, q_arm, qd_arm, theta: np.ndarray) -> np.ndarray:
        """The base twist [v; omega] (base frame) that makes the total momentum zero for
        the given joint angles and rates and parameters theta (the reaction of the base)."""
        q, v0 = self.pin_state(q_arm, qd_arm, np.zeros(6))
        Y0 = self.momentum_regressor_pin(q, v0) @ theta
        # momentum is linear in the base twist: h = H_b twist + h_arm
        H = np.empty((6, 6))
        for c in range(6):
            e = np.zeros(6)
            e[c] = 1.0
            q, v = self.pin_state(q_arm, np.zeros(self.n), e)
            H[:, c] = self.momentum_regressor_pin(q, v) @ theta
        return -np.linalg.solve(H, Y0)
