"""The configuration file: one ROS 2 parameter YAML for the nodes and the command line.

::

    robot_ident:                       # the node name; any single key, or /**
      ros__parameters:
        joints: [joint1, joint2]
        current_source: dynamic_joint_states   # or joint_states_effort, or effort
        current_interface: current             # interface read from DynamicJointState
        joint_states_topic: /joint_states      # optional
        current_topic: /dynamic_joint_states   # optional; default depends on current_source
        actuators:
          joint1: {type: rotary, torque_constant: 0.12, gear_ratio: 100.0, efficiency: 1.0,
                   direction: 1, current_offset: 0.0}
          joint2: {type: screw, torque_constant: 0.3, gear_ratio: 1.0, lead: 0.01,
                   efficiency: 0.9, direction: 1, current_offset: 0.0}
        sync: {rate_hz: 0.0, max_gap_s: 0.0, min_segment_s: 0.0}   # optional; 0 = automatic
        transmissions:           # optional: motors that drive several joints (model/transmission.py)
          wrist: {joints: [joint5, joint6], motors: [motor5, motor6],
                  motor_from_joint: [[1.0, 0.0], [-1.0, 1.0]]}   # qd_motor = M qd_joint
        excitation: {...}        # other sections belong to other modules and pass through

``current_source``:

* ``dynamic_joint_states``: motor currents from a control_msgs/DynamicJointState
  topic, interface ``current_interface``; converted by the actuators.
* ``joint_states_effort``: motor currents in the ``effort`` field of a JointState
  topic (``current_topic``, default ``/joint_states``); converted by the actuators.
* ``effort``: the JointState ``effort`` field already is the joint effort; actuators
  are optional and must be ``direct`` if given.

The file is parsed once into a frozen `IdentConfig`; every error names the file
and the key path (``file.yaml: robot_ident.ros__parameters.actuators.joint2.lead: ...``).
A file may hold several nodes' sections and a ``/**`` section; ``/**`` parameters
apply to every node and the node's own section overrides them, as in ROS 2.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import yaml

from ..data.sync import SyncOptions
from ..errors import ConfigError
from ..model.actuation import ActuatorSet
from ..model.transmission import Drive, Transmission
from ..util.config_keys import closest_key, unknown_key_hint
from ..util.yaml_strict import safe_load_strict, yaml_error_line

CURRENT_SOURCES = ("dynamic_joint_states", "joint_states_effort", "effort")
WILDCARD = "/**"
_OWNED = ("joints", "current_source", "current_interface", "joint_states_topic", "current_topic",
          "actuators", "sync", "transmissions")
_SYNC_KEYS = ("rate_hz", "max_gap_s", "min_segment_s", "max_lag_s", "lag_threshold_s")
# Sections other modules read from the same node parameters.
SECTIONS = ("identification", "excitation", "simulation", "payload", "springs", "closures")
# Keys other modules read besides their section (excitation/config.py: the acceleration limits).
SHARED = ("acceleration_limits",)
# The nodes' own ROS parameters (robot_ident/nodes/; test_config checks the list is complete).
NODE_PARAMETERS = (
    "acceptance_timeout", "allow_without_collision_model", "approach_acceleration", "approach_min_duration",
    "approach_speed", "approach_tolerance", "autostart", "max_state_age", "require_controller_state",
    "clock_rate", "config_file", "control_rate", "controller", "current_topic", "design_time", "diagnostics_topic",
    "dry_run", "dynamic_joint_state_rate", "goal_time_tolerance", "goal_tolerance", "identify_on_abort",
    "initial_positions", "input_kind", "input_topic", "interface", "joint_state_rate", "joint_state_timeout",
    "max_tracking_error",
    "method", "output_dir", "output_topic", "path_tolerance", "payload_arm", "plots", "point_rate",
    "publish_clock", "real_time_factor", "record_on_start", "record_to_bag", "repetitions", "result_timeout",
    "robot_description", "settle_time", "state_topic", "stop_latency_jitter", "stop_time", "tracking_window", "trajectory_file",
    "urdf_file", "use_sim_time", "result_dir", "gain", "threshold", "calibration_s", "update_period",
    "push_duration")


def check_top_level_keys(p: Mapping[str, Any], fail, key) -> None:
    """A key that is none of the known ones but close to one is a typo (``identifcation:``
    was silently ignored, and the defaults used): an error naming the likely key. Other
    unknown keys are left alone (a node of another package may share the file): the top
    level is the one level where an unknown key is not always an error."""
    known = set(_OWNED) | set(SECTIONS) | set(SHARED) | set(NODE_PARAMETERS)
    for k in p:
        if k in known:
            continue
        close = closest_key(k, known, cutoff=0.8)
        if close:
            raise fail(key(str(k)), f"unknown key; did you mean {close!r}? (a misspelt section is not read: "
                                    "its settings would silently fall back to the defaults)")


@dataclass(frozen=True)
class IdentConfig:
    """The validated data-source part of the configuration."""

    joints: tuple[str, ...]
    current_source: str
    current_interface: str
    joint_states_topic: str
    current_topic: str
    actuators: ActuatorSet
    sync: SyncOptions
    node_name: str = ""
    source: str = "<parameters>"
    # Every parameter of the node, read-only, for the modules that own the other sections.
    parameters: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # Coupled motors (None: every joint has its own motor).
    transmission: Transmission | None = None

    @property
    def drive(self) -> Drive:
        """Channel values -> joint efforts: the actuators, then the coupling (``M.T``).
        With ``current_source: effort`` the values already are joint efforts."""
        tr = None if self.current_source == "effort" else self.transmission
        return Drive(self.actuators, tr)

    @property
    def effort_field(self) -> str:
        """The field of the current stream that holds the values (see `sync.synchronise`)."""
        return self.current_interface if self.current_source == "dynamic_joint_states" else "effort"

    @property
    def current_kind(self) -> str:
        """'dynamic_joint_state' or 'joint_state': the message type of the current topic."""
        return "dynamic_joint_state" if self.current_source == "dynamic_joint_states" else "joint_state"

    def section(self, name: str) -> Mapping[str, Any]:
        """Another module's section (e.g. 'excitation'), empty if absent."""
        value = self.parameters.get(name, {})
        if not isinstance(value, Mapping):
            raise ConfigError(f"{self.source}: {self._key(name)}: expected a mapping, got {value!r}")
        return value

    def _key(self, *parts: str) -> str:
        return ".".join([self.node_name, "ros__parameters", *parts] if self.node_name else parts)


