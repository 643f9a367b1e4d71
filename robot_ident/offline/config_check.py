"""A whole parameter file through every section's validator for one URDF, as the commands
read it: the data source (io/config.py), `identification:`, the model it describes (springs,
closures, the actuators' joint kinds), `excitation:` (its per-joint keys against the
joints), `simulation:` and `payload:` (when given). `robot-ident init` checks the file it
writes with it; the tests check that a misspelt key anywhere is refused."""
from __future__ import annotations

import os

from ..errors import ConfigError


def check_config(config_path: str | os.PathLike, urdf):
    """The model the file describes; ConfigError/ModelError naming the file and the key at fault."""
    from ..estimation.auto_cutoff import strip_auto_cutoff
    from ..estimation.payload import payload_config
    from ..estimation.pipeline import identification_config
    from ..excitation.config import load_excitation_config
    from ..io.config import load_config
    from ..io.model_loading import load_model
    from ..sim.config import simulation_config

    label = str(config_path)
    cfg = load_config(config_path)                         # its errors name the file
    prefix = f"{cfg.node_name}.ros__parameters" if cfg.node_name else ""
    try:
        icfg = identification_config(strip_auto_cutoff(cfg.section("identification"))[0],
                                     f"{prefix}.identification" if prefix else "identification")
        model = load_model(urdf, cfg, icfg)
        excitation = load_excitation_config(config_path, cfg.node_name or "robot_ident")
        excitation.design_spec(tuple(model.joint_names))
        simulation_config(cfg.section("simulation"), model, f"{prefix}.simulation" if prefix else "simulation")
        if cfg.section("payload"):
            payload_config(cfg.section("payload"), model, f"{prefix}.payload" if prefix else "payload")
    except ConfigError as exc:
        if str(exc).startswith(label):
            raise
        raise ConfigError(f"{label}: {exc}") from None
    return model


def check_unread_sections(config_path: str | os.PathLike, model, node_name: str | None = None) -> None:
    """For a command that reads one part of the file (`design`: the excitation): the other
    sections it has -- identification, simulation, payload -- through their validators, so
    that a misspelt key is named now rather than silently ignored until a later command.
    The data source (current_source, actuators) is not required here."""
    from ..estimation.auto_cutoff import strip_auto_cutoff
    from ..estimation.payload import payload_config
    from ..estimation.pipeline import identification_config
    from ..io.config import node_parameters
    from ..sim.config import simulation_config
    from ..util.yaml_strict import safe_load_strict

    label = str(config_path)
    with open(os.fspath(config_path), encoding="utf-8") as fh:
        doc = safe_load_strict(fh)
    chosen, params = node_parameters(doc, label, node_name if isinstance(doc, dict) and node_name in doc else None)
    prefix = f"{chosen}.ros__parameters"
    try:
        identification_config(strip_auto_cutoff(params.get("identification") or {})[0], f"{prefix}.identification")
        simulation_config(params.get("simulation"), model, f"{prefix}.simulation")
        if params.get("payload"):
            payload_config(params["payload"], model, f"{prefix}.payload")
    except ConfigError as exc:
        raise ConfigError(f"{label}: {exc}") from None
