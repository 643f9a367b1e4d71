"""The identification node's logic without ROS: the recording window and the
identification of what it recorded.

`RecordingWindow` collects joint-state and current messages (rclpy or rosbags
messages, read by attribute name through `msgs.JointStreamCollector`) while the
window is open. It opens when the excitation node reports ``exciting`` or on a
manual start, and closes when the excitation ends (``done`` -> identify; ``aborted``
-> discard unless `identify_on_abort`; any other state while open -> discard) or on
a manual stop (-> identify).

`identify_streams` runs exactly the command line's path on the recorded streams --
synchronise, actuators, filter, hold-out split, identify, validate -- and writes the
same result folder as ``robot-ident identify``; `result_summary` turns the outcome
into plain data for the node's messages.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data.msgs import JointStreamCollector
from ..data.sync import JointStream
from ..errors import SignalError

IDENTIFY = "identify"
DISCARD = "discard"


@dataclass(frozen=True)
class Recorded:
    """What a closed window holds."""

    states: JointStream
    currents: JointStream
    source: str                  # "excitation" or "manual"
    messages: int


class RecordingWindow:
    """Thread-safe: messages arrive on subscription callbacks while the identification
    runs on a worker thread."""

    def __init__(self, joint_states_topic: str, current_topic: str, current_kind: str,
                 current_interface: str | None = None, identify_on_abort: bool = False,
                 max_messages: int = 10_000_000):
        self.joint_states_topic = joint_states_topic
        self.current_topic = current_topic
        self.current_kind = current_kind
        self.current_interface = current_interface
        self.identify_on_abort = identify_on_abort
        self.max_messages = int(max_messages)
        self.shared_topic = current_topic == joint_states_topic
        if self.shared_topic and current_kind != "joint_state":
            raise SignalError(f"topic {current_topic!r} cannot be both the joint states and a DynamicJointState")
        self._lock = threading.Lock()
        self._source: str | None = None
        self._js: JointStreamCollector | None = None
        self._cur: JointStreamCollector | None = None
        self._count = 0
        self.dropped = 0
        self.last_excitation_state: str | None = None

    @classmethod
    def from_config(cls, cfg, identify_on_abort: bool = False) -> "RecordingWindow":
        return cls(cfg.joint_states_topic, cfg.current_topic, cfg.current_kind,
                   cfg.current_interface if cfg.current_kind == "dynamic_joint_state" else None,
                   identify_on_abort)

    # -------------------------------------------------------------- state
    @property
    def is_open(self) -> bool:
        return self._source is not None

    @property
    def source(self) -> str | None:
        return self._source

    @property
    def messages(self) -> int:
        return self._count

    def _open(self, source: str) -> None:
        self._source = source
        self._js = JointStreamCollector(self.joint_states_topic, "joint_state")
        self._cur = None if self.shared_topic else JointStreamCollector(
            self.current_topic, self.current_kind, self.current_interface)
        self._count = 0
        self.dropped = 0

    def _close(self) -> Recorded | None:
        js, cur, src, count = self._js, self._cur, self._source, self._count
        self._source, self._js, self._cur = None, None, None
        if js is None:
            return None
        states = js.stream()
        return Recorded(states, states if cur is None else cur.stream(), src, count)

    # ------------------------------------------------------------- events
    def on_excitation_state(self, state: str) -> tuple[str | None, Recorded | None]:
        """The excitation node's state. Returns (IDENTIFY | DISCARD | None, recorded)."""
        with self._lock:
            prev, self.last_excitation_state = self.last_excitation_state, state
            if state == "exciting":
                if self._source is None:
                    self._open("excitation")
                return None, None
            if self._source != "excitation" or prev != "exciting" and state == prev:
                return None, None
            rec = self._close()
            if state == "done" or (state == "aborted" and self.identify_on_abort):
                return IDENTIFY, rec
            return DISCARD, rec

    def start(self) -> tuple[bool, str]:
        with self._lock:
            if self._source is not None:
                return False, f"already recording (opened by {self._source})"
            self._open("manual")
            return True, "recording"

    def stop(self) -> tuple[bool, str, Recorded | None]:
        with self._lock:
            if self._source is None:
                return False, "not recording", None
            rec = self._close()
            return True, f"recorded {rec.messages} messages", rec

    def add_joint_state(self, msg, received_ns: int | None = None) -> None:
        with self._lock:
            if self._js is None:
                return
            if self._count >= self.max_messages:
                self.dropped += 1
                return
            self._js.add(msg, received_ns)
            self._count += 1

    def add_current(self, msg, received_ns: int | None = None) -> None:
        """Messages of the current topic (ignored when it is the joint-state topic: those
        arrive through `add_joint_state`)."""
        with self._lock:
            if self._cur is None:
                return
            if self._count >= self.max_messages:
                self.dropped += 1
                return
            self._cur.add(msg, received_ns)
            self._count += 1


# ------------------------------------------------------------------ identification
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
    from ..estimation.pipeline import (
        identification_config,
        identify,
        load_model,
        split_holdout,
        validate_result,
    )
    from ..io.result_folder import write_result_folder

    from ..estimation.auto_cutoff import strip_auto_cutoff

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
    checked = check_input(model, sync, settings, cfg.joint_states_topic, cfg.current_topic, cfg.effort_field)
    enforce(checked.findings, force)
    parts, summary = checked.parts, checked.summary
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
    out = None
    urdf_text = None
    if output is not None:
        out = Path(output)
        extra = {"source": dict(source or {}, holdout_fraction=holdout, synchronisation=summary,
                                config=str(config_path)),
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
    warnings: tuple = ()                      # 'warning: ...' lines, one diagnostic value each

    def key_values(self) -> list[tuple[str, str]]:
        kv = [("method", self.method), ("samples", str(self.samples)),
              ("condition_number", f"{self.condition_number:.6g}")]
        kv += [(f"warning.{k + 1}", w) for k, w in enumerate(self.warnings)]
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

