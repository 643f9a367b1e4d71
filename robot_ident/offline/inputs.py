"""Identification from several recordings -- rosbag2 folders and CSV/NPZ tables -- with
a chosen hold-out and the filter cutoff chosen from the data when the config leaves
it unset. The `identify` command uses it; `bag_workflow.identify_bag` stays the
single-bag path of the identification node.

Every recording gives its own segments (nothing is filtered or interpolated across a
recording boundary or a gap). Hold-out (`data.holdout`): whole recordings given as
validation inputs, or a time window / every k-th block / the last fraction of the
identification inputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from ..data.holdout import Holdout, Part, holdout_flags, split_by_flags
from ..data.signals import ProcessedData, Recording, concatenate, process
from ..data.table import TABLE_SUFFIXES
from ..errors import ConfigError, SignalError
from ..estimation import IdentificationResult
from ..estimation.auto_cutoff import settings_with_data_cutoff, strip_auto_cutoff
from ..estimation.pipeline import base_parameters, identification_config, identify, validate_result
from ..estimation.validation import ValidationReport, not_validated_lines
from ..io.model_loading import load_model
from ..io.result_folder import write_result_folder
from ..model.robot import RobotModel
from ..util.progress import Progress


@dataclass
class LoadedInput:
    path: str
    role: str                               # "identify" or "validate"
    segments: list[Recording]               # t: seconds from the recording's first sample
    summary: str
    report: object = None                   # its sync.SyncReport (lag, joints not identified, ...)


@dataclass
class InputsOutcome:
    model: RobotModel
    result: IdentificationResult
    validation: ValidationReport | None
    output: Path
    summary: str
    cutoff_hz: float
    cutoff_note: str
    inputs: list[LoadedInput] = field(default_factory=list)
    settings: object = None                   # the IdentificationSettings used (cutoff included)
    ident_data: ProcessedData | None = None
    valid_data: ProcessedData | None = None
    warnings: list = field(default_factory=list)   # 'warning: ...' lines (also in result.yaml)


def _is_table(path) -> bool:
    return Path(path).suffix.lower() in TABLE_SUFFIXES


def load_input(path, cfg, role: str = "identify") -> LoadedInput:
    """Read one bag or table through the config (topics or columns, actuators, coupling,
    sync), with segment times re-based on the recording's first synchronised sample."""
    if _is_table(path):
        from ..data.table import read_table_from_config
        sync = read_table_from_config(path, cfg)
    else:
        from ..data.bag import read_recordings_from_config
        if not Path(path).exists():
            raise SignalError(f"bag not found: {path}")
        sync = read_recordings_from_config(path, cfg)
    segs = [s.reorder(cfg.joints) for s in sync.segments]
    starts = [s.meta.get("stamp_origin_ns", 0) * 1e-9 + s.t[0] for s in segs]
    t0 = min(starts)
    out = []
    for s, st in zip(segs, starts):
        origin = s.meta.get("stamp_origin_ns", 0) * 1e-9
        out.append(replace(s, t=s.t + (origin - t0)))
    return LoadedInput(str(path), role, out, sync.report.summary(), sync.report)


def _process_all(inputs: Sequence[LoadedInput], filt) -> tuple[list[tuple[Recording, Part | None]], list[str]]:
    """Every segment with its processed `Part` (None when too short to process)."""
    pairs, skipped = [], []
    for inp in inputs:
        for seg in inp.segments:
            try:
                pairs.append((seg, Part(process(seg, filt), inp.path)))
            except SignalError as exc:
                pairs.append((seg, None))
                skipped.append(f"{inp.path}: segment {seg.t[0]:.3f}-{seg.t[-1]:.3f} s skipped: {exc}")
    return pairs, skipped


