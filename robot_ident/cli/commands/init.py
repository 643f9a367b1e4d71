"""`robot-ident init`: a commented parameter file for a URDF, to start from."""
from __future__ import annotations

from ...errors import ConfigError
from ._urdf import add_xacro_arg, urdf_of

DEFAULT_OUTPUT = "robot_ident.yaml"


def add_parser(sub):
    p = sub.add_parser("init", help="write a commented parameter file for a URDF",
                       description="Writes a ROS 2 parameter file for the URDF's robot: its movable joints in "
                                   "order (their limits as comments; a URDF <mimic> joint and its leader are "
                                   "left out, locked, and named in a comment), current_source: effort (the JointState "
                                   "effort is the joint effort, as ros2_control reports it), a commented-out "
                                   "actuator per joint whose values are to be filled in for motor currents, and "
                                   "every other section with its defaults, commented out, with units and "
                                   "meanings (docs/config.md). The file is checked as identify reads it before it "
                                   "is written; an existing file is never replaced without --force.")
    p.add_argument("--urdf", required=True, help="robot URDF (or xacro)")
    add_xacro_arg(p)
    p.add_argument("--output", default=DEFAULT_OUTPUT, metavar="FILE",
                   help=f"parameter file to write (default: {DEFAULT_OUTPUT})")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists (kept as FILE.bak)")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    urdf = urdf_of(args)
    out = Path(args.output)
    if out.is_dir():
        raise ConfigError(f"--output: {out} is a folder; give a file name")
    if out.exists() and not args.force:
        raise ConfigError(f"--output: {out} exists; choose another file or add --force to replace it")
    if not out.parent.is_dir():
        raise ConfigError(f"--output: folder {out.parent} not found")
    from ..config_template import write_init_file
    model = write_init_file(urdf, out, replace=args.force)
    print(f"wrote {out}: {len(model.joint_names)} joints ({', '.join(model.joint_names)}), current_source effort; "
          "fill in the actuators for motor currents (docs/config.md lists every key)")
    return 0
