"""Coupled transmissions: motors that drive several joints through a coupling matrix.

On many industrial wrists one motor drives two or three joints (a differential or a
hollow-shaft wrist), so joint 6 turns when motor 5 turns. The relation is linear::

    qd_motor = M @ qd_joint          (M: ``motor_from_joint``, square, invertible)
    tau_joint = M.T @ tau_motor      (power balance: tau_motor . qd_motor = tau_joint . qd_joint)

Here *motor* means the motor's gearbox output (the gear ratio, torque constant and
efficiency stay in the per-channel `Actuator`), so ``M`` holds the coupling only,
e.g. ``[[1, 0], [-1, 1]]`` for a wrist where motor 6 must counter-rotate when joint 5
turns. A config may give the inverse map instead (``joint_from_motor`` = ``M^-1``,
``qd_joint = C @ qd_motor``).

Armature, friction and the current-sensor offset are properties of the motor, so a
coupled group's actuator parameters live in motor coordinates: motor k's armature
``Ia`` multiplies ``qdd_motor[k]``, its Coulomb friction ``tanh(qd_motor[k] / v_s)``,
and the resulting motor torques reach the joints through ``M.T``. A joint not in any
group is its own motor (``M`` is the identity there), which gives back the per-joint
model exactly.

Currents: motor k of a group reads its current from the channel of the group's k-th
joint (``joints: [j5, j6]`` -> motor 1 on j5's channel, motor 2 on j6's). The
channel's `Actuator` turns the current into the motor's output torque, and ``M.T``
turns the motor torques into joint efforts.

`Transmission` is the whole map for an ordered joint list: an (n, n) block matrix
``M`` and the name of the motor at each position (the joint's own name when
uncoupled). Parameter names of a coupled group use the motor names
(``wrist_m5.Fc``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from ..util.config_keys import check_keys

_GROUP_KEYS = ("joints", "motors", "motor_from_joint", "joint_from_motor")


@dataclass(frozen=True)
class CoupledGroup:
    """Motors driving `joints` through ``qd_motor = motor_from_joint @ qd_joint``."""

    name: str
    joints: tuple[str, ...]
    motors: tuple[str, ...]
    motor_from_joint: np.ndarray

    def __post_init__(self):
        n = len(self.joints)
        where = f"transmission {self.name!r}"
        if n < 2:
            raise ConfigError(f"{where}: a coupled group needs at least two joints, got {list(self.joints)}")
        if len(set(self.joints)) != n:
            raise ConfigError(f"{where}: a joint is listed twice in {list(self.joints)}")
        if len(self.motors) != n or len(set(self.motors)) != n:
            raise ConfigError(f"{where}: needs {n} distinct motor names (one per joint), got {list(self.motors)}")
        M = np.asarray(self.motor_from_joint, dtype=float)
        if M.shape != (n, n):
            raise ConfigError(f"{where}: coupling matrix must be {n}x{n} (joints {', '.join(self.joints)}), "
                              f"got shape {M.shape}")
        if not np.isfinite(M).all():
            raise ConfigError(f"{where}: coupling matrix has non-finite entries")
        cond = np.linalg.cond(M)
        if not math.isfinite(cond) or cond > 1e8:
            raise ConfigError(f"{where}: coupling matrix is singular (condition number {cond:.3g}); "
                              "every joint velocity must follow from the motor velocities")
        M = M.copy()
        M.setflags(write=False)
        object.__setattr__(self, "motor_from_joint", M)
        object.__setattr__(self, "joints", tuple(self.joints))
        object.__setattr__(self, "motors", tuple(self.motors))

    @classmethod
    def from_dict(cls, name: str, entry: Mapping) -> "CoupledGroup":
        """``{joints: [j5, j6], motors: [m5, m6], motor_from_joint: [[1, 0], [-1, 1]]}``
        (or ``joint_from_motor``; a flat row-major list of K*K numbers is accepted too, as
        ROS 2 parameters cannot hold nested lists); motors default to ``<name>_m1 .. <name>_mK``."""
        where = f"transmission {name!r}"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: expected a mapping with joints and a coupling matrix, got {entry!r}")
        check_keys(entry, _GROUP_KEYS, str(name))      # the caller names the section (transmissions)
        joints = entry.get("joints")
        if not isinstance(joints, (list, tuple)) or not all(isinstance(j, str) and j for j in joints):
            raise ConfigError(f"{where}: 'joints' must be a list of joint names, got {joints!r}")
        motors = entry.get("motors") or [f"{name}_m{k + 1}" for k in range(len(joints))]
        if not isinstance(motors, (list, tuple)) or not all(isinstance(m, str) and m for m in motors):
            raise ConfigError(f"{where}: 'motors' must be a list of motor names, got {motors!r}")
        has_m, has_c = "motor_from_joint" in entry, "joint_from_motor" in entry
        if has_m == has_c:
            raise ConfigError(f"{where}: give exactly one of 'motor_from_joint' (qd_motor = M qd_joint) "
                              "or 'joint_from_motor' (qd_joint = C qd_motor)")
        key = "motor_from_joint" if has_m else "joint_from_motor"
        try:
            mat = np.array(entry[key], dtype=float)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: {key} must be a matrix of numbers (list of rows), "
                              f"got {entry[key]!r}") from None
        if mat.ndim == 1 and mat.size == len(joints) ** 2:
            # row-major flat list: ROS 2 parameters cannot hold nested lists
            mat = mat.reshape(len(joints), len(joints))
        if mat.ndim != 2 or mat.shape[0] != mat.shape[1] or mat.shape[0] != len(joints):
            raise ConfigError(f"{where}: {key} must be {len(joints)}x{len(joints)} "
                              f"(joints {', '.join(joints)}), got shape {mat.shape}")
        if has_c:
            cond = np.linalg.cond(mat) if np.isfinite(mat).all() else np.inf
            if not math.isfinite(cond) or cond > 1e8:
                raise ConfigError(f"{where}: joint_from_motor is singular (condition number {cond:.3g})")
            mat = np.linalg.inv(mat)
        return cls(str(name), tuple(joints), tuple(motors), mat)


class Transmission:
    """The motor <-> joint map of an ordered joint list (identity outside coupled groups)."""

    def __init__(self, joints: Sequence[str], groups: Sequence[CoupledGroup] = ()):
        self.joints = tuple(joints)
        self.groups = tuple(groups)
        n = len(self.joints)
        M = np.eye(n)
        motors = list(self.joints)
        seen: dict[str, str] = {}
        for g in self.groups:
            for j in g.joints:
                if j not in self.joints:
                    raise ConfigError(f"transmission {g.name!r}: joint {j!r} is not identified; "
                                      f"identified joints: {', '.join(self.joints)}")
                if j in seen:
                    raise ConfigError(f"joint {j!r} is in two transmissions ({seen[j]!r} and {g.name!r})")
                seen[j] = g.name
            idx = [self.joints.index(j) for j in g.joints]
            M[np.ix_(idx, idx)] = g.motor_from_joint
            for k, i in enumerate(idx):
                motors[i] = g.motors[k]
        clash = sorted({m for m in motors if motors.count(m) > 1})
        if clash:
            raise ConfigError(f"motor name(s) {', '.join(clash)} clash with a joint or another motor")
        self.motor_from_joint = M
        self.motor_from_joint.setflags(write=False)
        self.joint_from_motor = np.linalg.inv(M)
        self.motors = tuple(motors)

    # ------------------------------------------------------------ construction
    @classmethod
    def identity(cls, joints: Sequence[str]) -> "Transmission":
        return cls(joints, ())

    @classmethod
    def from_mapping(cls, joints: Sequence[str], entries: Mapping | None) -> "Transmission":
        """From the config's ``transmissions: {name: {joints, motors, motor_from_joint}}``."""
        if entries is None:
            entries = {}
        if not isinstance(entries, Mapping):
            raise ConfigError(f"transmissions must map group names to coupled groups, got {entries!r}")
        return cls(joints, [CoupledGroup.from_dict(str(k), v) for k, v in entries.items()])

    def for_joints(self, joints: Sequence[str]) -> "Transmission":
        """The same groups over `joints` (another order). A group must be wholly inside."""
        joints = tuple(joints)
        groups = []
        for g in self.groups:
            inside = [j in joints for j in g.joints]
            if any(inside) and not all(inside):
                missing = [j for j, ok in zip(g.joints, inside) if not ok]
                raise ConfigError(f"transmission {g.name!r} couples joint(s) {', '.join(missing)} which are "
                                  "not identified; a coupled group is identified as a whole")
            if all(inside):
                groups.append(g)
        return Transmission(joints, groups)

    # ------------------------------------------------------------------ access
    @property
    def is_identity(self) -> bool:
        return not self.groups

    @property
    def n(self) -> int:
        return len(self.joints)

    def as_dict(self) -> dict:
        return {g.name: {"joints": list(g.joints), "motors": list(g.motors),
                         "motor_from_joint": g.motor_from_joint.tolist()} for g in self.groups}

    def _check(self, x, label: str) -> np.ndarray:
        a = np.asarray(x, dtype=float)
        if a.shape[-1:] != (self.n,):
            raise ValueError(f"{label} must have {self.n} columns ({', '.join(self.joints)}), got shape {a.shape}")
        return a

    # --------------------------------------------------------------- the maps
    def motor_velocities(self, qd_joint) -> np.ndarray:
        """(..., n) joint velocities (or accelerations) -> motor ones, ``M @ qd``."""
        return self._check(qd_joint, "joint velocities") @ self.motor_from_joint.T

    def joint_velocities(self, qd_motor) -> np.ndarray:
        return self._check(qd_motor, "motor velocities") @ self.joint_from_motor.T

    def joint_efforts(self, tau_motor) -> np.ndarray:
        """(..., n) motor torques -> joint efforts, ``M.T @ tau_motor``."""
        return self._check(tau_motor, "motor torques") @ self.motor_from_joint

    def motor_torques(self, tau_joint) -> np.ndarray:
        """(..., n) joint efforts -> motor torques (inverse of `joint_efforts`)."""
        return self._check(tau_joint, "joint efforts") @ self.joint_from_motor

    def joint_columns(self, motor_columns: np.ndarray) -> np.ndarray:
        """(N, n, p) regressor columns whose row k is motor k's torque -> the same columns
        as joint efforts (row j = sum_k M[k, j] * row k)."""
        return np.einsum("kj,Nkp->Njp", self.motor_from_joint, motor_columns)