def _freeze(x):
    if isinstance(x, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in x.items()})
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x


def unflatten(params: Mapping[str, Any]) -> dict:
    """``{'actuators.j1.type': 'rotary'}`` -> ``{'actuators': {'j1': {'type': 'rotary'}}}``
    (ROS 2 nodes see nested YAML parameters as dotted names)."""
    out: dict = {}
    for key, value in params.items():
        parts = str(key).split(".")
        d = out
        for p in parts[:-1]:
            nxt = d.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"parameter {key!r} clashes with parameter {p!r}")
            d = nxt
        if isinstance(value, Mapping):
            value = unflatten(value)
        if parts[-1] in d and isinstance(d[parts[-1]], dict) and isinstance(value, dict):
            d[parts[-1]].update(value)
        else:
            d[parts[-1]] = value
    return out


def _merge(base: Mapping, over: Mapping) -> dict:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def config_from_parameters(params: Mapping[str, Any], source: str = "<parameters>",
                           node_name: str = "") -> IdentConfig:
    """Validate the ``ros__parameters`` mapping of one node (nested or dotted keys)."""
    p = unflatten(params)

    def key(*parts) -> str:
        return ".".join([node_name, "ros__parameters", *parts] if node_name else parts)

    def fail(k: str, msg: str) -> ConfigError:
        return ConfigError(f"{source}: {k}: {msg}")

    check_top_level_keys(p, fail, key)

    # joints
    joints = p.get("joints")
    if joints is None:
        raise fail(key("joints"), "missing; list the identified joints, e.g. joints: [joint1, joint2]")
    if not isinstance(joints, (list, tuple)) or not joints or not all(isinstance(j, str) and j for j in joints):
        raise fail(key("joints"), f"must be a non-empty list of joint names, got {joints!r}")
    dup = sorted({j for j in joints if list(joints).count(j) > 1})
    if dup:
        raise fail(key("joints"), f"joint(s) listed twice: {', '.join(dup)}")
    joints = tuple(joints)

    # sources
    src = p.get("current_source", "dynamic_joint_states")
    if src not in CURRENT_SOURCES:
        raise fail(key("current_source"), f"must be one of {', '.join(CURRENT_SOURCES)}, got {src!r}")
    interface = p.get("current_interface", "current")
    if not isinstance(interface, str) or not interface:
        raise fail(key("current_interface"), f"must be an interface name, got {interface!r}")
    js_topic = p.get("joint_states_topic", "/joint_states")
    default_cur = "/dynamic_joint_states" if src == "dynamic_joint_states" else "/joint_states"
    cur_topic = p.get("current_topic", default_cur)
    for k, v in (("joint_states_topic", js_topic), ("current_topic", cur_topic)):
        if not isinstance(v, str) or not v.strip():
            raise fail(key(k), f"must be a topic name, got {v!r}")

    # actuators
    entries = p.get("actuators", {})
    if entries is None:
        entries = {}
    if not isinstance(entries, Mapping):
        raise fail(key("actuators"), f"must map joint names to actuator settings, got {entries!r}")
    if src != "effort" and not entries:
        raise fail(key("actuators"), f"missing; current_source {src!r} needs an actuator per joint "
                                     "to convert currents to efforts")
    try:
        actuators = ActuatorSet.from_mapping(joints, entries,
                                             default_type="direct" if src == "effort" else None)
    except ConfigError as exc:
        joint = getattr(exc, "joint", None)
        fld = getattr(exc, "field", "")
        parts = ["actuators"] + ([joint] if joint else []) + ([fld] if fld else [])
        raise fail(key(*parts), str(exc)) from None
    if src == "effort":
        for a in actuators:
            if a.type != "direct":
                raise fail(key("actuators", a.joint, "type"),
                           f"current_source is 'effort' (the source reports joint efforts) but the actuator "
                           f"of joint {a.joint!r} is {a.type!r}; use current_source joint_states_effort "
                           "for currents in the effort field")

    # sync
    sync_p = p.get("sync", {}) or {}
    if not isinstance(sync_p, Mapping):
        raise fail(key("sync"), f"must be a mapping, got {sync_p!r}")
    kw = {}
    for k, v in sync_p.items():
        if k not in _SYNC_KEYS:
            raise fail(key("sync", str(k)), f"unknown key; {unknown_key_hint(k, _SYNC_KEYS)}")
        if not _is_number(v) or v < 0:
            raise fail(key("sync", k), f"must be a number >= 0 (0 = automatic), got {v!r}")
        if k == "min_segment_s":
            kw[k] = float(v)
        elif v > 0:
            kw[k] = float(v)
    sync = SyncOptions(**kw)

    # coupled transmissions
    try:
        transmission = Transmission.from_mapping(joints, p.get("transmissions"))
    except ConfigError as exc:
        raise fail(key("transmissions"), str(exc)) from None

    return IdentConfig(joints=joints, current_source=src, current_interface=interface,
                       joint_states_topic=js_topic, current_topic=cur_topic, actuators=actuators,
                       sync=sync, node_name=node_name, source=source, parameters=_freeze(p),
                       transmission=None if transmission.is_identity else transmission)


