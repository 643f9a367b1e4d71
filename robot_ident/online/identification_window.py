"""The identification node's logic without ROS: the identification of what its recording
window (`recording_window.RecordingWindow`) recorded.

`identify_recorded` identifies a closed window: a recorded bag in streaming mode
(`estimation.streamed`, the command line's path), in-memory streams with
`identify_streams` -- synchronise, actuators, filter, hold-out split, identify,
validate; both write the same result folder as ``robot-ident identify``.
`result_summary` turns the outcome into plain data for the node's messages.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..data.sync import JointStream
from .recording_window import Recorded

# Recordings longer than this (about 5 min of 1 kHz joint states plus currents) are identified
# streamed, in bounded memory; shorter ones are read back at once so the input checks run.
STREAM_ABOVE_MESSAGES = 1_000_000


# ------------------------------------------------------------------ identification
def method_error(method: str) -> str | None:
    """A one-line error for an unknown estimator name (empty: the config's), else None."""
    from ..estimation import ESTIMATORS
    if not method or method in ESTIMATORS:
        return None
    return (f"parameter method: unknown estimator {method!r}; "
            f"expected one of {', '.join(sorted(ESTIMATORS))} (or empty: the config's)")


@dataclass
class StreamOutcome:
    model: object
    result: object
    validation: object
    output: Path | None
    sync_summary: str
    holdout: float
    identified_urdf: str | None
    warnings: list = field(default_factory=list)   # 'warning: ...' lines (plausibility, model quality)


def holdout_fraction(config_holdout: float, repetitions: int) -> float:
    """The last of `repetitions` (> 1) repetitions is held out; otherwise the config's fraction."""
    return 1.0 / repetitions if repetitions and repetitions > 1 else float(config_holdout)


def _data_cutoff(model, sync, joints, settings, holdout: float):
    """Settings with the cutoff cross-validated on the samples the hold-out leaves."""
    from ..data.holdout import Holdout, Part, holdout_flags
    from ..data.signals import process
    from ..errors import SignalError
    from ..estimation.auto_cutoff import settings_with_data_cutoff

    recs, parts = [], []
    for seg in sync.segments:
        seg = seg.reorder(joints)
        try:
            parts.append(Part(process(seg, settings.filter), "node"))
            recs.append(seg)
        except SignalError:
            continue
    if not parts:
        return settings, None
    flags = holdout_flags(parts, Holdout(fraction=holdout)) if holdout > 0 else [
        np.zeros(p.data.n_samples, bool) for p in parts]
    new, note, _ = settings_with_data_cutoff(model, recs, settings, [~f for f in flags])
    return new, note


def identify_streams(states: JointStream, currents: JointStream, cfg, urdf, output=None,
                     config_path=None, method: str | None = None, repetitions: int = 0,
                     plots: bool = False, source: dict | None = None, force: bool = False) -> StreamOutcome:
    """The command line's identification (``offline.identify_bag``) on recorded streams:
    the same plausibility checks (refused unless `force`) and warnings, which the node
    publishes in its diagnostics."""
    from ..data.sync import SyncResult, synchronise
    from ..estimation.auto_cutoff import strip_auto_cutoff
    from ..estimation.pipeline import identification_config, identify, split_holdout, validate_result
    from ..io.model_loading import load_model
    from ..io.result_folder import write_result_folder

    section = dict(cfg.section("identification"))
    if method:
        section["method"] = method
    section, auto_cutoff = strip_auto_cutoff(section)
    icfg = identification_config(section)
    holdout = holdout_fraction(icfg.holdout, repetitions)
    model = load_model(urdf, cfg, icfg)
    settings = icfg.settings
    sync = synchronise(states, currents, cfg.joints, options=cfg.sync, effort_field=cfg.effort_field,
                       meta={"source": "robot_ident identification_node"})
    acts = cfg.drive.for_joints(cfg.joints)
    sync = SyncResult([acts.apply(seg) for seg in sync.segments], sync.report)
    cutoff_note = None
    if auto_cutoff:      # no cutoff in the config: chosen from the data, as `robot-ident identify` does
        settings, cutoff_note = _data_cutoff(model, sync, cfg.joints, settings, holdout)
    from ..estimation.conditioning import quality_warnings
    from ..estimation.input_checks import check_input
    from ..estimation.plausibility import enforce
    from ..estimation.validation import not_validated_lines
    checked = check_input(model, sync, settings, cfg.joint_states_topic, cfg.current_topic, cfg.effort_field)
    enforce(checked.findings, force)
    parts, summary, settings = checked.parts, checked.summary, checked.settings
    warnings = list(checked.warnings)
    if cutoff_note:
        summary += "\n" + cutoff_note
    ident_data, valid_data = split_holdout(parts, holdout)
    result = identify(model, ident_data, settings)
    if result.quality is not None:
        warnings += quality_warnings(result.quality)
    validation = None
    if valid_data is not None and valid_data.n_samples > 0:
        validation = validate_result(result, model, valid_data, settings)
        warnings += not_validated_lines(validation)
    out = None
    urdf_text = None
    if output is not None:
        out = Path(output)
        extra = {"source": dict(source or {}, holdout_fraction=holdout, synchronisation=summary,
                                config=str(config_path),
                                use_measured_velocity=bool(settings.filter.use_measured_velocity)),
                 "input_checks": {"warnings": warnings, "forced": bool(force)}}
        if hasattr(model, "closures"):      # a closed chain: where `validate` finds the closures again
            from ..mechanisms.closed_chain.config import closures_path
            extra["source"]["closures"] = str(closures_path(cfg, config_path))
        p = write_result_folder(out, model, result, validation, ident_data, extra, config_path, plots,
                                valid_data=valid_data)
        if p is not None:
            urdf_text = Path(p).read_text(encoding="utf-8")
    elif result.standard_values is not None:
        from ..io.results import identified_urdf_xml
        urdf_text = identified_urdf_xml(model, result)
    return StreamOutcome(model, result, validation, out, summary, holdout, urdf_text, warnings)


def identify_recorded(rec: Recorded, cfg, urdf, output=None, config_path=None, method: str | None = None,
                      repetitions: int = 0, plots: bool = False, source: dict | None = None,
                      progress=None, stream_above_messages: int = STREAM_ABOVE_MESSAGES) -> StreamOutcome:
    """Identify a closed window: from its in-memory streams or its bag read back at once
    (`identify_streams`, with the input checks), or, above `stream_above_messages`, from its
    bag in streaming mode (bounded memory, the same input checks, the same cutoff chosen from
    the data when the config leaves it unset). `progress`: a `util.progress.Progress`
    (e.g. `recording_bag.StatusProgress` for the status topic)."""
    if rec.bag is None:
        return identify_streams(rec.states, rec.currents, cfg, urdf, output, config_path, method, repetitions,
                                plots, source)
    src = dict(source or {}, recording=str(rec.bag))
    if rec.loss:        # what the subscription never got, from the gaps in the header stamps
        src["messages"] = {t: {"received": v.received, "lost": v.lost,
                               "rate_hz": None if v.period_s is None else round(1.0 / v.period_s, 3)}
                           for t, v in rec.loss.items()}
    if rec.messages <= stream_above_messages:
        # read back at once so the input checks (units, gains, clock, lag) run; only very long
        # recordings are streamed in bounded memory
        from ..data.bag import read_streams
        streams = read_streams(rec.bag, _window_topics(cfg))
        return identify_streams(streams[cfg.joint_states_topic], streams[cfg.current_topic], cfg, urdf, output,
                                config_path, method, repetitions, plots, src)
    from ..data.stream_sync import NeedsWholeRecording
    from ..estimation.auto_cutoff import strip_auto_cutoff
    from ..estimation.pipeline import identification_config
    from ..estimation.streamed import identify_streamed
    from ..io.model_loading import load_model

    section = dict(cfg.section("identification"))
    if method:
        section["method"] = method
    # 'auto' or no cutoff: chosen from the data on the stream, as identify_streams chooses it
    section, auto = strip_auto_cutoff(section)
    icfg = identification_config(section)
    icfg = replace(icfg, holdout=holdout_fraction(icfg.holdout, repetitions))
    model = load_model(urdf, cfg, icfg)
    try:
        o = identify_streamed(rec.bag, cfg, icfg, model, progress, config_path, plots, src,
                              auto_cutoff=auto)
    except NeedsWholeRecording:         # e.g. the publisher's clock jumped back: read it at once
        from ..data.bag import read_streams
        streams = read_streams(rec.bag, _window_topics(cfg))
        return identify_streams(streams[cfg.joint_states_topic], streams[cfg.current_topic], cfg, urdf, output,
                                config_path, method, repetitions, plots, src)
    urdf_path = urdf_text = None
    if output is not None:
        from ..io.result_folder import write_result_folder
        urdf_path = write_result_folder(Path(output), model, o.result, o.validation, o.plot_data, o.record,
                                        config_path, plots, valid_data=o.valid_data)
    if urdf_path is not None:
        urdf_text = Path(urdf_path).read_text(encoding="utf-8")
    elif o.result.standard_values is not None:
        from ..io.results import identified_urdf_xml
        urdf_text = identified_urdf_xml(model, o.result)
    return StreamOutcome(model, o.result, o.validation, None if output is None else Path(output), o.sync_summary,
                         icfg.holdout, urdf_text, o.warnings)


def _window_topics(cfg) -> dict:
    topics = {cfg.joint_states_topic: ("joint_state", None)}
    if cfg.current_topic != cfg.joint_states_topic:
        topics[cfg.current_topic] = (cfg.current_kind, cfg.current_interface
                                     if cfg.current_kind == "dynamic_joint_state" else None)
    return topics


@dataclass(frozen=True)
class ResultSummary:
    """Plain data for the node's messages."""

    method: str
    names: tuple[str, ...]
    values: np.ndarray
    std: np.ndarray
    joints: tuple[str, ...]
    validation_rms: np.ndarray | None         # per joint, None without hold-out data
    validation_relative_rms: np.ndarray | None
    condition_number: float
    samples: int
    warnings: tuple = ()                      # 'warning: ...' and 'note: ...' lines, one diagnostic value each

    def key_values(self) -> list[tuple[str, str]]:
        kv = [("method", self.method), ("samples", str(self.samples)),
              ("condition_number", f"{self.condition_number:.6g}")]
        notes = [w for w in self.warnings if w.startswith("note: ")]
        kv += [(f"warning.{k + 1}", w) for k, w in enumerate(w for w in self.warnings if w not in notes)]
        kv += [(f"note.{k + 1}", w) for k, w in enumerate(notes)]
        kv += [(n, f"{v:.9g} +- {s:.3g}") for n, v, s in zip(self.names, self.values, self.std)]
        if self.validation_rms is not None:
            kv += [(f"validation_rms.{j}", f"{r:.6g}") for j, r in zip(self.joints, self.validation_rms)]
        return kv


def result_summary(outcome: StreamOutcome) -> ResultSummary:
    r, v = outcome.result, outcome.validation
    return ResultSummary(
        method=str(r.method), names=tuple(r.names), values=np.asarray(r.values, dtype=float),
        std=np.asarray(r.std, dtype=float), joints=tuple(outcome.model.joint_names),
        validation_rms=None if v is None else np.asarray(v.rms, dtype=float),
        validation_relative_rms=None if v is None else np.asarray(v.relative_rms, dtype=float),
        condition_number=float(getattr(r, "condition_number", np.nan)),
        samples=int(getattr(r, "n_samples", 0)), warnings=tuple(getattr(outcome, "warnings", ())))

