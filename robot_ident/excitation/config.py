"""Excitation keys of the ROS 2 parameter file shared by the nodes and the CLI.

    robot_ident:
      ros__parameters:
        joints: [panda_joint1, ...]
        excitation:
          family: fourier            # fourier | modified_fourier | polynomial7 | joint_moves
          optimizer: slsqp           # slsqp | ga | pso | qga
          criterion: cond            # cond | logdet
          harmonics: 5
          base_frequency: 0.6283185307179586   # rad/s
          duration: 10.0             # polynomial7 only [s]
          move_duration: 2.0         # joint_moves only [s per move]
          margins: {position: 0.05, velocity: 0.05, acceleration: 0.05, effort: 0.1}
          acceleration_limits: {panda_joint1: 15.0, ...}   # rad/s^2 (or m/s^2), every joint
          effort_limits: false       # true: also keep nominal efforts within URDF effort limits
          start_pose: {panda_joint1: 0.0, ...}             # or a list in joint order
          position_limits: {joint_1: [-3.14, 3.14], ...}   # the design's range per joint, within the URDF's
                                     # (default: the URDF's; a continuous joint: +-pi around its start pose)
          joint_weights: {panda_joint1: 1.0, ...}
          max_time: 30.0             # optimiser wall-time budget [s]
          max_evaluations: 0         # 0: no evaluation budget
          seed: 0
          collision: {margin: 0.03, floor: 0.0, boxes: [], srdf: null, package_dirs: []}
                                     # see excitation/collision/spec.py

``acceleration_limits`` may also sit directly under ``ros__parameters`` (shared with
other consumers); the one under ``excitation`` wins. This module reads only these
keys; the actuator part of the same file is read by ``robot_ident.io.config``.
Every error names the offending key.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import yaml

from .. import defaults
from ..errors import ConfigError
from ..util.config_keys import check_keys
from ..util.yaml_strict import safe_load_strict, yaml_error_line
from .collision.spec import CollisionSpec, parse_collision_section
from .constraints import Margins
from .criteria import CRITERIA
from .designer import FAMILIES, DesignSpec
from .optimizers import OPTIMIZERS

_KEYS = {"family", "optimizer", "criterion", "harmonics", "base_frequency", "duration", "move_duration",
         "margins", "acceleration_limits", "effort_limits", "start_pose", "joint_weights", "max_time",
         "max_evaluations", "seed", "samples", "constraint_points", "check_dt", "point_rate", "collision",
         "position_limits"}
_MARGIN_KEYS = {"position", "velocity", "acceleration", "effort"}


@dataclass(frozen=True)
class ExcitationConfig:
    joints: tuple[str, ...] | None
    spec_kwargs: dict
    margins: Margins
    acceleration_limits: dict[str, float]
    start_pose: Any                   # dict by joint, list in joint order, or None
    joint_weights: Any
    effort_limits: bool
    collision: CollisionSpec = field(default_factory=CollisionSpec)
    position_limits: dict = field(default_factory=dict)     # joint -> (lower, upper) of the design

    def design_spec(self, joints: Sequence[str], **overrides) -> DesignSpec:
        """The DesignSpec for these joints (start pose and weights put in joint order)."""
        kw = dict(self.spec_kwargs)
        unknown = sorted(set(self.position_limits) - set(joints))
        if unknown:
            raise ConfigError(f"excitation.position_limits: joint(s) {', '.join(unknown)} are not designed "
                              f"({', '.join(joints)})")
        if self.position_limits:
            kw["position_limits"] = tuple(self.position_limits.get(j) for j in joints)
        kw["start_pose"] = _per_joint(self.start_pose, joints, "excitation.start_pose")
        kw["joint_weights"] = _per_joint(self.joint_weights, joints, "excitation.joint_weights")
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return DesignSpec(**kw)


def _per_joint(value, joints, key):
    if value is None:
        return None
    if isinstance(value, Mapping):
        missing = [j for j in joints if j not in value]
        if missing:
            raise ConfigError(f"{key}: no value for joint(s) {', '.join(missing)}")
        return tuple(float(value[j]) for j in joints)
    if len(value) != len(joints):
        raise ConfigError(f"{key}: list has {len(value)} entries, expected one per joint ({len(joints)})")
    return tuple(float(v) for v in value)


def _number(d, key, where, positive=True, integer=False, default=None):
    if key not in d or d[key] is None:
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{where}.{key} must be a number, got {v!r}")
    if integer and (not float(v).is_integer()):
        raise ConfigError(f"{where}.{key} must be an integer, got {v!r}")
    if not math.isfinite(v) or (positive and v <= 0):
        raise ConfigError(f"{where}.{key} must be a positive number, got {v!r}")
    return int(v) if integer else float(v)


def _choice(d, key, where, choices, default):
    v = d.get(key, default)
    if v is None:
        return default
    if v not in choices:
        raise ConfigError(f"{where}.{key} must be one of {', '.join(choices)}, got {v!r}")
    return v


def _float_map(v, where) -> dict[str, float]:
    if not isinstance(v, Mapping):
        raise ConfigError(f"{where} must be a mapping joint -> value, got {type(v).__name__}")
    out = {}
    for j, x in v.items():
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
            raise ConfigError(f"{where}.{j} must be a positive number, got {x!r}")
        out[str(j)] = float(x)
    return out


def _merge(base: Mapping, over: Mapping) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def parse_excitation_config(doc: Mapping, node: str = "robot_ident", base_dir: str | None = None) -> ExcitationConfig:
    """Read the excitation keys of the ``node`` section (or the only section), merged over
    the ``/**`` section; nested or dotted keys (as ROS 2 flattens them) both work."""
    from ..io.config import check_top_level_keys, unflatten

    if not isinstance(doc, Mapping) or not doc:
        raise ConfigError("config: expected a ROS 2 parameter file (<node_name>: {ros__parameters: {...}})")
    sections = {}
    for name, body in doc.items():
        if not isinstance(body, Mapping) or not isinstance(body.get("ros__parameters") or {}, Mapping):
            raise ConfigError(f"config: {name}: expected a 'ros__parameters' mapping under the node name")
        sections[str(name)] = unflatten(body.get("ros__parameters") or {})
    wild = sections.pop("/**", {})
    if node not in sections:
        if len(sections) == 1:
            node = next(iter(sections))
        elif not sections and wild:
            node = "/**"
        else:
            raise ConfigError(f"config: no section for node {node!r}; sections: {', '.join(doc)}")
    params = _merge(wild, sections.get(node, {}))
    where0 = f"{node}.ros__parameters"
    # a misspelt section ("excitaton:") would leave every excitation key at its default, silently
    check_top_level_keys(params, lambda k, msg: ConfigError(f"{k}: {msg}"), lambda *parts: ".".join((where0, *parts)))
    joints = params.get("joints")
    if joints is not None:
        if not (isinstance(joints, list) and joints and all(isinstance(j, str) for j in joints)):
            raise ConfigError(f"{where0}.joints must be a non-empty list of joint names")
        joints = tuple(joints)
    ex = params.get("excitation") or {}
    where = f"{where0}.excitation"
    if not isinstance(ex, Mapping):
        raise ConfigError(f"{where} must be a mapping")
    check_keys(ex, _KEYS, where)
    kw = {
        "family": _choice(ex, "family", where, FAMILIES, defaults.FAMILY),
        "optimizer": _choice(ex, "optimizer", where, tuple(OPTIMIZERS), defaults.OPTIMIZER),
        "criterion": _choice(ex, "criterion", where, CRITERIA, defaults.CRITERION),
        "harmonics": _number(ex, "harmonics", where, integer=True, default=5),
        "base_frequency": _number(ex, "base_frequency", where, default=0.2 * math.pi),
        "duration": _number(ex, "duration", where, default=10.0),
        "move_duration": _number(ex, "move_duration", where, default=2.0),
        "max_time": _number(ex, "max_time", where, default=defaults.MAX_TIME_S),
        "seed": _number(ex, "seed", where, positive=False, integer=True, default=defaults.SEED),
        "n_samples": _number(ex, "samples", where, integer=True, default=100),
        "n_constraint": _number(ex, "constraint_points", where, integer=True, default=100),
        "check_dt": _number(ex, "check_dt", where, default=1e-3),
        "point_rate": _number(ex, "point_rate", where, default=100.0),
    }
    me = _number(ex, "max_evaluations", where, positive=False, integer=True, default=0)
    kw["max_evals"] = me if me and me > 0 else None
    m = ex.get("margins") or {}
    if not isinstance(m, Mapping):
        raise ConfigError(f"{where}.margins must be a mapping")
    check_keys(m, _MARGIN_KEYS, f"{where}.margins")
    mk = {k: _number(m, k, f"{where}.margins", positive=False) for k in m}
    for k, v in mk.items():
        if v < 0 or (k != "position" and v >= 1):
            raise ConfigError(f"{where}.margins.{k} must be >= 0" + ("" if k == "position" else " and < 1")
                              + f", got {v!r}")
    margins = Margins(**mk)
    acc = ex.get("acceleration_limits", params.get("acceleration_limits"))
    acc_where = f"{where}.acceleration_limits" if "acceleration_limits" in ex else f"{where0}.acceleration_limits"
    acc = _float_map(acc, acc_where) if acc is not None else {}
    eff = ex.get("effort_limits", False)
    if not isinstance(eff, bool):
        raise ConfigError(f"{where}.effort_limits must be true or false, got {eff!r}")
    start = ex.get("start_pose")
    if start is not None and not isinstance(start, (Mapping, list)):
        raise ConfigError(f"{where}.start_pose must be a mapping joint -> position or a list")
    if isinstance(start, Mapping):
        for j, v in start.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ConfigError(f"{where}.start_pose.{j} must be a number, got {v!r}")
    weights = ex.get("joint_weights")
    if weights is not None:
        weights = _float_map(weights, f"{where}.joint_weights") if isinstance(weights, Mapping) else weights
    collision = parse_collision_section(ex.get("collision"), f"{where}.collision", base_dir)
    return ExcitationConfig(joints, kw, margins, acc, start, weights, eff, collision,
                            _position_limits(ex.get("position_limits"), f"{where}.position_limits"))


def _position_limits(d, where) -> dict:
    """{joint: (lower, upper)} of ``excitation.position_limits`` (absent: {})."""
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise ConfigError(f"{where} must be a mapping joint -> [lower, upper]")
    out = {}
    for j, r in d.items():
        if not (isinstance(r, (list, tuple)) and len(r) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in r)
                and r[0] < r[1]):
            raise ConfigError(f"{where}.{j} must be [lower, upper] with lower < upper (rad or m), got {r!r}")
        out[str(j)] = (float(r[0]), float(r[1]))
    return out


def load_excitation_config(path: str | os.PathLike, node: str = "robot_ident") -> ExcitationConfig:
    try:
        with open(os.fspath(path), encoding="utf-8") as fh:
            doc = safe_load_strict(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {yaml_error_line(exc)}") from exc
    try:
        return parse_excitation_config(doc, node, os.path.dirname(os.path.abspath(os.fspath(path))))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
