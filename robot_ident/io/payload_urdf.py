"""Add an identified payload to a URDF as a fixed link on the link that carries it."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin

from ..errors import ModelError


def _fmt(x: float) -> str:
    return f"{float(x):.10g}"


def add_payload_link(urdf_xml: str, parent_link: str, dyn10, name: str = "payload",
                     note: str = "") -> str:
    """URDF text with ``<link name=name>`` (the payload's inertial: mass, centre of mass,
    full inertia about it, in `parent_link`'s frame) fixed to `parent_link` by joint
    ``<name>_fixed``. An existing link of that name is an error, not overwritten."""
    from .urdf_export import body_is_physical

    ok, why = body_is_physical(np.asarray(dyn10, float))
    if not ok:
        raise ModelError(f"payload is not a physical body ({why}); not written into the URDF")
    root = ET.fromstring(urdf_xml)
    links = {l.get("name") for l in root.findall("link")}
    if parent_link not in links:
        raise ModelError(f"URDF has no link {parent_link!r} to fix the payload to")
    if name in links or any(j.get("name") == f"{name}_fixed" for j in root.findall("joint")):
        raise ModelError(f"URDF already has a link {name!r} (or joint {name}_fixed); choose another payload name")
    I = pin.Inertia.FromDynamicParameters(np.asarray(dyn10, float))
    link = ET.SubElement(root, "link", name=name)
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "origin", xyz=" ".join(_fmt(v) for v in I.lever), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_fmt(I.mass))
    Ic = I.inertia
    ET.SubElement(inertial, "inertia", ixx=_fmt(Ic[0, 0]), ixy=_fmt(Ic[0, 1]), ixz=_fmt(Ic[0, 2]),
                  iyy=_fmt(Ic[1, 1]), iyz=_fmt(Ic[1, 2]), izz=_fmt(Ic[2, 2]))
    joint = ET.SubElement(root, "joint", name=f"{name}_fixed", type="fixed")
    ET.SubElement(joint, "parent", link=parent_link)
    ET.SubElement(joint, "child", link=name)
    ET.SubElement(joint, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.indent(root, space="  ")
    head = '<?xml version="1.0"?>\n' + (f"<!-- {note} -->\n" if note else "")
    return head + ET.tostring(root, encoding="unicode") + "\n"
