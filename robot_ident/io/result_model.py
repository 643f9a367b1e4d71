"""A result folder's model, ready to predict: result.yaml read and checked, the config and
URDF it was identified with (or others of the same layout), the model with the result's
parameter layout (springs, closed chains, couplings). Shared by validate, monitor and the
monitor node."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..estimation.pipeline import identification_config
from ..model.robot import FrictionOptions, RobotModel, read_urdf_text
from .results import load_result


def result_robot(d: dict, path) -> tuple[list, dict, FrictionOptions, dict]:
    """The robot section of a result.yaml, checked: (joints, locked, friction, raw RMS)."""
    try:
        robot = d["robot"]
        joints = [str(j) for j in robot["joints"]]
        fm = robot["friction_model"]
        blocks = set(fm["blocks"])
        friction = FrictionOptions("Ia" in blocks, "Fc" in blocks, "Fv" in blocks, "off" in blocks,
                                   float(fm["coulomb_velocity_scale"]))
        locked = {str(k): float(v) for k, v in (robot.get("locked_positions") or {}).items()}
        raw = {j: float(d["settings"]["raw_residual_rms"][j]) for j in joints}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"key {exc.args[0]!r} is missing" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"{path} is not a complete robot_ident result ({what}); "
                          "re-run robot-ident identify") from None
    return joints, locked, friction, raw


@dataclass
class ResultModel:
    """A result folder's model, ready to predict: its result.yaml, base parameters and
    values, config, the model with the result's layout, and the in-sample raw RMS per joint."""

    doc: dict
    base: object
    values: np.ndarray
    cfg: object
    model: RobotModel
    raw_rms: dict
    icfg: object
    config_path: Path

    def standard_parameters(self) -> np.ndarray:
        """A standard vector with the result's base values: the URDF's values where the data
        determine nothing (any such vector predicts the same efforts)."""
        nominal = self.model.nominal
        return nominal + self.base.standard_from_base(np.asarray(self.values, float) - self.base.project(nominal))


def load_result_model(rdir, urdf=None, config_path=None) -> ResultModel:
    """The model of result folder `rdir` (URDF and config default to its model.urdf and
    config.yaml): a config with other joints, or a URDF of another parameter layout, is a
    one-line error."""
    from .config import load_config
    rdir = Path(rdir)
    d, base, values, _ = load_result(rdir)
    joints, locked, friction, raw = result_robot(d, rdir / "result.yaml")
    urdf = urdf or rdir / "model.urdf"
    config_path = config_path or rdir / "config.yaml"
    cfg = load_config(config_path)
    from ..estimation.auto_cutoff import strip_auto_cutoff
    # a config whose cutoff was 'auto': the result's source says which cutoff was chosen (below)
    icfg = identification_config(strip_auto_cutoff(cfg.section("identification"))[0])
    if set(cfg.joints) != set(joints):
        missing = [j for j in joints if j not in cfg.joints]
        extra = [j for j in cfg.joints if j not in joints]
        raise ConfigError(f"config {config_path} lists joints {', '.join(cfg.joints)}; the result identifies "
                          f"{', '.join(joints)}" + (f" (missing: {', '.join(missing)})" if missing else "")
                          + (f" (not in the result: {', '.join(extra)})" if extra else ""))
    xml, _ = read_urdf_text(urdf)
    from ..mechanisms.closed_chain.config import closed_chain_model
    from ..model.spring import spring_model
    model = closed_chain_model(xml, cfg, friction, path=d.get("source", {}).get("closures")) \
        if cfg.parameters.get("closures") else None
    if model is None:
        model = spring_model(xml, joints, locked, friction, config=cfg, transmission=cfg.transmission)
    if tuple(model.layout.names) != tuple(base.standard_names):
        raise ConfigError(f"URDF {urdf} does not give the parameter layout of result {rdir}/result.yaml "
                          "(another robot?)")
    return ResultModel(d, base, np.asarray(values, float), cfg, model, raw, icfg, Path(config_path))
