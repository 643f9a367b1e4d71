"""What the report reads from a folder: result.yaml (identification), validation.yaml
(`robot-ident validate`), samples.npz / validation_samples.npz (the processed data),
the CAD parameters (model.urdf, else the URDF result.yaml names) and optionally a
designed trajectory file. Every piece may be missing; the page says what it lacks."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import ConfigError
from ..io.samples import FILE_NAME as SAMPLES_FILE
from ..io.samples import VALIDATION_FILE as VALIDATION_SAMPLES_FILE
from ..io.samples import Samples, read_samples


@dataclass
class ReportInputs:
    folder: Path
    result: dict | None = None              # result.yaml
    validation: dict | None = None          # validation.yaml
    samples: Samples | None = None          # samples.npz (identify, demo)
    validation_samples: Samples | None = None   # validation_samples.npz (validate)
    cad: dict | None = None                 # CAD standard parameters by name
    notes: list = field(default_factory=list)   # what could not be read, in words
    trajectory: dict | None = None
    trajectory_path: Path | None = None

    @property
    def label(self) -> str:
        return self.folder.name or str(self.folder)

    @property
    def joints(self) -> list:
        if self.result:
            return list(self.result["robot"]["joints"])
        if self.validation_samples is not None:
            return list(self.validation_samples.joints)
        if self.validation:
            return list(self.validation.get("joints") or {})
        return []

    @property
    def units(self) -> list:
        for s in (self.samples, self.validation_samples):
            if s is not None:
                return list(s.units)
        return ["N·m"] * len(self.joints)


def _yaml(path: Path) -> dict:
    from ..util.yaml_strict import safe_load_strict, yaml_error_line
    try:
        d = safe_load_strict(path.read_text(encoding="utf-8"))   # duplicate keys refused
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {str(exc).splitlines()[0]}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot read {path}: not valid YAML ({yaml_error_line(exc)}), a truncated or corrupt "
                          "file") from exc
    if not isinstance(d, dict):
        raise ConfigError(f"{path} is not a mapping (empty or corrupt file)")
    return d


def _cad_values(folder: Path, result: dict) -> tuple[dict | None, str | None]:
    """CAD standard parameters from folder/model.urdf or the URDF result.yaml names."""
    from ..model.robot import FrictionOptions, RobotModel, read_urdf_text
    robot = result["robot"]
    candidates = [folder / "model.urdf"]
    label = str(robot.get("urdf", ""))
    if label and not label.lstrip().startswith("<"):
        candidates.append(Path(label))
    src = next((p for p in candidates if p.is_file()), None)
    if src is None:
        return None, "no CAD model (model.urdf) in the folder: CAD comparison left out"
    try:
        fm = robot.get("friction_model") or {}
        blocks = set(fm.get("blocks") or [])
        friction = FrictionOptions("Ia" in blocks, "Fc" in blocks, "Fv" in blocks, "off" in blocks,
                                   float(fm.get("coulomb_velocity_scale", 0.01)))
        xml, _ = read_urdf_text(src)
        model = RobotModel(xml, robot["joints"], robot.get("locked_positions") or {}, friction)
    except Exception as exc:   # noqa: BLE001 - any failure only drops the CAD comparison, said on the page
        return None, f"CAD model {src} could not be loaded ({str(exc).splitlines()[0]}): CAD comparison left out"
    return {n: float(v) for n, v in zip(model.layout.names, model.nominal)}, None


def load_inputs(folder, trajectory=None) -> ReportInputs:
    """Everything the report uses from a result or validation-only folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"report: {folder} is not a folder")
    inp = ReportInputs(folder)
    if (folder / "result.yaml").is_file():
        inp.result = _yaml(folder / "result.yaml")
        from ..io.results import check_complete
        check_complete(inp.result, folder / "result.yaml")      # a file cut short is an error
        if not isinstance(inp.result.get("robot"), dict) or "joints" not in inp.result["robot"] \
                or not isinstance(inp.result.get("base_parameters"), list):
            raise ConfigError(f"{folder / 'result.yaml'} is not a robot_ident result (no robot.joints or "
                              f"base_parameters)")
    if (folder / "validation.yaml").is_file():
        inp.validation = _yaml(folder / "validation.yaml")
        if not isinstance(inp.validation.get("joints"), dict):
            raise ConfigError(f"{folder / 'validation.yaml'} has no per-joint table (joints:)")
    if inp.result is None and inp.validation is None:
        raise ConfigError(f"report: {folder} has neither result.yaml nor validation.yaml")
    inp.samples = read_samples(folder)
    inp.validation_samples = read_samples(folder, VALIDATION_SAMPLES_FILE)
    for s, name in ((inp.samples, SAMPLES_FILE), (inp.validation_samples, VALIDATION_SAMPLES_FILE)):
        if s is None:
            continue
        if inp.result is None and set(s.joints) != set(inp.validation["joints"]):
            raise ConfigError(f"{folder / name} holds joints {list(s.joints)}, validation.yaml "
                              f"{list(inp.validation['joints'])}")
        if list(s.joints) != inp.joints:
            raise ConfigError(f"{folder / name} holds joints {list(s.joints)}, the result {inp.joints}")
    if inp.samples is None and inp.result is not None:
        inp.notes.append(f"no {SAMPLES_FILE} in the folder (result written before the report kept its data): "
                         "friction fit, error histograms and coverage left out")
    if inp.result is not None:
        inp.cad, note = _cad_values(folder, inp.result)
        if note:
            inp.notes.append(note)
    if trajectory is not None:
        from ..excitation.trajectory_file import load_trajectory
        tpath = Path(trajectory)
        load_trajectory(tpath)          # a clear error when it is not a trajectory file
        inp.trajectory, inp.trajectory_path = _yaml(tpath), tpath
    return inp
