"""Locate the package's data files (urdf/, config/, launch/) however it was installed:
colcon (ament index), pip (``<prefix>/share/robot_ident``) or a source checkout."""
from __future__ import annotations

import site
import sys
from pathlib import Path

from ..errors import ModelError

PACKAGE = "robot_ident"


def _candidates():
    try:  # a ROS 2 workspace
        from ament_index_python.packages import get_package_share_directory
        yield Path(get_package_share_directory(PACKAGE))
    except Exception:  # noqa: BLE001 - not installed with colcon / no ROS
        pass
    yield Path(__file__).resolve().parents[2]             # source checkout / editable install
    for prefix in (sys.prefix, getattr(site, "USER_BASE", None) or ""):
        if prefix:
            yield Path(prefix) / "share" / PACKAGE


def share_file(*parts: str) -> Path:
    """Path of an installed data file, e.g. share_file('urdf', 'demo_arm.urdf')."""
    tried = []
    for root in _candidates():
        p = root.joinpath(*parts)
        tried.append(str(p))
        if p.is_file():
            return p
    raise ModelError(f"data file {'/'.join(parts)} of {PACKAGE} not found; looked in: {', '.join(tried)}")

