"""Where the meshes of a URDF's ``<collision>`` elements are: ``package://``, ``file://``,
absolute and relative paths resolved to absolute files before Pinocchio reads them.

``package://<pkg>/<rest>`` is looked up, in order, in every package directory given
(``<dir>/<pkg>/<rest>``; a directory that *is* the package, ``<dir>`` named ``<pkg>``,
works too), then in ``ROS_PACKAGE_PATH`` and, under ROS 2, in the ament index
(``get_package_share_directory(pkg)/<rest>``; the import is optional). Relative
paths are relative to the URDF's folder. Resolving here (rather than inside
Pinocchio) lets a missing mesh be reported with its link and every place searched.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from ...errors import ModelError


def _ament_share(pkg: str) -> str | None:
    from ...util.resources import ament_share_directory
    return ament_share_directory(pkg)


def search_dirs(package_dirs=()) -> list[str]:
    dirs = [str(d) for d in package_dirs]
    dirs += [d for d in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if d]
    return dirs


def resolve_mesh(filename: str, package_dirs=(), urdf_dir: str | None = None) -> tuple[str | None, list[str]]:
    """(absolute path or None, places searched)."""
    tried: list[str] = []
    if filename.startswith("package://"):
        rest = filename[len("package://"):]
        pkg, _, sub = rest.partition("/")
        for d in search_dirs(package_dirs):
            for cand in (Path(d) / pkg / sub, Path(d) / sub if Path(d).name == pkg else None):
                if cand is None:
                    continue
                tried.append(str(cand))
                if cand.is_file():
                    return str(cand.resolve()), tried
        share = _ament_share(pkg)
        if share is not None:
            cand = Path(share) / sub
            tried.append(str(cand))
            if cand.is_file():
                return str(cand.resolve()), tried
        else:
            tried.append(f"ament index (package {pkg!r} not found or ROS 2 not sourced)")
        return None, tried
    if filename.startswith("file://"):
        filename = filename[len("file://"):]
    p = Path(os.path.expanduser(filename))
    if not p.is_absolute():
        p = Path(urdf_dir or ".") / p
    tried.append(str(p))
    return (str(p.resolve()), tried) if p.is_file() else (None, tried)


def collision_links(xml: str) -> list[str]:
    """Names of the links that have at least one <collision> element."""
    root = ET.fromstring(xml)
    return [ln.get("name") for ln in root.findall("link") if ln.find("collision") is not None]


def resolve_collision_meshes(xml: str, label: str, package_dirs=(), urdf_dir: str | None = None) -> str:
    """The URDF text with every collision mesh filename made absolute; ModelError naming the
    link, the file and the places searched if one cannot be found."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ModelError(f"URDF {label} is not valid XML: {exc}") from exc
    for link in root.findall("link"):
        for col in link.findall("collision"):
            for mesh in col.iter("mesh"):
                fn = mesh.get("filename")
                if not fn:
                    raise ModelError(f"URDF {label}: link {link.get('name')!r}: collision mesh without filename")
                path, tried = resolve_mesh(fn, package_dirs, urdf_dir)
                if path is None:
                    raise ModelError(
                        f"URDF {label}: link {link.get('name')!r}: collision mesh {fn!r} not found; searched "
                        + "; ".join(tried[:8]) + (" ..." if len(tried) > 8 else "")
                        + ". Give the folder holding the package with --package-dir or "
                          "excitation.collision.package_dirs")
                mesh.set("filename", path)
    return ET.tostring(root, encoding="unicode")
