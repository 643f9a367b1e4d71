"""Identification from recordings -- rosbag2 folders and CSV/NPZ tables, one or several
-- into a result folder (the `identify` command), and the Python API from arrays. Both
run the one pipeline of estimation/flow.py.

Every recording gives its own segments (nothing is filtered or interpolated across a
recording boundary or a gap). Hold-out (`data.holdout`): whole recordings given as
validation inputs, or a time window / every k-th block / the last fraction of the
identification inputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..data.holdout import Holdout
from ..errors import ConfigError
from ..estimation import IdentificationResult
from ..estimation.validation import ValidationReport
from ..model.robot import RobotModel
from ..util.progress import Progress


@dataclass
class IdentifyOutcome:
    model: RobotModel
    result: IdentificationResult
    validation: ValidationReport | None
    output: Path | None
    summary: str                               # synchronisation, skipped segments, hold-out, cutoff
    warnings: list = field(default_factory=list)   # 'warning: ...' lines (also in result.yaml)
    settings: object = None                    # the IdentificationSettings used (cutoff included)
    valid_data: object = None                  # the validation samples, decimated (as in samples.npz)
    cutoff_note: str = ""                      # the filter cutoff: set, chosen from the data, or why not


def print_stderr(line: str) -> None:
    """The default `warn` of the offline paths: a warning line on stderr."""
    import sys
    print(line, file=sys.stderr)


def identify_inputs(inputs: Sequence[str], urdf, config_path, output, *, validate_inputs: Sequence[str] = (),
                    method: str | None = None, holdout: Holdout | float | None = None,
                    cutoff_hz: float | None = None, force_auto_cutoff: bool = False,
                    progress: Progress | None = None, plots: bool = True, force: bool = False,
                    warn=None, package_dirs: Sequence[str] = ()) -> IdentifyOutcome:
    """Identify from `inputs` (bags and/or tables), validate on `validate_inputs` and/or the
    `holdout` of the inputs (a `Holdout` or a fraction), write the result folder (None:
    nothing written). `holdout` None: the config's ``identification.holdout`` fraction, or
    nothing when validation inputs are given. `cutoff_hz` None: the config's
    ``identification.filter.cutoff_hz``, else (or with `force_auto_cutoff`, or ``cutoff_hz:
    auto`` in the config) chosen from the data (`estimation.auto_cutoff`). The output folder
    is checked first; the input checks (`estimation.input_checks`) run on every
    identification input before identifying -- their ``warning:`` lines go to `warn`
    (default: stderr), an implausible input is refused unless `force`. A model the data
    do not determine is marked in result.yaml and identified.urdf. `package_dirs`: where the
    physical bounds look for package:// meshes before the config's
    ``excitation.collision.package_dirs`` (util/package_paths.py)."""
    from ..estimation.auto_cutoff import strip_auto_cutoff
    from ..estimation.flow import identify_sources
    from ..estimation.pipeline import identification_config
    from ..io.config import load_config
    from ..io.model_loading import load_model
    from ..io.result_folder import check_result_folder, write_result_folder
    from ..io.staging import release_output

    progress = progress or Progress(quiet=True)
    if not inputs:
        raise ConfigError("give at least one recording to identify from (--bag or --table)")
    same = sorted({str(v) for v in validate_inputs if any(Path(v).resolve() == Path(i).resolve() for i in inputs)})
    if same:
        raise ConfigError(f"validation recording {same[0]} is also an identification input: its ratios would be "
                          "1.000 by construction; validate on another recording (or a hold-out of this one)")
    if output is not None:
        check_result_folder(output)                   # before any work
    try:                 # the output's lock (taken by the check) is given back however this ends
        cfg = load_config(config_path)
        section = dict(cfg.section("identification"))
        if method is not None:
            section["method"] = method
        if isinstance(holdout, (int, float)):
            section["holdout"] = float(holdout)
            holdout = None
        section, auto = strip_auto_cutoff(section, cutoff_hz, force_auto_cutoff)
        icfg = identification_config(section)
        model = load_model(urdf, cfg, icfg, package_dirs)
        from ..mechanisms.closed_chain.config import closures_source
        source = {"config": str(config_path), **closures_source(model, cfg, config_path)}
        o = identify_sources(list(inputs), cfg, icfg, model, holdout=holdout, validate_sources=list(validate_inputs),
                             progress=progress, auto_cutoff=auto, force=force, warn=warn or print_stderr, plots=plots,
                             source=source)
        if output is not None:
            with progress.stage("write"):
                write_result_folder(Path(output), model, o.result, o.validation, o.plot_data, o.record, config_path,
                                    plots, valid_data=o.valid_data)
    finally:
        if output is not None:
            release_output(output)
    return IdentifyOutcome(model, o.result, o.validation, None if output is None else Path(output), o.summary,
                           o.warnings, o.settings, o.valid_data, o.record["source"]["filter_cutoff_note"])


def arrays_config(model: RobotModel):
    """The config of recordings given as arrays: the model's joints, joint efforts."""
    from ..io.config import config_from_parameters
    return config_from_parameters({"joints": list(model.joint_names), "current_source": "effort"}, "<arrays>")


def arrays_input(model: RobotModel, t, q, effort, qd=None, label: str = "<arrays>"):
    """Arrays (columns in `model.joint_names` order) as an input of the pipeline."""
    from ..data.joint_stream import JointStream
    from ..data.processing import StreamsInput
    fields = {"position": np.asarray(q, float)}
    if qd is not None:
        fields["velocity"] = np.asarray(qd, float)
    names, t = tuple(model.joint_names), np.asarray(t, float)
    return StreamsInput(JointStream(f"{label} (states)", t, names, fields),
                        JointStream(f"{label} (effort)", t, names, {"effort": np.asarray(effort, float)}), label)


def identify_arrays(model: RobotModel, t, q, effort, qd=None, *, settings=None, holdout: Holdout | None = None,
                    validation: tuple | None = None, force: bool = False,
                    warn=None) -> tuple[IdentificationResult, ValidationReport | None]:
    """The Python API from arrays: time (N,), positions (N, n), joint efforts (N, n) and
    optional velocities, columns in `model.joint_names` order, on a uniform time grid.
    `validation`: optional ``(t, q, effort[, qd])`` of another recording. The input checks
    run as for `identify`: their ``warning:`` lines go to `warn` (default: none), an
    implausible input raises `PlausibilityError` unless `force`. See docs/user-guide.md."""
    from ..estimation.flow import identify_sources
    from ..estimation.pipeline import IdentificationConfig, IdentificationSettings

    settings = settings or IdentificationSettings(method="wls")
    vsrc = []
    if validation is not None:
        vt, vq, ve, *vqd = validation
        vsrc = [arrays_input(model, vt, vq, ve, vqd[0] if vqd else None, "<validation arrays>")]
    o = identify_sources([arrays_input(model, t, q, effort, qd)], arrays_config(model),
                         IdentificationConfig(settings, model.friction), model, holdout=holdout or Holdout(),
                         validate_sources=vsrc, plots=False, force=force, warn=warn)
    return o.result, o.validation
