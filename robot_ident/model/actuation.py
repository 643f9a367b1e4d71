"""Motor current -> joint effort, per joint (source A, step 4).

Three kinds of actuator:

* ``rotary``: a motor through a gearbox drives a revolute joint::

      tau = direction * efficiency * gear_ratio * torque_constant * (i - current_offset)

  (source A: ``tau = r_e * k_a * i_m``). Units: torque_constant in N*m/A, tau in N*m.
* ``screw``: a motor through a gearbox drives a ball/lead screw, the joint is prismatic::

      F = direction * efficiency * 2*pi * gear_ratio * torque_constant * (i - current_offset) / lead

  with ``lead`` in m per revolution of the screw (source A: ``F = 2*pi*r_e*k_a*i_m/b``).
* ``direct``: the source already reports the joint effort (torque sensors, simulators);
  ``effort = direction * (value - current_offset)`` where the offset is in effort units.

The efficiency is a plain factor in (0, 1]: the model does not distinguish driving
from back-driving (a power-flow-dependent efficiency would make the map nonlinear);
friction the factor does not capture is identified by the friction parameters.

Each actuator is therefore an affine map ``effort = gain * (i - current_offset)``;
`ActuatorSet` applies the per-joint maps to (N, n) arrays at once, and inverts them
(effort -> current) to synthesise currents from simulated efforts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from ..util.config_keys import unknown_key_hint

ACTUATOR_TYPES = ("rotary", "screw", "direct")

# Keys an actuator entry may have, per type (besides 'type').
_COMMON_KEYS = ("efficiency", "direction", "current_offset")
_KEYS = {
    "rotary": ("torque_constant", "gear_ratio") + _COMMON_KEYS,
    "screw": ("torque_constant", "gear_ratio", "lead") + _COMMON_KEYS,
    "direct": ("direction", "current_offset"),
}
ALL_KEYS = frozenset({"type"}.union(*_KEYS.values()))
_REQUIRED = {"rotary": ("torque_constant",), "screw": ("torque_constant", "lead"), "direct": ()}


def _error(joint: str, field: str, message: str) -> ConfigError:
    """A ConfigError naming the joint; `.field` tells callers which key was at fault."""
    exc = ConfigError(f"actuator of joint {joint!r}: {message}")
    exc.field = field  # type: ignore[attr-defined]
    exc.joint = joint  # type: ignore[attr-defined]
    return exc


def _number(joint: str, field: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _error(joint, field, f"{field} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise _error(joint, field, f"{field} must be finite, got {value!r}")
    return x


@dataclass(frozen=True)
class Actuator:
    """How one joint's source value (a motor current, or an effort) becomes its effort."""

    joint: str
    type: str = "rotary"
    torque_constant: float = 1.0     # N*m/A (motor side)
    gear_ratio: float = 1.0          # motor revolutions per joint (or screw) revolution
    lead: float | None = None        # m per screw revolution (screw only)
    efficiency: float = 1.0          # in (0, 1]
    direction: int = 1               # +1 or -1: sign between motor current and joint axis
    current_offset: float = 0.0      # A (effort units for 'direct')

    def __post_init__(self):
        j = self.joint
        if not isinstance(j, str) or not j:
            raise ConfigError(f"actuator joint name must be a non-empty string, got {j!r}")
        if self.type not in ACTUATOR_TYPES:
            raise _error(j, "type", f"unknown type {self.type!r}; expected one of {', '.join(ACTUATOR_TYPES)}")
        kt = _number(j, "torque_constant", self.torque_constant)
        gr = _number(j, "gear_ratio", self.gear_ratio)
        eff = _number(j, "efficiency", self.efficiency)
        off = _number(j, "current_offset", self.current_offset)
        d = _number(j, "direction", self.direction)
        if d not in (1.0, -1.0):
            raise _error(j, "direction", f"direction must be +1 or -1, got {self.direction!r}")
        if self.type != "direct":
            if not kt > 0:
                raise _error(j, "torque_constant", f"torque_constant must be positive (N*m/A), got {kt:g}")
            if not gr > 0:
                raise _error(j, "gear_ratio", f"gear_ratio must be positive, got {gr:g} "
                                              "(use direction: -1 to reverse the sign)")
            if not 0 < eff <= 1:
                raise _error(j, "efficiency", f"efficiency must be in (0, 1], got {eff:g}")
        lead = self.lead
        if self.type == "screw":
            if lead is None:
                raise _error(j, "lead", "a screw actuator needs 'lead' (m per revolution)")
            lead = _number(j, "lead", lead)
            if not lead > 0:
                raise _error(j, "lead", f"lead must be positive (m per revolution), got {lead:g}")
        elif lead is not None:
            raise _error(j, "lead", f"'lead' is only meaningful for type 'screw', not {self.type!r}")
        object.__setattr__(self, "torque_constant", kt)
        object.__setattr__(self, "gear_ratio", gr)
        object.__setattr__(self, "efficiency", eff)
        object.__setattr__(self, "current_offset", off)
        object.__setattr__(self, "direction", int(d))
        object.__setattr__(self, "lead", lead)

    @classmethod
    def from_dict(cls, joint: str, entry: Mapping) -> "Actuator":
        """Build from a config entry such as ``{type: screw, torque_constant: 0.3, lead: 0.01}``.

        Unknown keys, and keys that do not apply to the type, are errors naming the joint."""
        if not isinstance(entry, Mapping):
            raise _error(joint, "", f"entry must be a mapping of actuator settings, got {entry!r}")
        for key in entry:
            if key not in ALL_KEYS:
                raise _error(joint, str(key), f"unexpected key {key!r}: {unknown_key_hint(key, ALL_KEYS)}")
        if "type" not in entry:
            raise _error(joint, "type", f"'type' is missing; expected one of {', '.join(ACTUATOR_TYPES)}")
        typ = entry["type"]
        if typ not in ACTUATOR_TYPES:
            raise _error(joint, "type", f"unknown type {typ!r}; expected one of {', '.join(ACTUATOR_TYPES)}")
        allowed = _KEYS[typ]
        for key in entry:
            if key == "type":
                continue
            if key not in allowed:
                raise _error(joint, str(key), f"unexpected key {key!r}: it does not apply to type {typ!r}")
        for key in _REQUIRED[typ]:
            if key not in entry:
                raise _error(joint, key, f"type {typ!r} needs {key!r}")
        kwargs = {k: entry[k] for k in allowed if k in entry}
        return cls(joint=joint, type=typ, **kwargs)

    @property
    def gain(self) -> float:
        """Effort per unit of source value: N*m/A (rotary), N/A (screw), 1 (direct)."""
        if self.type == "rotary":
            g = self.efficiency * self.gear_ratio * self.torque_constant
        elif self.type == "screw":
            g = self.efficiency * 2.0 * math.pi * self.gear_ratio * self.torque_constant / self.lead
        else:
            g = 1.0
        return self.direction * g

    def effort(self, current):
        """Joint effort from the source value (array or scalar)."""
        return self.gain * (np.asarray(current, dtype=float) - self.current_offset)

    def current(self, effort):
        """The source value that produces `effort` (inverse of `effort`)."""
        return np.asarray(effort, dtype=float) / self.gain + self.current_offset


