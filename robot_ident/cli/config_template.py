"""The parameter file `robot-ident init` writes for a URDF: the URDF's joints with their limits
(as comments), ``current_source: effort``, a commented-out actuator per joint with
placeholders, and every other section of the schema (config_schema.py) with its defaults,
commented out, each key with its unit and meaning. `section_lines` with ``defaults_only``
gives the defaults alone as live YAML (the tests parse it back through the validators)."""
from __future__ import annotations

import math
from typing import Any

import yaml

from .config_schema import UNSET, Key, section

NODE = "robot_ident"
INDENT = "    "                 # the parameters' indentation under `robot_ident: ros__parameters:`
COMMENT_COLUMN = 36             # where a key's trailing comment starts (when the key is shorter)
# The sections after the data source, in the order they are written.
SECTIONS = ("sync", "transmissions", "identification", "excitation", "simulation", "payload", "springs",
            "closures")
EXAMPLE_NAMES = {"<group>": "wrist", "<name>": "example", "<joint>": None}   # None: the URDF's first joint


def flow(value: Any) -> str:
    """A value as one line of YAML (flow style)."""
    if isinstance(value, tuple):
        value = list(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False)
    return text.removesuffix("\n...\n").strip()


def _comment(key: Key) -> str:
    return "; ".join(part for part in (key.unit, key.meaning) if part)


def _line(depth: int, text: str, note: str) -> str:
    body = "  " * depth + text
    return f"{body:<{COMMENT_COLUMN}} # {note}" if note else body


def section_lines(path: str, joints: tuple[str, ...] = (), depth: int = 0, defaults_only: bool = False,
                  limits: dict | None = None) -> list[str]:
    """The YAML lines of the section at `path` (without the section's own name), `depth`
    levels deep: keys with a default as ``key: default  # unit; meaning``; with
    `defaults_only` nothing else, else also the keys without one (an example or a
    placeholder) and an example entry of each per-item section (``<joint>``, ``<name>``)."""
    out = []
    for key in section(path).keys:
        if key.section is not None:
            child = section(key.section)
            item = child.path.rsplit(".", 1)[-1] if child.path.endswith(">") else None
            if item is not None:
                if defaults_only:
                    continue
                name = EXAMPLE_NAMES[item] or (joints[0] if joints else "joint1")
                out.append(_line(depth, f"{key.name}:", key.meaning))
                out.append(_line(depth + 1, f"{name}:", f"(an example {item[1:-1]})"))
                out += section_lines(child.path, joints, depth + 2, defaults_only, limits)
                continue
            inner = section_lines(child.path, joints, depth + 1, defaults_only, limits)
            if inner:
                out.append(_line(depth, f"{key.name}:", key.meaning))
                out += inner
            continue
        if key.default is not UNSET:
            out.append(_line(depth, f"{key.name}: {flow(key.default)}", _comment(key)))
        elif not defaults_only:
            out.append(unset_line(key, depth, joints, limits))
    return out


def unset_line(key: Key, depth: int, joints, limits) -> str:
    """A key without a default: the URDF's limits for position_limits, null per joint for the
    other per-joint values, the schema's example; else the key's type, behind a second '#'.
    A file uncommented unedited is refused by the validators, never read with guessed values."""
    if key.name == "position_limits" and limits:
        value, note = {j: [round(lo, 6), round(hi, 6)] for j, (lo, hi) in limits.items()}, "(the URDF's)"
    elif key.type.startswith("joint ->") and joints:
        value, note = {j: None for j in joints}, "(to fill in)"
    elif key.example is not UNSET:
        value, note = key.example, "(example)"
    else:
        return _line(depth, f"# {key.name}: <{key.type}>", "(unset) " + _comment(key))
    return _line(depth, f"{key.name}: {flow(value)}", f"{note} {_comment(key)}")


def _limit_comment(model) -> list[str]:
    lim = model.limits
    rows = []
    for k, j in enumerate(model.joint_names):
        prismatic = model.is_prismatic(j)
        u = "m" if prismatic else "rad"
        lo, hi = float(lim.lower[k]), float(lim.upper[k])
        pos = "continuous" if not (math.isfinite(lo) and math.isfinite(hi)) else f"[{lo:.4g}, {hi:.4g}] {u}"
        rows.append(f"#   {j}: {'prismatic' if prismatic else 'revolute'}, position {pos}, "
                    f"velocity {float(lim.velocity[k]):.4g} {u}/s, effort {float(lim.effort[k]):.4g} "
                    f"{'N' if prismatic else 'N*m'}")
    return rows


