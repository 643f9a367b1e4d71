"""The result folder of `robot-ident identify` and of the identification node:
result.yaml, identified.urdf (estimators with standard parameters), model.urdf and
config.yaml for `validate`, and plots -- written as a unit (see io/staging.py)."""
from __future__ import annotations

from pathlib import Path

from ..data.signals import ProcessedData
from ..estimation import IdentificationResult
from ..estimation.validation import ValidationReport
from ..model.robot import RobotModel
from ..util.atomic import atomic_write_text
from .effort_plot import combined_with_holdout, plot_efforts
from .results import result_to_dict, write_identified_urdf, write_result_yaml
from .samples import write_run_samples
from .staging import StagedFolder, check_output_folder

RESULT_KIND = "result"


def units(model: RobotModel) -> list[str]:
    return ["N" if model.is_prismatic(j) else "N·m" for j in model.joint_names]


def check_result_folder(out) -> Path:
    """Before any work: `out` can become a result folder (not a file, not below a file,
    writable, and not a folder robot_ident did not write as a result)."""
    return check_output_folder(out, RESULT_KIND)


def write_result_folder(out: Path, model: RobotModel, result: IdentificationResult,
                        validation: ValidationReport | None, ident_data: ProcessedData, extra: dict,
                        config_path=None, plots: bool = True,
                        valid_data: ProcessedData | None = None) -> Path | None:
    """The result folder of `identify` (and of the identification node): result.yaml,
    identified.urdf (estimators with standard parameters), model.urdf and config.yaml for
    `validate`, plots, and samples.npz (the processed data, decimated, for the report).
    The folder is written aside and swapped in whole: an older result is replaced, never
    mixed; an interrupted write leaves the old folder as it was. A model the data do not
    determine (``result.quality``, see estimation/conditioning.py) is marked in
    identified.urdf's comment. Returns identified.urdf's path."""
    out = Path(out)
    config_text = Path(config_path).read_text(encoding="utf-8") if config_path is not None else None
    with StagedFolder(out, RESULT_KIND) as tmp:
        write_result_yaml(tmp, result_to_dict(result, model, validation, extra))
        warn = None
        quality = result.quality
        if quality is not None and not quality.get("good", True):
            from ..estimation.conditioning import quality_reasons
            warn = "NOT A GOOD MODEL: " + "; ".join(quality_reasons(quality))
        identified = write_identified_urdf(tmp, model, result, warning=warn)
        atomic_write_text(tmp / "model.urdf", model.urdf_xml)
        if config_text is not None:
            atomic_write_text(tmp / "config.yaml", config_text)
        pred = result.predict(model, ident_data.q, ident_data.qd, ident_data.qdd)
        write_run_samples(tmp, model, result, ident_data, valid_data, pred)
        if plots:
            plot_efforts(tmp / "identification_efforts.png", ident_data.t, ident_data.effort_raw, pred,
                         model.joint_names, f"Identification ({result.method}): measured vs predicted",
                         units(model))
            if validation is not None:
                plot_efforts(tmp / "validation_efforts.png", validation.t, validation.measured,
                             validation.predicted, model.joint_names, "Held-out data: measured vs predicted",
                             units(model))
                held_out_of_the_same = not ((extra.get("source") or {}).get("validation_inputs"))
                both = combined_with_holdout(ident_data.t, ident_data.effort_raw, pred, validation.t,
                                             validation.measured, validation.predicted) \
                    if held_out_of_the_same else None
                if both is not None:
                    plot_efforts(tmp / "efforts.png", *both[:3], model.joint_names,
                                 f"Measured vs predicted ({result.method}); shaded: held out of the identification",
                                 units(model), held_out=both[3])
    return out / identified.name if identified is not None else None
