"""The collision meshes of a URDF made absolute before Pinocchio reads them, through the one
package-path resolution (util/package_paths.py: the folders given, the folders above the
URDF, ROS_PACKAGE_PATH, AMENT_PREFIX_PATH, the ament index). A missing mesh is an error
naming its link and every place searched."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from ...errors import ModelError
from ...util.package_paths import resolve_meshes


def collision_links(xml: str) -> list[str]:
    """Names of the links that have at least one <collision> element."""
    root = ET.fromstring(xml)
    return [ln.get("name") for ln in root.findall("link") if ln.find("collision") is not None]


def resolve_collision_meshes(xml: str, label: str, package_dirs=(), urdf_dir: str | None = None) -> str:
    """The URDF text with every collision mesh filename made absolute; ModelError naming the
    link, the file and the places searched if one cannot be found."""
    try:
        out, missing = resolve_meshes(xml, "collision", package_dirs, urdf_dir)
    except ET.ParseError as exc:
        raise ModelError(f"URDF {label} is not valid XML: {exc}") from exc
    if missing:
        m = missing[0]
        if not m.filename:
            raise ModelError(f"URDF {label}: link {m.link!r}: collision mesh without filename")
        raise ModelError(f"URDF {label}: link {m.link!r}: collision mesh {m.filename!r} not found; searched "
                         + "; ".join(m.searched) + ". Give the folder holding the package with --package-dir or "
                                                   "excitation.collision.package_dirs")
    return out