def _actuator_lines(model) -> list[str]:
    """A commented-out actuator per joint: the keys of a motor-current setup, the values to fill in."""
    out = []
    for j in model.joint_names:
        screw = model.is_prismatic(j)
        out.append(_line(1, f"{j}:", ""))
        out.append(_line(2, f"type: {'screw' if screw else 'rotary'}", "rotary (revolute joint), screw (prismatic)"))
        out.append(_line(2, "torque_constant: null", "N*m/A; the motor's, from its data sheet (required)"))
        out.append(_line(2, "gear_ratio: null", "motor revolutions per joint (screw) revolution"))
        if screw:
            out.append(_line(2, "lead: null", "m/rev; the screw's lead (required)"))
        out.append(_line(2, "efficiency: 1.0", "in (0, 1]"))
        out.append(_line(2, "direction: 1", "+1 or -1: the sign between current and joint axis"))
        out.append(_line(2, "current_offset: 0.0", "A"))
    return out


def _commented(lines: list[str]) -> list[str]:
    return [f"{INDENT}# {line}" for line in lines]


def init_text(model, urdf_label: str) -> str:
    """The parameter file for a RobotModel of the URDF (every movable joint but mimic joints and their leaders)."""
    joints = tuple(model.joint_names)
    lim = model.limits
    limits = {j: (float(lim.lower[k]), float(lim.upper[k])) for k, j in enumerate(joints)
              if math.isfinite(lim.lower[k]) and math.isfinite(lim.upper[k])}
    top = section("")
    out = [f"# robot_ident parameters for robot {model.model.name!r} ({urdf_label}), written by `robot-ident init`.",
           "# Every key with its type, unit, default and meaning: docs/config.md (robot_ident's documentation).",
           "# Commented-out keys show their defaults; uncomment a key to change it. Unknown keys are errors",
           "# naming the closest valid key (at the top level: only keys close to a known one).",
           f"{NODE}:", "  ros__parameters:",
           f"{INDENT}# The identified joints, in the URDF's order; their URDF limits:"]
    out += [INDENT + row for row in _limit_comment(model)]
    mimic = getattr(model, "mimics", {})
    if mimic:
        out.append(f"{INDENT}# Left out, locked (URDF <mimic>: a mimic joint moves with its leader, not on its own): "
                   + ", ".join(f"{m} mimics {lead}" for m, (lead, _, _) in mimic.items()))
    out.append(f"{INDENT}joints: {flow(list(joints))}")
    out += [f"{INDENT}# effort: the JointState effort is the joint effort (torque or force), as ros2_control",
            f"{INDENT}# reports it. For motor currents: joint_states_effort or dynamic_joint_states, and the",
            f"{INDENT}# actuators below filled in (every null replaced by the drive's value).",
            f"{INDENT}current_source: effort"]
    for name in ("current_interface", "joint_states_topic", "current_topic"):
        key = top.key(name)
        value = key.default if key.default is not UNSET else "/joint_states"
        out.append(f"{INDENT}# " + _line(0, f"{name}: {flow(value)}", _comment(key)))
    out.append("")
    out += _commented([_line(0, "actuators:", "needed for motor currents; one per joint")] + _actuator_lines(model))
    for name in SECTIONS:
        key = top.key(name)
        out.append("")
        if key.section is None:
            out += _commented([unset_line(key, 0, joints, limits)])
            continue
        if key.section.endswith(">"):       # a per-item section: one example entry
            lines = [_line(0, f"{name}:", key.meaning)]
            item = key.section.rsplit(".", 1)[-1]
            lines.append(_line(1, f"{EXAMPLE_NAMES[item] or joints[0]}:", f"(an example {item[1:-1]})"))
            lines += section_lines(key.section, joints, 2, False, limits)
        else:
            lines = [_line(0, f"{name}:", key.meaning)] + section_lines(key.section, joints, 1, False, limits)
        out += _commented(lines)
    return "\n".join(out) + "\n"


def write_init_file(urdf, output, replace: bool = False):
    """Write `init_text` for the URDF to `output` (refused if it exists, unless `replace`),
    after checking the text as identify reads it (offline/config_check.py). The file appears
    whole or not at all. Returns the model (every movable joint of the URDF but mimic joints and their
    leaders)."""
    import os
    import tempfile
    from pathlib import Path

    from ..errors import ConfigError
    from ..model.robot import RobotModel
    from ..offline.config_check import check_config
    from ..util.atomic import default_file_mode

    output = Path(output)
    model = RobotModel(urdf)
    text = init_text(model, str(urdf))
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, default_file_mode())
        check_config(tmp, urdf)
        if replace:
            from ..io.staging import keep_previous
            kept = keep_previous(output)            # nothing is lost: the replaced file stays as <name>.bak
            if kept is not None:
                print(f"kept the previous {output} as {kept}")
            os.replace(tmp, output)
        else:
            try:
                os.link(tmp, output)            # fails if the file appeared meanwhile: never replaced
            except FileExistsError:
                raise ConfigError(f"--output: {output} exists; choose another file or add --force "
                                  "to replace it") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return model
