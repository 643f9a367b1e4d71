"""The rigid-body model of the arm, restricted to the identified joints.

`RobotModel` loads a URDF with Pinocchio, locks every joint that is not identified
(at a reference position), and owns the *standard parameter layout*:

* 10 inertial parameters per moving body, in Pinocchio's order and about the
  body's joint frame: ``m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz``
  (``mx = m * cx``; note ``Iyy`` before ``Ixz``). A body is a joint of the reduced
  model together with every link rigidly attached to it (locked joints included).
* then, joint by joint in the identified order, the enabled actuator parameters:
  ``Ia`` armature (rotor inertia reflected to the joint), ``Fc`` Coulomb friction,
  ``Fv`` viscous friction, ``off`` constant effort offset.
  With a coupled transmission (`transmission.Transmission`), a coupled group's
  actuator parameters belong to its motors (``<motor>.Fc``), in motor coordinates,
  and reach the joints through the transpose of the coupling matrix.

Parameter names are ``<joint>.<symbol>``, e.g. ``elbow.Izz`` or ``wrist_1.Fc``.
The layout is named, never implied by position: switching a block off removes its
names and columns, and every consumer looks parameters up by name.

Coulomb friction model
----------------------
``tau_c = Fc * tanh(qd / v_s)`` with ``v_s = FrictionOptions.coulomb_velocity_scale``
(default 0.01 rad/s or m/s). Unlike ``sign(qd)`` it is continuous, so velocity noise
around zero does not make the predicted effort jump between +Fc and -Fc; for
``|qd| > 3 v_s`` it is within 0.5 % of ``Fc * sign(qd)``. Samples slower than the
friction dead band should still be masked before identification because no smooth
model describes stiction (see ``signals.ProcessedData.moving_mask``).

Stacked regressors are sample-major: rows ``[s0 j0 .. s0 j(n-1), s1 j0, ...]``.
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pinocchio as pin

from ..errors import ModelError
from .pin_batch import joint_torque_regressors
from .transmission import Transmission
from .urdf_joints import check_mimics, mimic_and_leaders, mimic_joints, rename_locked_link_clashes
from .urdf_text import read_urdf_text

INERTIAL_SYMBOLS = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
ACTUATOR_SYMBOLS = ("Ia", "Fc", "Fv", "off")
_SUPPORTED_JOINT_TYPES = ("revolute", "continuous", "prismatic")


@dataclass(frozen=True)
class FrictionOptions:
    """Which per-joint actuator blocks are part of the model, and the Coulomb smoothing."""

    armature: bool = True
    coulomb: bool = True
    viscous: bool = True
    offset: bool = True
    coulomb_velocity_scale: float = 0.01

    def __post_init__(self):
        if not (self.coulomb_velocity_scale > 0 and math.isfinite(self.coulomb_velocity_scale)):
            raise ModelError(
                f"coulomb_velocity_scale must be a positive number, got {self.coulomb_velocity_scale!r}")

    @property
    def enabled_symbols(self) -> tuple[str, ...]:
        flags = (self.armature, self.coulomb, self.viscous, self.offset)
        return tuple(s for s, on in zip(ACTUATOR_SYMBOLS, flags) if on)


@dataclass(frozen=True)
class ParameterLayout:
    """Names of the standard parameter vector, and where each block lives."""

    names: tuple[str, ...]
    body_joints: tuple[str, ...]          # one moving body per reduced-model joint, tree order
    actuator_joints: tuple[str, ...]      # identified joints, user order (motor names in coupled groups)
    actuator_symbols: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def n_inertial(self) -> int:
        return 10 * len(self.body_joints)

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no parameter named {name!r} in the layout") from None

    @property
    def _index(self) -> dict[str, int]:
        cache = self.__dict__.get("_index_cache")
        if cache is None:
            cache = {n: i for i, n in enumerate(self.names)}
            object.__setattr__(self, "_index_cache", cache)
        return cache

    def inertial_slice(self, body_joint: str) -> slice:
        k = self.body_joints.index(body_joint)
        return slice(10 * k, 10 * k + 10)


@dataclass(frozen=True)
class JointLimits:
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


def _parse_urdf_joints(xml: str, label: str) -> dict[str, ET.Element]:
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ModelError(f"URDF {label} is not valid XML: {exc}") from exc
    if root.tag != "robot":
        raise ModelError(f"URDF {label}: root element is <{root.tag}>, expected <robot>")
    return {j.get("name"): j for j in root.findall("joint")}


_BLOCK = 4096      # samples per block of `RobotModel.regressor`'s Pinocchio calls


def actuator_columns(qd: np.ndarray, qdd: np.ndarray, symbols: Sequence[str],
                     coulomb_velocity_scale: float) -> np.ndarray:
    """(N, n, n * len(symbols)) regressor columns of the per-joint actuator terms, joint-major:
    Ia -> qdd, Fc -> tanh(qd / v_s), Fv -> qd, off -> 1 (only in the joint's own row)."""
    N, n = qd.shape
    ns = len(symbols)
    out = np.zeros((N, n, n * ns))
    rows = np.arange(n)
    for s_i, s in enumerate(symbols):        # one assignment per symbol: joint k's column in row k
        if s == "Ia":
            value = qdd
        elif s == "Fc":
            value = np.tanh(qd / coulomb_velocity_scale)
        elif s == "Fv":
            value = qd
        elif s == "off":
            value = 1.0
        else:
            raise ModelError(f"unknown actuator parameter symbol {s!r}")
        out[:, rows, rows * ns + s_i] = value
    return out


class RobotModel:
    """Pinocchio model of the identified joints, with the named standard parameter layout."""

    def __init__(self, urdf: str | os.PathLike, joints: Sequence[str] | None = None,
                 locked_positions: Mapping[str, float] | None = None,
                 friction: FrictionOptions | None = None,
                 armature: Mapping[str, float] | None = None,
                 transmission: Transmission | None = None):
        self.urdf_xml, self.urdf_label = read_urdf_text(urdf)
        self.friction = friction or FrictionOptions()
        urdf_joints = _parse_urdf_joints(self.urdf_xml, self.urdf_label)
        try:
            full = pin.buildModelFromXML(self.urdf_xml)
        except Exception as exc:  # pinocchio raises ValueError/RuntimeError depending on version
            raise ModelError(f"Pinocchio cannot build a model from URDF {self.urdf_label}: {exc}") from exc

        movable = [full.names[i] for i in range(1, full.njoints)]
        self.mimics = mimic_joints(urdf_joints)
        if joints is None:      # a mimic joint and its leader are not independent: both locked
            joints = [j for j in movable if j not in mimic_and_leaders(self.mimics)]
        joints = list(joints)
        check_mimics(joints, self.mimics, self.urdf_label)
        if not joints:
            raise ModelError("no joints to identify were given")
        if len(set(joints)) != len(joints):
            dup = sorted({j for j in joints if joints.count(j) > 1})
            raise ModelError(f"joint(s) listed twice: {', '.join(dup)}")
        for name in joints:
            if name not in movable:
                raise ModelError(
                    f"joint {name!r} is not a movable joint of URDF {self.urdf_label}; "
                    f"movable joints: {', '.join(movable)}")
            jtype = urdf_joints[name].get("type")
            if jtype not in _SUPPORTED_JOINT_TYPES:
                raise ModelError(f"joint {name!r} has type {jtype!r}; identified joints must be "
                                 f"one of {', '.join(_SUPPORTED_JOINT_TYPES)}")

        for name in movable:
            jtype = urdf_joints[name].get("type") if name in urdf_joints else None
            if name not in joints and jtype in ("floating", "planar"):
                parent = urdf_joints[name].find("parent")
                child = urdf_joints[name].find("child")
                raise ModelError(
                    f"URDF {self.urdf_label}: joint {name!r} ({jtype}) lets link "
                    f"{child.get('link') if child is not None else '?'!r} move freely on "
                    f"{parent.get('link') if parent is not None else '?'!r}; this identifies an arm on a fixed "
                    f"base and would silently fix it. Remove the {jtype} joint (a fixed base), or identify a "
                    "free-floating robot with robot_ident.mechanisms.floating_base (docs/user-guide.md: "
                    "free-floating space robots)")

        locked_positions = dict(locked_positions or {})
        for name in locked_positions:
            if name not in movable:
                raise ModelError(f"locked joint {name!r} is not a movable joint of URDF {self.urdf_label}")
            if name in joints:
                raise ModelError(f"joint {name!r} is both identified and locked")
        q_ref = pin.neutral(full)
        for name, value in locked_positions.items():
            jid = full.getJointId(name)
            if full.joints[jid].nq != 1:
                raise ModelError(f"locked joint {name!r}: only 1-DOF joints can be given a lock position")
            q_ref[full.joints[jid].idx_q] = float(value)
        for name, (leader, mult, off) in self.mimics.items():   # a locked mimic joint follows its locked leader
            if name in movable and leader in movable and name not in locked_positions:
                lead = full.joints[full.getJointId(leader)]
                if lead.nq == 1:
                    q_ref[full.joints[full.getJointId(name)].idx_q] = mult * q_ref[lead.idx_q] + off
        locked = [n for n in movable if n not in joints]
        full, q_ref, pin_name = rename_locked_link_clashes(self.urdf_xml, full, q_ref, locked)
        lock_ids = [full.getJointId(pin_name.get(n, n)) for n in locked]
        self.model = pin.buildReducedModel(full, lock_ids, q_ref) if lock_ids else full
        self.data = self.model.createData()
        self.joint_names: tuple[str, ...] = tuple(joints)
        self.n = len(joints)
        self.locked_positions = locked_positions

        # Map user joint order <-> Pinocchio tree order.
        tree_names = [self.model.names[i] for i in range(1, self.model.njoints)]
        self._jid = [int(self.model.getJointId(n)) for n in joints]
        self._idx_v = np.array([self.model.joints[j].idx_v for j in self._jid])
        self._idx_q = np.array([self.model.joints[j].idx_q for j in self._jid])
        self._is_unbounded = np.array([self.model.joints[j].nq == 2 for j in self._jid])
        self._rows_identity = (self.model.nv == len(self._idx_v)
                               and bool((self._idx_v == np.arange(self.model.nv)).all()))
        for j in self._jid:
            if self.model.joints[j].nv != 1:
                raise ModelError(f"joint {self.model.names[j]!r} has {self.model.joints[j].nv} DOF; "
                                 "only 1-DOF joints can be identified")
        self._prismatic = np.array([urdf_joints[n].get("type") == "prismatic" for n in joints])

        # Actuator units: the joint itself, or the motor at its place in a coupled group.
        self.transmission = (Transmission.identity(joints) if transmission is None
                             else transmission.for_joints(joints))
        units = self.transmission.motors
        clash = sorted(set(units) & set(tree_names) - set(joints))
        if clash:
            raise ModelError(f"motor name(s) {', '.join(clash)} are also joint names of URDF {self.urdf_label}")
        names = [f"{b}.{s}" for b in tree_names for s in INERTIAL_SYMBOLS]
        names += [f"{u}.{s}" for u in units for s in self.friction.enabled_symbols]
        self.layout = ParameterLayout(tuple(names), tuple(tree_names), tuple(units),
                                      self.friction.enabled_symbols)
        self.limits = self._read_limits()
        self.nominal = self._nominal_parameters(urdf_joints, dict(armature or {}))

    # ------------------------------------------------------------------ info
    @property
    def n_params(self) -> int:
        return self.layout.size

    def is_prismatic(self, joint: str) -> bool:
        return bool(self._prismatic[self.joint_names.index(joint)])

    def _read_limits(self) -> JointLimits:
        m = self.model
        lo = np.array([m.lowerPositionLimit[i] for i in self._idx_q], dtype=float)
        hi = np.array([m.upperPositionLimit[i] for i in self._idx_q], dtype=float)
        lo[self._is_unbounded] = -np.inf
        hi[self._is_unbounded] = np.inf
        vel_attr = m.velocityLimit if hasattr(m, "velocityLimit") else m.upperVelocityLimit
        eff_attr = m.effortLimit if hasattr(m, "effortLimit") else m.upperEffortLimit
        vel = np.array([vel_attr[i] for i in self._idx_v], dtype=float)
        eff = np.array([eff_attr[i] for i in self._idx_v], dtype=float)
        return JointLimits(lo, hi, vel, eff)

    def _nominal_parameters(self, urdf_joints: dict, armature: dict) -> np.ndarray:
        theta = np.zeros(self.layout.size)
        for k in range(1, self.model.njoints):
            theta[10 * (k - 1): 10 * k] = self.model.inertias[k].toDynamicParameters()
        units = self.layout.actuator_joints
        coupled = {m for g in self.transmission.groups for m in g.motors}
        for name in armature:
            if name not in units:
                raise ModelError(f"armature given for joint {name!r}, which is not identified "
                                 f"(actuators: {', '.join(units)})")
        for j in units:
            # Motors of a coupled group have no URDF <dynamics>: friction starts at zero.
            dyn = urdf_joints[j].find("dynamics") if j not in coupled else None
            values = {
                "Ia": float(armature.get(j, 0.0)),
                "Fc": float(dyn.get("friction", 0.0)) if dyn is not None else 0.0,
                "Fv": float(dyn.get("damping", 0.0)) if dyn is not None else 0.0,
                "off": 0.0,
            }
            for s in self.layout.actuator_symbols:
                theta[self.layout.index(f"{j}.{s}")] = values[s]
        return theta

    @property
    def continuous_joints(self) -> tuple[str, ...]:
        """The identified joints without position limits (URDF ``continuous``)."""
        return tuple(j for j, u in zip(self.joint_names, self._is_unbounded) if u)

    # ------------------------------------------------------------- kinematics
    def to_pinocchio_q(self, q: np.ndarray) -> np.ndarray:
        """Joint positions in identified order (angles for continuous joints) -> Pinocchio q."""
        return self._pin_q(np.asarray(q, dtype=float)[None, :])[0]

    def _pin_q(self, q: np.ndarray) -> np.ndarray:
        """(N, nq) Pinocchio configurations of N samples of identified-order positions:
        continuous joints as (cos, sin), joints outside the identified set at neutral."""
        Q = np.tile(pin.neutral(self.model), (q.shape[0], 1))
        ub = self._is_unbounded
        Q[:, self._idx_q[~ub]] = q[:, ~ub]
        if ub.any():
            Q[:, self._idx_q[ub]] = np.cos(q[:, ub])
            Q[:, self._idx_q[ub] + 1] = np.sin(q[:, ub])
        return Q

    def _pin_states(self, q, qd, qdd):
        """(N, nq), (N, nv), (N, nv) Pinocchio states of N samples at once, so that the
        per-sample loops around Pinocchio only call it."""
        V = np.zeros((q.shape[0], self.model.nv))
        A = np.zeros((q.shape[0], self.model.nv))
        V[:, self._idx_v] = qd
        A[:, self._idx_v] = qdd
        return self._pin_q(q), V, A

    @staticmethod
    def _as_samples(x, n: int, label: str) -> np.ndarray:
        a = np.asarray(x, dtype=float)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2 or a.shape[1] != n:
            raise ValueError(f"{label} must have shape (N, {n}) or ({n},), got {np.shape(x)}")
        return a

    def _check_states(self, q, qd, qdd):
        q = self._as_samples(q, self.n, "q")
        qd = self._as_samples(qd, self.n, "qd")
        qdd = self._as_samples(qdd, self.n, "qdd")
        if not (q.shape[0] == qd.shape[0] == qdd.shape[0]):
            raise ValueError(f"q, qd, qdd have different sample counts: {q.shape[0]}, "
                             f"{qd.shape[0]}, {qdd.shape[0]}")
        for arr, label in ((q, "q"), (qd, "qd"), (qdd, "qdd")):
            bad = ~np.isfinite(arr)
            if bad.any():
                s, j = np.argwhere(bad)[0]
                raise ValueError(f"{label} of joint {self.joint_names[j]!r} is not finite at sample {s}")
        return q, qd, qdd

    # -------------------------------------------------------------- dynamics
    def actuator_regressor(self, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """(N, n, n_actuator_params) columns for armature, Coulomb, viscous and offset.
        Coupled groups: the terms are evaluated at the motor velocities ``M qd`` and
        mapped to the joints by ``M.T`` (see `transmission`)."""
        tr = self.transmission
        if tr.is_identity:
            return actuator_columns(qd, qdd, self.layout.actuator_symbols, self.friction.coulomb_velocity_scale)
        cols = actuator_columns(tr.motor_velocities(qd), tr.motor_velocities(qdd), self.layout.actuator_symbols,
                                self.friction.coulomb_velocity_scale)
        return tr.joint_columns(cols)

    def regressor(self, q, qd, qdd) -> np.ndarray:
        """Stacked standard regressor, shape (N*n, n_params), sample-major rows."""
        q, qd, qdd = self._check_states(q, qd, qdd)
        N = q.shape[0]
        Y = np.empty((N, self.n, self.layout.size))
        ni = self.layout.n_inertial
        # Pinocchio's rows in the joints' order: written into Y itself, else through a buffer
        buf = None if self._rows_identity else np.empty((min(N, _BLOCK), self.model.nv, ni))
        for lo in range(0, N, _BLOCK):
            hi = min(N, lo + _BLOCK)
            joint_torque_regressors(self.model, self.data, *self._pin_states(q[lo:hi], qd[lo:hi], qdd[lo:hi]),
                                    Y[lo:hi, :, :ni] if buf is None else buf[:hi - lo])
            if buf is not None:
                Y[lo:hi, :, :ni] = buf[:hi - lo][:, self._idx_v]
        act = self.actuator_regressor(qd, qdd)
        Y[:, :, ni:ni + act.shape[2]] = act
        self._extra_columns(q, Y[:, :, ni + act.shape[2]:])
        return Y.reshape(N * self.n, self.layout.size)

    def _extra_columns(self, q, out: np.ndarray) -> None:
        """Columns after the actuator block (N, n, k): none for a plain arm (model/spring.py
        adds its springs' here)."""
        if out.shape[2]:
            raise ModelError(f"{out.shape[2]} parameter column(s) after the actuator block have no regressor")

    def efforts(self, q, qd, qdd, theta: np.ndarray | None = None) -> np.ndarray:
        """Joint efforts (N, n) predicted by the standard parameters theta (default: nominal)."""
        theta = self.nominal if theta is None else np.asarray(theta, dtype=float)
        if theta.shape != (self.layout.size,):
            raise ValueError(f"theta must have {self.layout.size} entries (layout), got {theta.shape}")
        Y = self.regressor(q, qd, qdd)
        return (Y @ theta).reshape(-1, self.n)

    def rnea(self, q, qd, qdd) -> np.ndarray:
        """Nominal rigid-body inverse dynamics from Pinocchio's RNEA (no actuator terms), (N, n)."""
        q, qd, qdd = self._check_states(q, qd, qdd)
        out = np.empty_like(q)
        m, d, rows = self.model, self.data, self._idx_v
        for s, (a, b, c) in enumerate(zip(*self._pin_states(q, qd, qdd))):
            out[s] = pin.rnea(m, d, a, b, c)[rows]
        return out

    def body_inertia(self, theta: np.ndarray, body_joint: str) -> pin.Inertia:
        """Pinocchio Inertia of one body from a standard parameter vector."""
        return pin.Inertia.FromDynamicParameters(np.asarray(theta)[self.layout.inertial_slice(body_joint)])

    def with_parameters(self, theta: np.ndarray) -> "pin.Model":
        """A copy of the reduced Pinocchio model whose body inertias are taken from theta."""
        m = self.model.copy()
        for k, b in enumerate(self.layout.body_joints, start=1):
            m.inertias[k] = self.body_inertia(theta, b)
        return m