def motor_moving_mask(data, transmission: Transmission, threshold: float,
                      reversal_guard_s: float = 0.0) -> np.ndarray:
    """(N, n) True where a joint's row is outside every friction dead band that reaches it.

    Friction acts on motor velocities: a joint's effort holds motor k's Coulomb term
    whenever ``M[k, j] != 0``, so its row is dropped when any such motor is slow or near
    a reversal (`ProcessedData.moving_mask` applied to the motor velocities). Without
    coupling this is exactly ``data.moving_mask``."""
    from dataclasses import replace

    if transmission.is_identity:
        return data.moving_mask(threshold, reversal_guard_s)
    tr = transmission.for_joints(data.joint_names)
    motor = replace(data, qd=tr.motor_velocities(data.qd)).moving_mask(threshold, reversal_guard_s)
    reaches = tr.motor_from_joint != 0.0                      # (motor k, joint j)
    # joint j kept iff no motor k with reaches[k, j] is in its dead band
    return ~((~motor).astype(float) @ reaches.astype(float) > 0)


def dead_band_rows(model, data, threshold: float, reversal_guard_s: float = 0.0) -> np.ndarray:
    """(N, n) rows of `model` outside the friction dead band: `motor_moving_mask` with the
    model's transmission (models without one, e.g. closed chains: ``data.moving_mask``)."""
    tr = getattr(model, "transmission", None)
    if tr is None:
        return data.moving_mask(threshold, reversal_guard_s)
    return motor_moving_mask(data, tr, threshold, reversal_guard_s)


