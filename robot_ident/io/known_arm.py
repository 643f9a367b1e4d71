"""The arm's known model for payload identification: a previous result folder (base
parameters, friction, offsets; `robot-ident identify` wrote it) or a URDF's CAD values."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import ConfigError
from ..model.robot import FrictionOptions, RobotModel, read_urdf_text


@dataclass
class KnownArm:
    model: RobotModel
    source: str                                     # "result <dir>" or "URDF <file>"
    predict_from_regressor: Callable[[np.ndarray], np.ndarray]   # stacked standard regressor -> efforts
    urdf_xml: str                                   # the URDF the payload is added to
    knows_friction: bool                            # False: armature/friction must be estimated too

    def efforts(self, q, qd, qdd) -> np.ndarray:
        N = np.shape(np.atleast_2d(q))[0]
        return self.predict_from_regressor(self.model.regressor(q, qd, qdd)).reshape(N, self.model.n)


def arm_from_result(folder) -> KnownArm:
    from .results import load_result

    rdir = Path(folder)
    d, base, values, _ = load_result(rdir)
    urdf = rdir / "model.urdf"
    if not urdf.is_file():
        raise ConfigError(f"result folder {rdir} has no model.urdf (written by robot-ident identify)")
    try:
        fm = d["robot"]["friction_model"]
        blocks = set(fm["blocks"])
        friction = FrictionOptions("Ia" in blocks, "Fc" in blocks, "Fv" in blocks, "off" in blocks,
                                   float(fm["coulomb_velocity_scale"]))
        joints = d["robot"]["joints"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{rdir}/result.yaml: robot section incomplete: {exc}") from exc
    xml, _ = read_urdf_text(urdf)
    model = RobotModel(xml, joints, d["robot"].get("locked_positions") or {}, friction)
    if tuple(model.layout.names) != tuple(base.standard_names):
        raise ConfigError(f"{urdf} does not give the parameter layout of {rdir}/result.yaml")
    ident = rdir / "identified.urdf"
    out_xml = ident.read_text(encoding="utf-8") if ident.is_file() else xml
    values = np.asarray(values, float)

    def predict(Y):
        return base.regressor(Y) @ values

    return KnownArm(model, f"result {rdir}", predict, out_xml, True)


def arm_from_urdf(model: RobotModel) -> KnownArm:
    theta = model.nominal.copy()

    def predict(Y):
        return Y @ theta

    return KnownArm(model, f"URDF {model.urdf_label}", predict, model.urdf_xml, False)