@dataclass(frozen=True)
class ActuatorSet:
    """Actuators of the identified joints, in joint order."""

    actuators: tuple[Actuator, ...]

    def __post_init__(self):
        acts = tuple(self.actuators)
        for a in acts:
            if not isinstance(a, Actuator):
                raise ConfigError(f"ActuatorSet holds Actuator objects, got {a!r}")
        names = [a.joint for a in acts]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"actuator given twice for joint(s) {', '.join(map(repr, dup))}")
        object.__setattr__(self, "actuators", acts)

    # ----------------------------------------------------------- construction
    @classmethod
    def from_mapping(cls, joints: Sequence[str], entries: Mapping[str, Mapping] | None,
                     default_type: str | None = None) -> "ActuatorSet":
        """Actuators for `joints` (in that order) from ``{joint: {type: ..., ...}}``.

        A joint without an entry is an error naming it, unless `default_type` is
        'direct' (then it gets a direct actuator). Entries for joints that are not
        in `joints` are errors too (usually a misspelt joint name)."""
        entries = dict(entries or {})
        extra = [k for k in entries if k not in joints]
        if extra:
            raise _error(str(extra[0]), "", f"no such identified joint; identified joints: {', '.join(joints)}")
        out = []
        for j in joints:
            if j in entries:
                out.append(Actuator.from_dict(j, entries[j]))
            elif default_type == "direct":
                out.append(Actuator(j, "direct"))
            else:
                raise _error(j, "", "no actuator given for this joint (add it under 'actuators')")
        return cls(tuple(out))

    @classmethod
    def direct(cls, joints: Iterable[str]) -> "ActuatorSet":
        """Every joint's source already is its effort."""
        return cls(tuple(Actuator(j, "direct") for j in joints))

    # ------------------------------------------------------------------ access
    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(a.joint for a in self.actuators)

    def __len__(self) -> int:
        return len(self.actuators)

    def __iter__(self):
        return iter(self.actuators)

    def __getitem__(self, joint: str) -> Actuator:
        for a in self.actuators:
            if a.joint == joint:
                return a
        raise _error(joint, "", f"no actuator for this joint; actuators exist for {', '.join(self.joint_names)}")

    def for_joints(self, joints: Sequence[str]) -> "ActuatorSet":
        """The actuators of `joints`, in that order (missing joint -> ConfigError naming it)."""
        return ActuatorSet(tuple(self[j] for j in joints))

    @property
    def is_direct(self) -> bool:
        return all(a.type == "direct" for a in self.actuators)

    @property
    def gains(self) -> np.ndarray:
        """(n,) effort per unit source value, in joint order."""
        return np.array([a.gain for a in self.actuators], dtype=float)

    @property
    def offsets(self) -> np.ndarray:
        """(n,) source offsets, in joint order."""
        return np.array([a.current_offset for a in self.actuators], dtype=float)

    def check_joint_kinds(self, is_prismatic: Mapping[str, bool]) -> None:
        """Screws must drive prismatic joints and rotary actuators revolute ones."""
        for a in self.actuators:
            if a.joint not in is_prismatic:
                continue
            p = bool(is_prismatic[a.joint])
            if a.type == "screw" and not p:
                raise _error(a.joint, "type", "type 'screw' drives a prismatic joint, but the joint is revolute")
            if a.type == "rotary" and p:
                raise _error(a.joint, "type", "type 'rotary' drives a revolute joint, but the joint is "
                                              "prismatic (use 'screw' with its lead)")

    # -------------------------------------------------------------- conversion
    def _columns(self, x, joints: Sequence[str] | None, label: str) -> tuple[np.ndarray, "ActuatorSet"]:
        acts = self if joints is None else self.for_joints(joints)
        a = np.asarray(x, dtype=float)
        if a.shape[-1:] != (len(acts),):
            raise ValueError(f"{label} must have {len(acts)} columns (one per joint: "
                             f"{', '.join(acts.joint_names)}), got shape {a.shape}")
        return a, acts

    def efforts(self, current, joints: Sequence[str] | None = None) -> np.ndarray:
        """(N, n) efforts from (N, n) source values; columns in `joints` order (default: own order)."""
        a, acts = self._columns(current, joints, "current")
        return (a - acts.offsets) * acts.gains

    def currents(self, effort, joints: Sequence[str] | None = None) -> np.ndarray:
        """(N, n) source values producing (N, n) efforts (the inverse of `efforts`)."""
        a, acts = self._columns(effort, joints, "effort")
        return a / acts.gains + acts.offsets

    def apply(self, recording):
        """A `signals.Recording` whose `effort` field holds source values (currents) ->
        the same recording with joint efforts (columns matched by joint name)."""
        eff = self.efforts(recording.effort, recording.joint_names)
        meta = dict(recording.meta)
        meta["effort_from"] = "direct" if self.for_joints(recording.joint_names).is_direct else "current"
        return replace(recording, effort=eff, meta=meta)