def load_config(path: str | os.PathLike, node_name: str | None = None) -> IdentConfig:
    """Read a ROS 2 parameter YAML and validate the `node_name` section (default: the only
    node section, or the one that lists ``joints``), merged over the ``/**`` section."""
    path = Path(path)
    label = str(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {label}")
    try:
        doc = safe_load_strict(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {label}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{label}: not valid YAML: {yaml_error_line(exc)}") from exc
    return config_from_document(doc, label, node_name)


def config_from_document(doc: Any, label: str = "<config>", node_name: str | None = None) -> IdentConfig:
    """Like `load_config`, from an already parsed YAML document."""
    chosen, params = node_parameters(doc, label, node_name)
    return config_from_parameters(params, label, chosen)


def node_parameters(doc: Any, label: str = "<config>", node_name: str | None = None) -> tuple[str, dict]:
    """The chosen node's name and its ``ros__parameters`` merged over the ``/**`` section's,
    unflattened and not yet validated (`node_name`: None picks the only section, or the one
    that lists ``joints``)."""
    if not isinstance(doc, Mapping) or not doc:
        raise ConfigError(f"{label}: expected a ROS 2 parameter file "
                          "(<node_name>: {ros__parameters: {...}}), got "
                          f"{type(doc).__name__ if doc is not None else 'an empty file'}")
    sections = {}
    for name, body in doc.items():
        if not isinstance(body, Mapping) or "ros__parameters" not in body:
            raise ConfigError(f"{label}: {name}: expected a 'ros__parameters' mapping under the node name")
        params = body["ros__parameters"]
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ConfigError(f"{label}: {name}.ros__parameters: must be a mapping, got {params!r}")
        sections[str(name)] = params
    wild = sections.pop(WILDCARD, {})
    if node_name is not None:
        if node_name not in sections and not (node_name == WILDCARD and wild):
            raise ConfigError(f"{label}: no section for node {node_name!r}; "
                              f"sections: {', '.join(list(sections) + ([WILDCARD] if wild else []))}")
        chosen = node_name if node_name in sections else None
    elif len(sections) == 1:
        chosen = next(iter(sections))
    elif not sections:
        chosen = None
    else:
        with_joints = [n for n, prm in sections.items() if "joints" in unflatten(prm)]
        if len(with_joints) != 1:
            raise ConfigError(f"{label}: several node sections ({', '.join(sections)}); "
                              "say which one to use (node name)")
        chosen = with_joints[0]
    params = _merge(unflatten(wild), unflatten(sections[chosen])) if chosen else unflatten(wild)
    return chosen or WILDCARD, params
