"""URDF joints Pinocchio's model does not carry as robot_ident needs them: ``<mimic>`` joints
(a mimic joint moves with its leader; robot_ident models no such coupling, so both are locked)
and locked joints named like a link (which Pinocchio's model reduction cannot look up)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Mapping, Sequence

import numpy as np
import pinocchio as pin

from ..errors import ModelError

_LOCKED_SUFFIX = "__locked"


def rename_locked_link_clashes(xml: str, full, q_ref: np.ndarray, locked: Sequence[str]):
    """(model, q_ref, {joint: its name in that model}) for the reduction: a locked joint named
    like a link (the SO-100's joint and link "gripper") made Pinocchio's buildReducedModel fail
    ("Several frames match the filter"); such joints are renamed ``<name>__locked`` in a model
    built for the reduction, where they disappear. Nothing else sees the new names."""
    root = ET.fromstring(xml)
    links = {ln.get("name") for ln in root.findall("link")}
    clash = {n for n in locked if n in links}
    if not clash:
        return full, q_ref, {}
    for j in root.iter("joint"):          # the joints and their <mimic joint=...> references
        if j.get("name") in clash:
            j.set("name", j.get("name") + _LOCKED_SUFFIX)
        elif j.get("joint") in clash:
            j.set("joint", j.get("joint") + _LOCKED_SUFFIX)
    renamed = pin.buildModelFromXML(ET.tostring(root, encoding="unicode"))
    q_new = pin.neutral(renamed)
    for i in range(1, full.njoints):
        name = full.names[i]
        k = renamed.getJointId(name + _LOCKED_SUFFIX if name in clash else name)
        a, b = full.joints[i].idx_q, renamed.joints[k].idx_q
        q_new[b:b + renamed.joints[k].nq] = q_ref[a:a + full.joints[i].nq]
    return renamed, q_new, {n: n + _LOCKED_SUFFIX for n in clash}


def mimic_joints(urdf_joints: Mapping[str, ET.Element]) -> dict[str, tuple[str, float, float]]:
    """URDF ``<mimic>`` joints: name -> (leader, multiplier, offset). Pinocchio builds them as
    independent joints here; robot_ident's model has no mimic coupling."""
    out = {}
    for name, j in urdf_joints.items():
        m = j.find("mimic")
        if m is not None and m.get("joint"):
            out[name] = (m.get("joint"), float(m.get("multiplier", 1.0)), float(m.get("offset", 0.0)))
    return out


def mimic_and_leaders(mimics: Mapping[str, tuple]) -> set[str]:
    """Every joint that is a mimic joint or the leader of one."""
    return set(mimics) | {leader for leader, _, _ in mimics.values()}


def check_mimics(joints: Sequence[str], mimics: Mapping[str, tuple], label: str) -> None:
    """A mimic joint moves with its leader: identified as an independent joint (or locked while
    its leader moves) it would be a wrong model, so neither is accepted."""
    for name, (leader, _, _) in mimics.items():
        if name in joints:
            raise ModelError(f"joint {name!r} of URDF {label} mimics {leader!r} (URDF <mimic>): it is not "
                             f"actuated on its own and cannot be identified; leave {name!r} and {leader!r} out of "
                             "the joints (both are then locked, the mimic joint following its leader)")
        if leader in joints:
            raise ModelError(f"joint {leader!r} is identified but joint {name!r} of URDF {label} mimics it (URDF "
                             f"<mimic>), which this model cannot follow; leave {leader!r} out of the joints too "
                             "(both are then locked), or describe the coupling as a closed chain (closures:)")
