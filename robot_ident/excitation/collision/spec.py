"""The ``excitation: collision:`` section of the config: margin, floor, boxes, SRDF, package dirs.

    excitation:
      collision:
        margin: 0.03          # m, kept between every checked pair and to the environment
        floor: 0.0            # z of a plane in the root link's frame the robot stays above; null: none
        boxes: [{name: table_edge, size: [0.6, 0.1, 0.8], xyz: [0.5, 0.0, -0.4], rpy: [0, 0, 0]}]
        srdf: null            # optional MoveIt SRDF: its disable_collisions pairs are not checked
        package_dirs: []      # where package://<pkg>/... meshes are looked up (<dir>/<pkg>/...)
        allow_without_collision_model: false   # excitation node: run even if the URDF has no geometry

Defaults (section absent): margin 3 cm, floor at z = 0 of the root link, no boxes.
``boxes`` may also be a mapping ``{table_edge: {size: ..., xyz: ..., rpy: ...}}`` (ROS 2
parameters cannot hold a list of mappings).
Relative ``srdf`` and ``package_dirs`` paths are relative to the config file's folder.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ...errors import ConfigError
from ...util.config_keys import check_keys

_KEYS = ("margin", "floor", "boxes", "srdf", "package_dirs", "allow_without_collision_model")
_BOX_KEYS = ("name", "size", "xyz", "rpy")


@dataclass(frozen=True)
class BoxSpec:
    name: str
    size: tuple[float, float, float]       # full edge lengths [m]
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def placement(self):
        import pinocchio as pin
        return pin.SE3(pin.rpy.rpyToMatrix(np.array(self.rpy, dtype=float)), np.array(self.xyz, dtype=float))

    def to_dict(self) -> dict:
        return {"name": self.name, "size": list(self.size), "xyz": list(self.xyz), "rpy": list(self.rpy)}


@dataclass(frozen=True)
class CollisionSpec:
    margin: float = 0.03
    floor: float | None = 0.0
    boxes: tuple[BoxSpec, ...] = ()
    srdf: str | None = None
    package_dirs: tuple[str, ...] = ()
    allow_without_collision_model: bool = False

    def __post_init__(self):
        if not (math.isfinite(self.margin) and self.margin >= 0):
            raise ConfigError(f"excitation.collision.margin must be a non-negative number, got {self.margin!r}")
        if self.floor is not None and not math.isfinite(self.floor):
            raise ConfigError(f"excitation.collision.floor must be a number or null, got {self.floor!r}")

    def with_package_dirs(self, dirs) -> "CollisionSpec":
        """The spec with extra package directories (command line first)."""
        from dataclasses import replace
        return replace(self, package_dirs=tuple(str(d) for d in dirs) + self.package_dirs)

    def environment_dict(self) -> dict:
        return {"margin": self.margin, "floor": self.floor, "boxes": [b.to_dict() for b in self.boxes],
                "srdf": self.srdf}


def _vec3(v, where, positive=False):
    if not (isinstance(v, (list, tuple)) and len(v) == 3):
        raise ConfigError(f"{where} must be a list of 3 numbers, got {v!r}")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise ConfigError(f"{where} must be a list of 3 numbers, got {v!r}")
        if positive and x <= 0:
            raise ConfigError(f"{where} must hold 3 positive edge lengths, got {v!r}")
        out.append(float(x))
    return tuple(out)


def _path(p, base_dir):
    p = os.path.expanduser(str(p))
    return p if os.path.isabs(p) or base_dir is None else os.path.normpath(os.path.join(base_dir, p))


def parse_collision_section(d, where: str = "excitation.collision", base_dir: str | None = None) -> CollisionSpec:
    """A CollisionSpec from the config's ``collision`` mapping (None or absent: defaults)."""
    if d is None:
        return CollisionSpec()
    if not isinstance(d, Mapping):
        raise ConfigError(f"{where} must be a mapping")
    check_keys(d, _KEYS, where)
    kw = {}
    if d.get("margin") is not None:
        m = d["margin"]
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m < 0:
            raise ConfigError(f"{where}.margin must be a non-negative number [m], got {m!r}")
        kw["margin"] = float(m)
    if "floor" in d:
        f = d["floor"]
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f)):
            raise ConfigError(f"{where}.floor must be a number [m] or null, got {f!r}")
        kw["floor"] = None if f is None else float(f)
    boxes = d.get("boxes") or []
    if isinstance(boxes, Mapping):      # {name: {size, xyz, rpy}}: the form ROS 2 parameters can hold
        boxes = [(f"{where}.boxes.{k}", dict(v, name=k) if isinstance(v, Mapping) else v) for k, v in boxes.items()]
    elif isinstance(boxes, list):
        boxes = [(f"{where}.boxes[{i}]", b) for i, b in enumerate(boxes)]
    else:
        raise ConfigError(f"{where}.boxes must be a list of {{name, size, xyz, rpy}}")
    out, names = [], set()
    for i, (w, b) in enumerate(boxes):
        if not isinstance(b, Mapping):
            raise ConfigError(f"{w} must be a mapping {{name, size, xyz, rpy}}")
        check_keys(b, _BOX_KEYS, w)
        if "size" not in b:
            raise ConfigError(f"{w}: missing size [x, y, z] (full edge lengths, m)")
        name = str(b.get("name", f"box{i}"))
        if name in names:
            raise ConfigError(f"{w}: box name {name!r} used twice")
        names.add(name)
        out.append(BoxSpec(name, _vec3(b["size"], f"{w}.size", positive=True),
                           _vec3(b.get("xyz", [0, 0, 0]), f"{w}.xyz"), _vec3(b.get("rpy", [0, 0, 0]), f"{w}.rpy")))
    kw["boxes"] = tuple(out)
    srdf = d.get("srdf")
    if srdf is not None:
        if not isinstance(srdf, str) or not srdf:
            raise ConfigError(f"{where}.srdf must be a file path or null, got {srdf!r}")
        kw["srdf"] = _path(srdf, base_dir)
    pdirs = d.get("package_dirs") or []
    if isinstance(pdirs, str):
        pdirs = [pdirs]
    if not (isinstance(pdirs, list) and all(isinstance(p, str) and p for p in pdirs)):
        raise ConfigError(f"{where}.package_dirs must be a list of folders")
    kw["package_dirs"] = tuple(_path(p, base_dir) for p in pdirs)
    allow = d.get("allow_without_collision_model", False)
    if not isinstance(allow, bool):
        raise ConfigError(f"{where}.allow_without_collision_model must be true or false, got {allow!r}")
    kw["allow_without_collision_model"] = allow
    return CollisionSpec(**kw)
