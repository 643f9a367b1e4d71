"""A robot_description as the engine can read it.

A robot_description published for ros2_control (and Gazebo) carries ``<ros2_control>``
blocks whose ``<joint name=...>`` children share the joint names but have no type,
and ``<gazebo>`` / ``<transmission>`` blocks; URDF readers that look for every
``<joint>`` element anywhere in the document (model.py, io/urdf_export.py use
``root.iter('joint')``) then see a joint without a type. `kinematic_urdf` keeps only
what a URDF parser needs: the top-level ``<link>``, ``<joint>`` and ``<material>``
elements (and the XML comments), in order.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from ..errors import ModelError

DROPPED = ("ros2_control", "gazebo", "transmission")


def kinematic_urdf(xml: str) -> str:
    """The URDF text without ros2_control, gazebo and transmission blocks (unchanged if it has none)."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ModelError(f"robot_description is not valid XML: {exc}") from exc
    if root.tag != "robot":
        raise ModelError(f"robot_description: root element is <{root.tag}>, expected <robot>")
    drop = [el for el in root if el.tag in DROPPED]
    if not drop:
        return xml
    for el in drop:
        root.remove(el)
    return ET.tostring(root, encoding="unicode")


def description_or_path(text_or_path: str) -> str:
    """URDF text is cleaned with `kinematic_urdf`; a path is read and cleaned too."""
    s = str(text_or_path)
    if s.lstrip().startswith("<"):
        return kinematic_urdf(s)
    from .robot import read_urdf_text
    xml, _ = read_urdf_text(s)
    return kinematic_urdf(xml)