class Drive:
    """Currents -> joint efforts through the channel actuators and the coupling:
    ``effort = M.T @ actuator_effort(current)`` (and back). It offers the conversion
    methods of `actuation.ActuatorSet` (`for_joints`, `efforts`, `currents`, `apply`),
    so the bag reader, the torque node and the identification node take either."""

    def __init__(self, actuators, transmission: Transmission | None = None):
        self.actuators = actuators
        joints = actuators.joint_names
        self.transmission = (Transmission.identity(joints) if transmission is None
                             else transmission.for_joints(joints))

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.actuators.joint_names

    @property
    def is_direct(self) -> bool:
        return self.actuators.is_direct and self.transmission.is_identity

    def __iter__(self):
        return iter(self.actuators)

    def __len__(self) -> int:
        return len(self.actuators)

    def for_joints(self, joints: Sequence[str]) -> "Drive":
        return Drive(self.actuators.for_joints(joints), self.transmission.for_joints(joints))

    def efforts(self, current, joints: Sequence[str] | None = None) -> np.ndarray:
        """(N, n) joint efforts from (N, n) channel values, columns in `joints` order."""
        d = self if joints is None else self.for_joints(joints)
        return d.transmission.joint_efforts(d.actuators.efforts(current))

    def currents(self, effort, joints: Sequence[str] | None = None) -> np.ndarray:
        """(N, n) channel values producing (N, n) joint efforts (inverse of `efforts`)."""
        d = self if joints is None else self.for_joints(joints)
        return d.actuators.currents(d.transmission.motor_torques(effort))

    def apply(self, recording):
        """A `signals.Recording` holding channel values -> the same with joint efforts."""
        from dataclasses import replace as _replace

        eff = self.efforts(recording.effort, recording.joint_names)
        meta = dict(recording.meta)
        meta["effort_from"] = "direct" if self.for_joints(recording.joint_names).is_direct else "current"
        return _replace(recording, effort=eff, meta=meta)
