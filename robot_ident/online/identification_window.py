"""The identification node's logic without ROS: the recording window and the
identification of what it recorded.

`RecordingWindow` collects joint-state and current messages (rclpy or rosbags
messages, read by attribute name through `msgs.JointStreamCollector`) while the
window is open. It opens when the excitation node reports ``exciting`` or on a
manual start, and closes when the excitation ends (``done`` -> identify; ``aborted``
-> discard unless `identify_on_abort`; any other state while open -> discard) or on
a manual stop (-> identify). A window the excitation opened also closes, as if the
excitation had aborted, when `watchdog` finds its joint states stale on the wall
clock (they stopped, and with sim time the clock with them) or the excitation node
gone (no publisher of its state left): the node never records forever.

With a `bag_root`, the window writes the messages into a new rosbag2 folder under it
as they arrive (`recording_bag.BagRecorder`: bounded memory for a window of any
length, and the raw recording is on disk before any identification starts); without
one it collects them in memory (at most `max_messages`).

`identify_recorded` identifies a closed window: a recorded bag in streaming mode
(`estimation.streamed`, the command line's path), in-memory streams with
`identify_streams` -- synchronise, actuators, filter, hold-out split, identify,
validate; both write the same result folder as ``robot-ident identify``.
`result_summary` turns the outcome into plain data for the node's messages.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..data.msgs import JointStreamCollector
from ..data.sync import JointStream
from ..errors import SignalError

IDENTIFY = "identify"
# Recordings longer than this (about 5 min of 1 kHz joint states plus currents) are identified
# streamed, in bounded memory; shorter ones are read back at once so the input checks run.
STREAM_ABOVE_MESSAGES = 1_000_000
DISCARD = "discard"


@dataclass(frozen=True)
class Recorded:
    """What a closed window holds."""

    states: JointStream | None   # None when recorded to a bag
    currents: JointStream | None
    source: str                  # "excitation" or "manual"
    messages: int
    bag: Path | None = None      # the rosbag2 folder the window was recorded into
    joint_state_messages: int | None = None   # counted when recorded to a bag (states is None)


class RecordingWindow:
    """Thread-safe: messages arrive on subscription callbacks while the identification
    runs on a worker thread."""

    def __init__(self, joint_states_topic: str, current_topic: str, current_kind: str,
                 current_interface: str | None = None, identify_on_abort: bool = False,
                 max_messages: int = 10_000_000, bag_root=None, storage: str = "mcap"):
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
        self.bag_root = None if bag_root is None else Path(bag_root)
        self.storage = storage
        self._recorder = None
        self._last_wall: float | None = None
        self._js_count = 0
        self._stale_seen: float | None = None

    @classmethod
    def from_config(cls, cfg, identify_on_abort: bool = False, bag_root=None) -> "RecordingWindow":
        return cls(cfg.joint_states_topic, cfg.current_topic, cfg.current_kind,
                   cfg.current_interface if cfg.current_kind == "dynamic_joint_state" else None,
                   identify_on_abort, bag_root=bag_root)

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

    def _open(self, source: str, wall: float | None = None) -> None:
        self._source = source
        self._last_wall = wall
        self._count = 0
        self._js_count = 0
        self.dropped = 0
        if self.bag_root is not None:
            from .recording_bag import BagRecorder
            stamp = datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S_%f")
            self._recorder = BagRecorder(self.bag_root / f"recording_{stamp}", self.joint_states_topic,
                                         self.current_topic, self.current_kind, self.storage)
            self._js = self._cur = None
            return
        self._js = JointStreamCollector(self.joint_states_topic, "joint_state")
        self._cur = None if self.shared_topic else JointStreamCollector(
            self.current_topic, self.current_kind, self.current_interface)

    def _close(self) -> Recorded | None:
        js, cur, src, count, recorder = self._js, self._cur, self._source, self._count, self._recorder
        self._source, self._js, self._cur, self._recorder = None, None, None, None
        if recorder is not None:
            return Recorded(None, None, src, count, recorder.close(), joint_state_messages=self._js_count)
        if js is None:
            return None
        states = js.stream()
        return Recorded(states, states if cur is None else cur.stream(), src, count)

    # ------------------------------------------------------------- events
    def on_excitation_state(self, state: str, wall: float | None = None) -> tuple[str | None, Recorded | None]:
        """The excitation node's state (`wall`: steady-clock seconds, for `watchdog`).
        Returns (IDENTIFY | DISCARD | None, recorded)."""
        with self._lock:
            prev, self.last_excitation_state = self.last_excitation_state, state
            if state == "exciting":
                if self._source is None:
                    self._open("excitation", wall)
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

    def watchdog(self, wall: float, timeout: float, state_publishers: int | None = None
                 ) -> tuple[str | None, Recorded | None, str]:
        """Close a window the excitation opened when no joint state came for `timeout`
        seconds of the steady clock `wall` (counted from the opening when none came), or
        when `state_publishers` (publishers of the excitation state) is 0: the verdict of
        an abort (DISCARD, or IDENTIFY with identify_on_abort). Manual windows are left
        alone. Returns (verdict | None, recorded | None, why)."""
        with self._lock:
            if self._source != "excitation":
                return None, None, ""
            if state_publishers == 0:
                why = "the excitation node is gone (no publisher of its state)"
            elif self._last_wall is not None and wall - self._last_wall > timeout:
                # stale on two calls in a row with nothing received in between (after a stall of
                # the process its timer runs before the messages queued meanwhile)
                if self._stale_seen != self._last_wall:
                    self._stale_seen = self._last_wall
                    return None, None, ""
                why = (f"no joint state for {wall - self._last_wall:.3g} s of wall time "
                       f"(joint_state_timeout {timeout:g} s)")
            else:
                return None, None, ""
            rec = self._close()
            return (IDENTIFY if self.identify_on_abort else DISCARD), rec, why

    def add_joint_state(self, msg, received_ns: int | None = None, wall: float | None = None) -> None:
        with self._lock:
            if self._source is not None and wall is not None:
                self._last_wall = wall          # the wall-clock watchdog sees fresh joint states
            if self._recorder is not None:
                self._recorder.write_joint_state(msg, received_ns)
                self._count += 1
                self._js_count += 1
                return
            if self._js is None:
                return
            if self._count >= self.max_messages:
                self.dropped += 1
                return
            self._js.add(msg, received_ns)
            self._count += 1
            self._js_count += 1

    def add_current(self, msg, received_ns: int | None = None) -> None:
        """Messages of the current topic (ignored when it is the joint-state topic: those
        arrive through `add_joint_state`)."""
        with self._lock:
            if self._recorder is not None:
                if not self.shared_topic:
                    self._recorder.write_current(msg, received_ns)
                    self._count += 1
                return
            if self._cur is None:
                return
            if self._count >= self.max_messages:
                self.dropped += 1
                return
            self._cur.add(msg, received_ns)
            self._count += 1


# ------------------------------------------------------------------ identification
def empty_reason(rec: Recorded | None) -> str | None:
    """Why `rec` cannot be identified (nothing recorded), None when it can be tried."""
    if rec is None:
        return "nothing recorded yet"
    n_states = rec.joint_state_messages if rec.states is None else len(rec.states.stamps)
    if rec.messages == 0 or not n_states:
        return f"the {rec.source} window holds no joint state; nothing to identify"
    return None


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

