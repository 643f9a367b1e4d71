"""Reading a URDF's text: from a file or a string, xacro expanded, vendor-rounded angles
made exact. Every model, collision and export path reads URDFs through `read_urdf_text`."""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, ModelError


@dataclass(frozen=True)
class XacroFile(os.PathLike):
    """A xacro file with the arguments to expand it with (``--xacro-arg NAME:=VALUE``): given
    wherever a URDF path is (RobotModel, load_model, the commands' workflows), it is read as
    that path expanded with these arguments. ``str()`` and ``os.fspath()`` give the path."""
    path: str
    args: tuple[tuple[str, str], ...] = ()

    def __fspath__(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path


def xacro_arguments(values) -> dict[str, str]:
    """{name: value} of ``NAME:=VALUE`` strings; a malformed one is a ConfigError naming it."""
    out = {}
    for v in values or ():
        name, sep, value = str(v).partition(":=")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            raise ConfigError(f"--xacro-arg {v!r}: expected NAME:=VALUE (e.g. --xacro-arg prefix:=left_)")
        out[name.strip()] = value
    return out


def urdf_source(path, xacro_args=None):
    """What the commands pass on as their URDF: `path` itself, or a `XacroFile` when xacro
    arguments (``NAME:=VALUE`` strings or a mapping) are given."""
    args = xacro_args if isinstance(xacro_args, dict) else xacro_arguments(xacro_args)
    if path is None or not args:
        return path
    return XacroFile(str(path), tuple(args.items()))


def read_urdf_text(source: str | os.PathLike) -> tuple[str, str]:
    """Return (xml_text, label) from a path, a `XacroFile` or an XML string; label names the
    file in errors. Angles a vendor rounded (`snap_rounded_angles`) are made exact."""
    args = dict(source.args) if isinstance(source, XacroFile) else None
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
        text = expand_xacro(path, args)
    elif args:
        raise ConfigError(f"--xacro-arg {', '.join(args)}: {path} is not a xacro file")
    return snap_rounded_angles(text), str(path)


def expand_xacro(path: Path, args: dict | None = None) -> str:
    """The URDF a xacro file expands to, with `args` ({name: value}, as ``xacro path
    name:=value``) and the other arguments' defaults (the `xacro` package, pure Python; the ROS
    launch files of the ecosystem pass xacro too). A name the file (and what it includes)
    neither declares nor uses is an error: a misspelt argument would silently be its default."""
    try:
        import xacro
    except ImportError:
        raise ModelError(f"{path} is a xacro file: install xacro (pip install xacro) or expand it first "
                         f"(xacro {path} > robot.urdf)") from None
    seen = len(xacro.all_includes)
    try:
        xml = xacro.process_file(str(path), mappings=dict(args or {})).toxml()
    except Exception as exc:             # xacro raises its own and plain exceptions, with the cause in the text
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise ModelError(f"xacro could not expand {path}: {msg}"
                         + ("; $(find ...) needs the package on ROS_PACKAGE_PATH or in the ament index "
                            "(source ROS 2), or expand the file where it builds" if "find" in msg else "")) from None
    if args:
        _check_arguments(path, args, [path] + list(xacro.all_includes[seen:]))
    return xml


def _check_arguments(path: Path, args: dict, files) -> None:
    texts = []
    for f in files:
        try:
            texts.append(Path(f).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    text = "\n".join(texts)
    declared = sorted(set(re.findall(r"<xacro:arg\s[^>]*?name\s*=\s*[\"']([^\"']+)", text)))
    unknown = [n for n in args if n not in declared and not re.search(r"\$\(arg\s+" + re.escape(n) + r"\s*\)", text)]
    if unknown:
        raise ConfigError(f"--xacro-arg {', '.join(unknown)}: not an argument of {path} (its arguments: "
                          + (", ".join(declared) or "none") + ")")


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
