"""Reading a URDF's text: from a file or a string, xacro expanded, vendor-rounded angles
made exact. Every model, collision and export path reads URDFs through `read_urdf_text`."""
from __future__ import annotations

import math
import os
import re
from pathlib import Path

from ..errors import ModelError


def read_urdf_text(source: str | os.PathLike) -> tuple[str, str]:
    """Return (xml_text, label) from a path or an XML string; label names the file in errors.
    Angles a vendor rounded (`snap_rounded_angles`) are made exact."""
    text = str(source)
    if text.lstrip().startswith("<"):
        return snap_rounded_angles(text), "<URDF string>"
    path = Path(source)
    if not path.is_file():
        raise ModelError(f"URDF file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read URDF file {path}: {exc}") from exc
    if path.suffix == ".xacro" or "xmlns:xacro" in text:
        text = expand_xacro(path)
    return snap_rounded_angles(text), str(path)


def expand_xacro(path: Path) -> str:
    """The URDF a xacro file expands to, with its arguments' defaults (the `xacro` package,
    pure Python; the ROS launch files of the ecosystem pass xacro too)."""
    try:
        import xacro
    except ImportError:
        raise ModelError(f"{path} is a xacro file: install xacro (pip install xacro) or expand it first "
                         f"(xacro {path} > robot.urdf)") from None
    try:
        return xacro.process_file(str(path)).toxml()
    except Exception as exc:             # xacro raises its own and plain exceptions, with the cause in the text
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise ModelError(f"xacro could not expand {path}: {msg}"
                         + ("; $(find ...) needs the package on ROS_PACKAGE_PATH or in the ament index "
                            "(source ROS 2), or expand the file where it builds" if "find" in msg else "")) from None


# An rpy angle this close to a multiple of pi/2 (but not on it) is a vendor's rounding:
# "1.5708" is 3.7e-6 rad off pi/2, enough to keep two base parameters that no motion
# separates (the xArm7: 70 instead of 69, cond 1.2e7). The tolerance follows the precision
# the number is written with: one unit of its last decimal (rounded or truncated), at least
# SNAP_TOLERANCE, for 3 decimals or more ("1.571" and "1.570" are pi/2 to the precision
# written). With 2 decimals or fewer ("1.57") the angle is taken as written: it may be meant.
SNAP_TOLERANCE = 1e-4
MIN_DECIMALS = 3


def _snap_tolerance(text: str) -> float:
    """How far from a multiple of pi/2 the angle written as `text` may be and still be it."""
    mantissa = text.lower().split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa and "e" not in text.lower() else 0
    return max(SNAP_TOLERANCE, 10.0 ** -decimals) if decimals >= MIN_DECIMALS else SNAP_TOLERANCE
_RPY = re.compile(r'(\brpy\s*=\s*")([^"]*)(")')


_NOTE_END = " set to exact multiples of pi/2 -->"
_NOTE = re.compile(r"<!-- robot_ident: (\d+ rounded rpy angle\(s\) \([^)]*\))" + re.escape(_NOTE_END))


def snapped_angles(xml: str) -> str | None:
    """What `snap_rounded_angles` changed in this text ("6 rounded rpy angle(s) (1.5708)"), or None."""
    m = _NOTE.search(xml)
    return m.group(1) if m else None


def snap_rounded_angles(xml: str) -> str:
    """The URDF text with every rpy angle that is a multiple of pi/2 to the precision it is
    written with (`_snap_tolerance`) set to it exactly; a comment at the top lists what was
    changed (unchanged text without any)."""
    changed = []

    def fix(m):
        vals = m.group(2).split()
        try:
            nums = [float(v) for v in vals]
        except ValueError:
            return m.group(0)
        out = []
        for v, x in zip(vals, nums):
            k = round(x / (math.pi / 2))
            exact = k * math.pi / 2
            if x != exact and abs(x - exact) < _snap_tolerance(v):
                changed.append(v)
                out.append(repr(exact))
            else:
                out.append(v)
        return m.group(1) + " ".join(out) + m.group(3)

    new = _RPY.sub(fix, xml)
    if not changed:
        return xml
    note = f"<!-- robot_ident: {len(changed)} rounded rpy angle(s) ({', '.join(sorted(set(changed)))}){_NOTE_END}\n"
    head, sep, rest = new.partition("?>") if new.lstrip().startswith("<?xml") else ("", "", new)
    return head + sep + ("\n" if sep else "") + note + rest.lstrip("\n") if sep else note + new
