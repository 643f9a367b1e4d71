"""The ``disable_collisions`` entries of a MoveIt SRDF (the vendor's moveit_config ships one).

Parsed here (a few lines of ElementTree) rather than with Pinocchio's
``removeCollisionPairs`` so that the pairs removed can be counted and listed, and so
that a missing or malformed file gets an error naming it.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ...errors import ConfigError


def disabled_link_pairs(path) -> set[frozenset]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"SRDF file not found: {p} (excitation.collision.srdf)")
    try:
        root = ET.parse(p).getroot()
    except ET.ParseError as exc:
        raise ConfigError(f"SRDF {p} is not valid XML: {exc}") from exc
    if root.tag != "robot":
        raise ConfigError(f"SRDF {p}: root element is <{root.tag}>, expected <robot>")
    out = set()
    for e in root.iter("disable_collisions"):
        a, b = e.get("link1"), e.get("link2")
        if not a or not b:
            raise ConfigError(f"SRDF {p}: <disable_collisions> without link1/link2")
        out.add(frozenset((a, b)))
    return out
