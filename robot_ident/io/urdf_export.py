"""Write standard parameters back into a URDF.

Each body of the reduced model is the child link of an identified joint plus every
link rigidly attached below it (fixed or locked joints). Pinocchio gives one merged
inertia per body, about the joint frame, which is the child link's frame in URDF.
The merged inertia is written to the child link (mass, centre of mass, full tensor
about the centre of mass, all six components), and the rigidly attached descendants'
inertials are removed so the mass is not counted twice. Joint ``<dynamics>`` get the
viscous (``damping``) and Coulomb (``friction``) coefficients when the layout has them.

A body is written only if it is physically consistent (mass > 0 and an inertia
about the centre of mass that is positive definite and satisfies the triangle
inequalities); otherwise the URDF's original values are kept and the body is listed
in the returned report.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from ..errors import ModelError
from ..model.pseudo_inertia import body_is_physical  # noqa: F401  (this module's interface)
from ..model.robot import RobotModel


@dataclass
class ExportReport:
    written: list[str] = field(default_factory=list)
    kept_cad: dict[str, str] = field(default_factory=dict)   # body joint -> reason


def _fmt(x: float) -> str:
    return f"{float(x):.10g}"


def _children(root: ET.Element) -> dict[str, list[ET.Element]]:
    out: dict[str, list[ET.Element]] = {}
    for j in root.findall("joint"):
        parent = j.find("parent")
        if parent is not None:
            out.setdefault(parent.get("link"), []).append(j)
    return out


def write_parameters(model: RobotModel, theta: np.ndarray, only_physical: bool = True) -> tuple[str, ExportReport]:
    """Return (urdf_xml, report) with the inertial and friction values of theta."""
    theta = np.asarray(theta, dtype=float)
    if theta.shape != (model.layout.size,):
        raise ModelError(f"parameter vector has {theta.shape} entries, layout has {model.layout.size}")
    root = ET.fromstring(model.urdf_xml)
    joints = {j.get("name"): j for j in root.findall("joint")}
    links = {l.get("name"): l for l in root.findall("link")}
    children = _children(root)
    identified_or_movable_tree = set(model.layout.body_joints)
    report = ExportReport()

    for body in model.layout.body_joints:
        dyn = theta[model.layout.inertial_slice(body)]
        ok, why = body_is_physical(dyn)
        if only_physical and not ok:
            report.kept_cad[body] = why
            continue
        child_name = joints[body].find("child").get("link")
        # Remove inertials of links rigidly attached below the child (merged into this body).
        stack = [child_name]
        while stack:
            ln = stack.pop()
            for cj in children.get(ln, []):
                if cj.get("name") in identified_or_movable_tree:
                    continue
                sub = cj.find("child").get("link")
                inert = links[sub].find("inertial")
                if inert is not None:
                    links[sub].remove(inert)
                stack.append(sub)
        I = pin.Inertia.FromDynamicParameters(dyn)
        link = links[child_name]
        old = link.find("inertial")
        if old is not None:
            link.remove(old)
        inertial = ET.SubElement(link, "inertial")
        c = I.lever
        ET.SubElement(inertial, "origin", xyz=" ".join(_fmt(v) for v in c), rpy="0 0 0")
        ET.SubElement(inertial, "mass", value=_fmt(I.mass))
        Ic = I.inertia
        ET.SubElement(inertial, "inertia", ixx=_fmt(Ic[0, 0]), ixy=_fmt(Ic[0, 1]), ixz=_fmt(Ic[0, 2]),
                      iyy=_fmt(Ic[1, 1]), iyz=_fmt(Ic[1, 2]), izz=_fmt(Ic[2, 2]))
        report.written.append(body)

    syms = model.layout.actuator_symbols
    tr = getattr(model, "transmission", None)
    coupled = {c for g in tr.groups for c in g.joints} if tr is not None else set()
    for j in model.joint_names:
        if j in coupled:      # motor-side friction of a coupled group has no URDF joint equivalent
            continue
        el = joints[j]
        dyn_el = el.find("dynamics")
        if ("Fv" in syms or "Fc" in syms) and dyn_el is None:
            dyn_el = ET.SubElement(el, "dynamics")
        if "Fv" in syms:
            dyn_el.set("damping", _fmt(max(theta[model.layout.index(f"{j}.Fv")], 0.0)))
        if "Fc" in syms:
            dyn_el.set("friction", _fmt(max(theta[model.layout.index(f"{j}.Fc")], 0.0)))
    ET.indent(root, space="  ")
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n", report
