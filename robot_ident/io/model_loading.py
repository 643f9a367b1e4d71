"""The model a parameter file describes: the URDF restricted to its joints, with its locked
joints, friction and armature options, springs (gravity balancers) or closures (closed
chains), checked against the actuators' joint kinds. Shared by every command, node and
demo that identifies or designs from a config."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigError
from ..estimation.pipeline import IdentificationConfig, identification_config
from ..mechanisms.closed_chain.config import closed_chain_model
from ..model.robot import RobotModel
from .config import load_config


def load_model(urdf, config, icfg: IdentificationConfig, package_dirs=()) -> RobotModel:
    """`urdf`: a path, a `model.urdf_text.XacroFile` or XML text; `package_dirs` (--package-dir)
    are searched for package:// meshes before the config's (`mesh_dirs`)."""
    from ..model.spring import spring_model  # the config's `springs:` (gravity balancers), if any
    model = closed_chain_model(urdf, config, icfg.friction, icfg.armature_nominal)   # its `closures:`, if any
    if model is None:
        model = spring_model(urdf, config.joints, icfg.locked_positions, icfg.friction, icfg.armature_nominal,
                             config=config, transmission=getattr(config, "transmission", None))
    config.actuators.check_joint_kinds({j: model.is_prismatic(j) for j in model.joint_names})
    model.mesh_dirs = tuple(str(d) for d in package_dirs) + mesh_dirs(config)
    return model


def mesh_dirs(config) -> tuple[str, ...]:
    """The config's `excitation.collision.package_dirs` (relative to the config file's folder):
    where the physical bounds find package:// meshes, as the collision checks do."""
    section = ((config.parameters.get("excitation") or {}).get("collision") or {}) \
        if isinstance(config.parameters, Mapping) else {}
    dirs = section.get("package_dirs") or [] if isinstance(section, Mapping) else []
    base = Path(config.source).parent if Path(str(config.source)).is_file() else Path(".")
    return tuple(str(d if Path(str(d)).is_absolute() else base / str(d)) for d in dirs if isinstance(d, str))


def closed_chain_from_file(urdf, config_path, node: str | None = None):
    """`closed_chain_model` for commands that do not otherwise read the data-source part of
    the parameter file (design, the excitation node): None when it names no closures."""
    import yaml

    try:
        with open(config_path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read parameter file {config_path}: {exc}") from exc
    found = any(isinstance(v, dict) and isinstance(v.get("ros__parameters"), dict)
                and v["ros__parameters"].get("closures") for v in doc.values()) if isinstance(doc, dict) else False
    if not found:
        return None
    cfg = load_config(config_path, node)
    icfg = identification_config(cfg.section("identification"))
    return closed_chain_model(urdf, cfg, icfg.friction, icfg.armature_nominal)
