"""The result folder of `robot-ident identify` and of the identification node:
result.yaml, identified.urdf (estimators with standard parameters), model.urdf and
config.yaml for `validate`, and plots."""
from __future__ import annotations

from pathlib import Path

from ..data.signals import ProcessedData
from ..estimation import IdentificationResult
from ..estimation.validation import ValidationReport
from ..model.robot import RobotModel
from ..report.html import plot_efforts
from .atomic import atomic_write_text
from .samples import write_run_samples
from .results import result_to_dict, write_identified_urdf, write_result_yaml


def units(model: RobotModel) -> list[str]:
    return ["N" if model.is_prismatic(j) else "N·m" for j in model.joint_names]


def write_result_folder(out: Path, model: RobotModel, result: IdentificationResult,
                        validation: ValidationReport | None, ident_data: ProcessedData, extra: dict,
                        config_path=None, plots: bool = True,
                        valid_data: ProcessedData | None = None) -> Path | None:
    """The result folder of `identify` (and of the identification node): result.yaml,
    identified.urdf (estimators with standard parameters), model.urdf and config.yaml for
    `validate`, plots, and samples.npz (the processed data, decimated, for the report).
    Every file is written atomically. Returns identified.urdf's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_result_yaml(out, result_to_dict(result, model, validation, extra))
    identified = write_identified_urdf(out, model, result)
    atomic_write_text(out / "model.urdf", model.urdf_xml)
    if config_path is not None:
        atomic_write_text(out / "config.yaml", Path(config_path).read_text(encoding="utf-8"))
    pred = result.predict(model, ident_data.q, ident_data.qd, ident_data.qdd)
    write_run_samples(out, model, result, ident_data, valid_data, pred)
    if plots:
        plot_efforts(out / "identification_efforts.png", ident_data.t, ident_data.effort_raw, pred,
                     model.joint_names, f"Identification ({result.method}): measured vs predicted", units(model))
        if validation is not None:
            plot_efforts(out / "validation_efforts.png", validation.t, validation.measured, validation.predicted,
                         model.joint_names, "Held-out data: measured vs predicted", units(model))
    return identified
