"""The options every command that reads a URDF shares: ``--xacro-arg`` (and ``--package-dir``
for the commands that read meshes)."""
from __future__ import annotations


def add_xacro_arg(p) -> None:
    p.add_argument("--xacro-arg", action="append", default=[], metavar="NAME:=VALUE",
                   help="an argument of a xacro --urdf, as on xacro's command line (other arguments keep their "
                        "defaults); repeatable")


def add_package_dir(p, what: str) -> None:
    p.add_argument("--package-dir", action="append", default=[], metavar="DIR",
                   help=f"folder holding the packages of package:// meshes (<DIR>/<pkg>/...) for {what}; "
                        "repeatable, searched before excitation.collision.package_dirs, the folders above the "
                        "URDF, ROS_PACKAGE_PATH and the ament index")


def urdf_of(args):
    """The URDF the command passes on: --urdf, expanded with --xacro-arg when given (a
    malformed argument, or one without --urdf, is a one-line error)."""
    from ...errors import ConfigError
    from ...model.urdf_text import urdf_source, xacro_arguments
    mappings = xacro_arguments(getattr(args, "xacro_arg", None))
    if mappings and getattr(args, "urdf", None) is None:
        raise ConfigError("--xacro-arg needs --urdf (a xacro file)")
    return urdf_source(getattr(args, "urdf", None), mappings)
