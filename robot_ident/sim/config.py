"""The `simulation:` section of the parameter file: how the simulated arm differs from
the URDF and how noisy its sensors are.

    simulation:
      effort_noise: 0.01        # effort noise std, fraction of each joint's effort RMS
      position_noise: 1.0e-5    # rad or m
      velocity_noise: 1.0e-3    # rad/s or m/s
      current_noise: 0.0        # A, added to the recorded currents
      seed: 0
      joints:                   # per joint; missing values: URDF <dynamics>, zero offset, armature from
                                #   the effort limit (DEFAULT_ARMATURE_PER_EFFORT) where the model has one
        joint1: {armature: 0.4, coulomb: 3.0, viscous: 2.0, offset: 0.1}
      payload: {mass: 0.8, com: [0.0, 0.1, 0.0]}   # added to the last body (the CAD lacks it)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..errors import ConfigError
from ..model.robot import RobotModel
from ..util.config_keys import check_keys
from .mujoco_arm import JointTruth, SimNoise

# A joint's armature when the section does not give one: a geared drive's rotor reflected to
# the joint, about 1e-3 kg*m^2 per N*m of its URDF effort limit (kg per N on a screw), within
# ARMATURE_RANGE. URDFs leave the rotors out; without them a light wrist (the xArm7's joint7:
# 1.3e-4 kg*m^2 of link under 1 N*m of URDF Coulomb friction) cannot follow any trajectory
# with gains for its own inertia (bench/zoo.py). Only where the model identifies the armature
# (identification.model.armature): a truth the model cannot hold would be a fault, not a default.
DEFAULT_ARMATURE_PER_EFFORT = 1e-3
ARMATURE_RANGE = (0.005, 0.5)

_KEYS = {"effort_noise", "position_noise", "velocity_noise", "current_noise", "seed", "joints", "payload"}
_JOINT_KEYS = {"armature", "coulomb", "viscous", "offset"}
_PAYLOAD_KEYS = {"mass", "com"}


@dataclass(frozen=True)
class SimulationConfig:
    truth: JointTruth
    noise: SimNoise
    current_noise: float
    payload_mass: float
    payload_com: tuple

    def truth_parameters(self, cad: RobotModel) -> np.ndarray:
        """The simulated arm's standard parameters: the CAD's, with the payload (a point-like
        mass at `payload_com` of the last body's frame) added to the last body."""
        import pinocchio as pin
        theta = cad.nominal.copy()
        if self.payload_mass > 0:
            last = cad.layout.body_joints[-1]
            payload = pin.Inertia(self.payload_mass, np.array(self.payload_com), np.eye(3) * 1e-4 * self.payload_mass)
            theta[cad.layout.inertial_slice(last)] = (cad.body_inertia(theta, last) + payload).toDynamicParameters()
        return theta


def _number(d, key, where, default, nonneg=True):
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}.{key}: expected a number, got {v!r}")
    if nonneg and v < 0:
        raise ConfigError(f"{where}.{key}: must be >= 0, got {v!r}")
    return float(v)


def default_armature(effort_limit: float) -> float:
    """The simulated armature of a joint whose section gives none (see DEFAULT_ARMATURE_PER_EFFORT);
    a joint without an effort limit in the URDF gets the range's low end."""
    e = float(effort_limit) if np.isfinite(effort_limit) and effort_limit > 0 else 0.0
    return float(np.clip(DEFAULT_ARMATURE_PER_EFFORT * e, *ARMATURE_RANGE))


def simulation_config(section: Mapping | None, model: RobotModel, where: str = "simulation") -> SimulationConfig:
    s = dict(section or {})
    check_keys(s, _KEYS, where)
    joints = s.get("joints") or {}
    if not isinstance(joints, Mapping):
        raise ConfigError(f"{where}.joints: expected a mapping of joint names")
    units = model.layout.actuator_joints      # joints, or the motors of coupled groups
    for j in joints:
        if j not in units:
            raise ConfigError(f"{where}.joints.{j}: not an identified joint or motor ({', '.join(units)})")
    n = model.n
    vals = {k: np.zeros(n) for k in _JOINT_KEYS}
    for k, j in enumerate(units):
        entry = joints.get(j) or {}
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}.joints.{j}: expected a mapping")
        check_keys(entry, _JOINT_KEYS, f"{where}.joints.{j}")
        symbols = model.layout.actuator_symbols
        nominal = {"coulomb": model.nominal[model.layout.index(f"{j}.Fc")] if "Fc" in symbols else 0.0,
                   "viscous": model.nominal[model.layout.index(f"{j}.Fv")] if "Fv" in symbols else 0.0,
                   "armature": default_armature(model.limits.effort[k]) if "Ia" in symbols else 0.0}
        for key in _JOINT_KEYS:
            vals[key][k] = _number(entry, key, f"{where}.joints.{j}", nominal.get(key, 0.0), nonneg=key != "offset")
    payload = s.get("payload") or {}
    if not isinstance(payload, Mapping):
        raise ConfigError(f"{where}.payload: expected a mapping with mass and com")
    check_keys(payload, _PAYLOAD_KEYS, f"{where}.payload")
    com = payload.get("com", [0.0, 0.0, 0.0])
    if not (isinstance(com, (list, tuple)) and len(com) == 3
            and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in com)):
        raise ConfigError(f"{where}.payload.com: expected three numbers, got {com!r}")
    noise = SimNoise(position_std=_number(s, "position_noise", where, 1e-5),
                     velocity_std=_number(s, "velocity_noise", where, 1e-3),
                     effort_rel_std=_number(s, "effort_noise", where, 0.01),
                     seed=int(_number(s, "seed", where, 0)))
    truth = JointTruth(vals["armature"], vals["coulomb"], vals["viscous"], vals["offset"])
    return SimulationConfig(truth, noise, _number(s, "current_noise", where, 0.0),
                            _number(payload, "mass", f"{where}.payload", 0.0), tuple(float(c) for c in com))