def identify_inputs(inputs: Sequence[str], urdf, config_path, output, *, validate_inputs: Sequence[str] = (),
                    method: str | None = None, holdout: Holdout | None = None, cutoff_hz: float | None = None,
                    force_auto_cutoff: bool = False, progress: Progress | None = None, plots: bool = True,
                    force: bool = False, warn=None) -> InputsOutcome:
    """Identify from `inputs` (bags and/or tables), validate on `validate_inputs` and/or the
    `holdout` of the inputs, write the result folder. `holdout` None: the config's
    ``identification.holdout`` fraction, or nothing when validation inputs are given.
    `cutoff_hz` None: the config's ``identification.filter.cutoff_hz``, else (or with
    `force_auto_cutoff`, or ``cutoff_hz: auto`` in the config) chosen from the data
    (`estimation.auto_cutoff`). The output folder is checked first; the plausibility
    checks (`estimation.recording_checks`) run on every identification input
    before identifying -- their ``warning:`` lines go to `warn` (default: stderr), an
    implausible input is refused unless `force`."""
    from ..estimation.conditioning import quality_warnings
    from ..estimation.gain_check import GainCheck
    from ..estimation.input_checks import recording_findings, spiky_joints, velocity_settings
    from ..estimation.plausibility import check_cad, enforce, judge_gains
    from ..io.config import load_config
    from ..io.result_folder import check_result_folder

    progress = progress or Progress(quiet=True)
    warn = warn or _stderr
    if not inputs:
        raise ConfigError("give at least one recording to identify from (--bag or --table)")
    same = sorted({str(v) for v in validate_inputs if any(Path(v).resolve() == Path(i).resolve() for i in inputs)})
    if same:
        raise ConfigError(f"validation recording {same[0]} is also an identification input: its ratios would be "
                          "1.000 by construction; validate on another recording (or a hold-out of this one)")
    check_result_folder(output, force)                   # before any work
    cfg = load_config(config_path)
    section = dict(cfg.section("identification"))
    if method is not None:
        section["method"] = method
    section, auto = strip_auto_cutoff(section, cutoff_hz, force_auto_cutoff)
    icfg = identification_config(section)
    if holdout is None:
        holdout = Holdout() if validate_inputs else Holdout(fraction=icfg.holdout)
    model = load_model(urdf, cfg, icfg)
    settings = icfg.settings

    with progress.stage("read"):
        loaded = [load_input(p, cfg, "identify") for p in inputs]
        loaded += [load_input(p, cfg, "validate") for p in validate_inputs]
    ident_inputs = [x for x in loaded if x.role == "identify"]
    valid_inputs = [x for x in loaded if x.role == "validate"]
    findings, lagging = check_cad(model, settings.method), []
    for x in ident_inputs:
        found, lags = recording_findings(model, x.segments, x.report, settings.method, cfg.joint_states_topic,
                                         cfg.current_topic, cfg.effort_field, label=x.path if len(inputs) > 1 else "",
                                         velocity=settings.measured_velocity)
        findings += found
        lagging += lags
    settings = velocity_settings(settings, lagging)

    with progress.stage("process"):
        pairs, skipped = _process_all(ident_inputs, settings.filter)
        parts = [p for _, p in pairs if p is not None]
        if not parts:
            raise SignalError("no usable segment in the identification inputs ("
                              + "; ".join(skipped or [x.summary for x in ident_inputs]) + ")")
        flags = holdout_flags(parts, holdout)

    base = choice = None
    cutoff_note = f"filter cutoff {settings.filter.cutoff_hz:g} Hz (set)"
    if auto:
        with progress.stage("choose cutoff"):
            base = base_parameters(model, settings)
            recs = [seg for seg, p in pairs if p is not None]     # aligned with parts and flags
            settings, cutoff_note, choice = settings_with_data_cutoff(model, recs, settings,
                                                                      [~f for f in flags], base)
        if choice is not None:
            with progress.stage("process"):
                parts = [Part(process(seg, settings.filter), p.source) for seg, p in pairs if p is not None]

    gains = GainCheck(model)
    for p in parts:
        gains.add(p.data)
    findings += judge_gains(gains.slopes(), skip=spiky_joints(findings), tool=gains.tool())
    warnings = [f.line() for f in findings]
    for line in warnings:
        warn(line)
    enforce(findings, force)

    ident_pieces, valid_pieces = split_by_flags(parts, flags)
    vpairs, vskipped = _process_all(valid_inputs, settings.filter)
    skipped += vskipped
    valid_pieces += [p.data for _, p in vpairs if p is not None]
    ident_data = concatenate(ident_pieces)
    valid_data = concatenate(valid_pieces) if valid_pieces else None

    with progress.stage("identify"):
        result = identify(model, ident_data, settings, base)
    if result.quality is not None:
        for line in quality_warnings(result.quality):
            warn(line)
            warnings.append(line)
    validation = None
    if valid_data is not None and valid_data.n_samples > 0:
        with progress.stage("validate"):
            validation = validate_result(result, model, valid_data, settings)
        for line in not_validated_lines(validation) + _other_recordings(model, result, vpairs):
            warn(line)
            warnings.append(line)

    summary_lines = []
    for x in loaded:
        summary_lines.append(f"{x.role} {x.path}: " + x.summary.replace("\n", "\n  "))
    summary_lines += skipped
    summary_lines.append(f"held out: {holdout.describe()}" + (
        f" + {len(valid_inputs)} validation recording(s)" if valid_inputs else ""))
    summary_lines.append(cutoff_note)
    summary = "\n".join(summary_lines)
    out = Path(output)
    with progress.stage("write"):
        extra = {"source": {"inputs": [str(p) for p in inputs], "validation_inputs": [str(p) for p in validate_inputs],
                            "config": str(config_path), "holdout": holdout.describe(),
                            "filter_cutoff_hz": float(settings.filter.cutoff_hz),
                            "filter_cutoff_chosen_from_data": bool(auto and choice is not None),
                            "filter_cutoff_note": cutoff_note,
                            "use_measured_velocity": bool(settings.filter.use_measured_velocity),
                            "synchronisation": "\n".join(f"{x.path}: {x.summary}" for x in loaded)},
                 "input_checks": {"warnings": warnings, "forced": bool(force)}}
        from ..mechanisms.closed_chain.config import closures_source
        extra["source"].update(closures_source(model, cfg, config_path))
        write_result_folder(out, model, result, validation, ident_data, extra, config_path, plots,
                            valid_data=valid_data, force=force)
    return InputsOutcome(model, result, validation, out, summary, float(settings.filter.cutoff_hz), cutoff_note,
                         list(loaded), settings, ident_data, valid_data, warnings)


