"""What a closed chain is: loop closures (two frames on two tree links that must
coincide), the actuated joints and tied identical limbs, read from the closures YAML
next to the URDF."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import pinocchio as pin

from ...errors import ModelError
from ...util.config_keys import check_keys

CLOSURE_KINDS = ("position", "pose")
# The keys of the closures YAML and of each of its closures.
FILE_KEYS = ("urdf", "actuated", "closures", "home", "tie", "actuators")
CLOSURE_KEYS = ("name", "link_a", "link_b", "point_a", "point_b", "kind", "rpy_a", "rpy_b")


@dataclass(frozen=True)
class Closure:
    """Two points (frames) on two tree links that must coincide."""

    name: str
    link_a: str
    link_b: str
    point_a: tuple = (0.0, 0.0, 0.0)      # in link_a's frame
    point_b: tuple = (0.0, 0.0, 0.0)      # in link_b's frame
    kind: str = "position"
    rpy_a: tuple = (0.0, 0.0, 0.0)        # pose closures: orientation of the cut frame in link_a
    rpy_b: tuple = (0.0, 0.0, 0.0)

    def __post_init__(self):
        if self.kind not in CLOSURE_KINDS:
            raise ModelError(f"closure {self.name!r}: kind {self.kind!r} is not one of {', '.join(CLOSURE_KINDS)}")
        for label in ("point_a", "point_b", "rpy_a", "rpy_b"):
            v = np.asarray(getattr(self, label), dtype=float)
            if v.shape != (3,) or not np.isfinite(v).all():
                raise ModelError(f"closure {self.name!r}: {label} must be 3 finite numbers, "
                                 f"got {getattr(self, label)!r}")
            object.__setattr__(self, label, tuple(float(x) for x in v))

    @property
    def size(self) -> int:
        return 3 if self.kind == "position" else 6

    @classmethod
    def from_dict(cls, d: Mapping, index: int = 0) -> "Closure":
        if not isinstance(d, Mapping):
            raise ModelError(f"closure #{index}: expected a mapping, got {d!r}")
        check_keys(d, CLOSURE_KEYS, f"closure #{index}", ModelError)
        for k in ("link_a", "link_b"):
            if k not in d:
                raise ModelError(f"closure #{index}: {k!r} is missing")
        return cls(name=str(d.get("name", f"closure{index}")), link_a=str(d["link_a"]), link_b=str(d["link_b"]),
                   point_a=tuple(d.get("point_a", (0, 0, 0))), point_b=tuple(d.get("point_b", (0, 0, 0))),
                   kind=str(d.get("kind", "position")), rpy_a=tuple(d.get("rpy_a", (0, 0, 0))),
                   rpy_b=tuple(d.get("rpy_b", (0, 0, 0))))


@dataclass(frozen=True)
class ClosedChainSpec:
    """Everything that describes a closed-chain robot besides its URDF text."""

    urdf: str                                   # path (or XML text)
    actuated: tuple[str, ...]
    closures: tuple[Closure, ...]
    home: dict = field(default_factory=dict)    # tree joint -> initial guess (passive) / home (actuated)
    tie: dict = field(default_factory=dict)     # group name -> tree joints whose bodies are identical
    actuators: dict = field(default_factory=dict)  # optional current -> effort data (robot_ident.model.actuation)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> "ClosedChainSpec":
        import yaml

        from ...util.yaml_strict import safe_load_strict, yaml_error_line
        p = Path(path)
        if not p.is_file():
            raise ModelError(f"closed-chain description not found: {p}")
        try:
            d = safe_load_strict(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ModelError(f"closed-chain description {p} is not valid YAML: {yaml_error_line(exc)}") from exc
        if not isinstance(d, Mapping):
            raise ModelError(f"closed-chain description {p}: expected a mapping at the top level")
        check_keys(d, FILE_KEYS, f"closed-chain description {p}", ModelError)
        for k in ("urdf", "actuated", "closures"):
            if k not in d:
                raise ModelError(f"closed-chain description {p}: key {k!r} is missing")
        urdf = Path(d["urdf"])
        if not urdf.is_absolute():
            urdf = p.parent / urdf
        closures = tuple(Closure.from_dict(c, i) for i, c in enumerate(d["closures"] or []))
        return cls(str(urdf), tuple(d["actuated"]), closures, dict(d.get("home") or {}),
                   {str(k): tuple(v) for k, v in (d.get("tie") or {}).items()}, dict(d.get("actuators") or {}))


def _rpy(rpy) -> np.ndarray:
    return pin.rpy.rpyToMatrix(*[float(x) for x in rpy])