def _other_recordings(model, result, vpairs) -> list[str]:
    """Validation recordings whose efforts do not follow the identified model (slope of the
    measured on the predicted efforts outside [0.67, 1.5] where it explains them): another
    robot's recording, or another torque constant or direction -- its ratios would measure
    that, not the model."""
    from ..estimation.gain_check import gain_slopes
    from ..estimation.plausibility import off_prediction
    out = []
    by_file: dict = {}
    for _, part in vpairs:
        if part is not None:
            by_file.setdefault(part.source, []).append(part.data)
    for src, parts in by_file.items():
        slopes = gain_slopes(model, parts, predict=lambda d: result.predict(model, d.q, d.qd, d.qdd))
        bad = off_prediction(slopes)
        if bad:
            out.append(f"warning: validation recording {src}: its efforts are "
                       + ", ".join(f"{a:.3g} x the identified model's on joint {j!r}" for j, a in bad)
                       + ": another robot's recording, or another torque constant or direction? Its ratios "
                         "measure that, not the model")
    return out


def _stderr(line: str) -> None:
    import sys
    print(line, file=sys.stderr)


def identify_arrays(model: RobotModel, t, q, effort, qd=None, *, settings=None, holdout: Holdout | None = None,
                    validation: tuple | None = None) -> tuple[IdentificationResult, ValidationReport | None]:
    """The Python API from arrays: time (N,), positions (N, n), joint efforts (N, n) and
    optional velocities, columns in `model.joint_names` order, on a uniform time grid.
    `validation`: optional ``(t, q, effort[, qd])`` of another recording. See README."""
    from ..estimation.pipeline import IdentificationSettings

    settings = settings or IdentificationSettings(method="wls")
    rec = Recording(np.asarray(t, float), model.joint_names, q, effort, qd=qd)
    part = Part(process(rec, settings.filter), "<arrays>")
    flags = holdout_flags([part], holdout or Holdout())
    ident, valid = split_by_flags([part], flags)
    if validation is not None:
        vt, vq, ve, *vqd = validation
        vrec = Recording(np.asarray(vt, float), model.joint_names, vq, ve, qd=vqd[0] if vqd else None)
        valid.append(process(vrec, settings.filter))
    result = identify(model, concatenate(ident), settings)
    report = validate_result(result, model, concatenate(valid), settings) if valid else None
    return result, report
