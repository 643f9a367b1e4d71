"""The input checks of one recording, in order: the CAD check, the recording checks
(recording_checks.py), joints moving but not identified, the lag between the topics,
the gain check (gain_check.py). One implementation whether the recording is read in
chunks (`InputChecks`, the observer `data.bag_processed.process_bag` feeds) or is in
memory (`check_input`, `recording_findings`: each segment one piece). Also where the
measured velocity's use is decided (`velocity_settings`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .gain_check import GainCheck
from .plausibility import Finding, check_cad, check_unidentified_motion, judge_gains
from .recording_checks import VELOCITY_CAP, RecordingChecks


class InputChecks:
    """The observer `data.bag_processed.process_bag` feeds (``observer=``): recording checks
    on the converted pieces, the gain check's accumulation on the processed samples
    (`predict`: the efforts the gains compare with, default the CAD model's)."""

    def __init__(self, model, method: str = "physical", effort_label: str = "effort",
                 velocity_cap: int = VELOCITY_CAP, predict=None, velocity: str = "auto"):
        self.model, self.method = model, method
        self.recordings = RecordingChecks(model, method, effort_label, velocity_cap, velocity)
        self.gains = GainCheck(model, predict)

    def piece(self, segment: int, rec) -> None:
        self.recordings.add(segment, rec)

    def segment_end(self, segment: int, kept: bool) -> None:
        self.recordings.end_segment(segment, kept)

    def processed(self, data) -> None:
        self.gains.add(data)

    def findings(self, report, states_topic: str = "/joint_states", effort_topic: str = "") -> list[Finding]:
        return input_findings(self.model, self.method, report, self.recordings, self.gains, states_topic,
                              effort_topic)


def lag_findings(report, effort_topic: str) -> list[Finding]:
    """The lag between the topics that the synchronisation measured and corrected
    (`report`: its `sync.SyncReport`)."""
    lag = getattr(report, "lag", None)
    if lag is None or not np.isfinite(lag.lag_s) or not report.lag_corrected:
        return []
    return [Finding("warning", f"topic {effort_topic!r}",
                    f"its stamps are {1e3 * lag.lag_s:+.3g} ms late relative to the joint states (measured on the "
                    "positions both topics carry); corrected")]


def spiky_joints(findings) -> list[str]:
    """Joints with spikes worth a warning (their gain check is skipped: spikes bias it)."""
    return sorted({f.subject.split("'")[1] for f in findings if "spike" in f.text and f.severity != "note"})


def input_findings(model, method: str, report, checks: RecordingChecks, gains: GainCheck,
                   states_topic: str = "/joint_states", effort_topic: str = "") -> list[Finding]:
    """Every input check of one recording, in order: the CAD check, the recording checks,
    joints moving but not identified, the lag between the topics, the gain check.
    `report`: the synchronisation's `SyncReport`."""
    findings: list[Finding] = check_cad(model, method)
    findings += checks.findings()
    findings += check_unidentified_motion(model, getattr(report, "other_joints", {}) or {}, states_topic)
    findings += lag_findings(report, effort_topic)
    findings += judge_gains(gains.slopes(), skip=spiky_joints(findings), tool=gains.tool())
    return findings


def velocity_settings(settings, lagging):
    """`settings` with the differentiated positions instead of the measured velocity when its
    use is 'auto' and some joint's measured velocity lags dq/dt (`lagging`: those joints)."""
    if settings.measured_velocity != "auto" or not lagging or not settings.filter.use_measured_velocity:
        return settings
    return replace(settings, filter=replace(settings.filter, use_measured_velocity=False))


def segment_checks(model, segments, method: str = "physical", effort_label: str = "effort",
                   velocity: str = "auto") -> RecordingChecks:
    """`RecordingChecks` of synchronised segments in memory, each one piece."""
    checks = RecordingChecks(model, method, effort_label, velocity=velocity)
    for k, seg in enumerate(segments):
        checks.add(k, seg)
        checks.end_segment(k, True)
    return checks


def recording_findings(model, segments, report, method: str, states_topic: str = "/joint_states",
                       effort_topic: str = "", effort_label: str = "effort", label: str = "",
                       velocity: str = "auto") -> tuple[list[Finding], list[str]]:
    """The checks on one recording's synchronised segments (everything but the CAD and gain
    checks, which are the model's and need the processed data), and the joints whose
    measured velocity lags dq/dt; `label` (a file name) prefixes the subjects when several
    recordings are identified together."""
    checks = segment_checks(model, segments, method, effort_label, velocity)
    found = checks.findings()
    if report is not None:
        found += check_unidentified_motion(model, getattr(report, "other_joints", {}) or {}, states_topic)
        found += lag_findings(report, effort_topic)
    if label:
        found = [Finding(f.severity, f"{label}: {f.subject}", f.text) for f in found]
    return found, checks.velocity_lagging()


@dataclass
class InputCheck:
    parts: list                      # processed segments
    summary: str                     # synchronisation summary
    findings: list = field(default_factory=list)
    settings: object = None          # the settings they were processed with (the velocity's use decided)

    @property
    def warnings(self) -> list[str]:
        return [f.line() for f in self.findings]


def check_input(model, sync, settings, states_topic: str = "/joint_states",
                effort_topic: str = "", effort_label: str = "effort") -> InputCheck:
    """Every input check of a synchronised recording in memory (`sync.SyncResult`), and its
    segments processed with `settings` (the differentiated positions instead of a lagging
    measured velocity when its use is 'auto': `InputCheck.settings`)."""
    from .pipeline import process_segments
    checks = segment_checks(model, sync.segments, settings.method, effort_label, settings.measured_velocity)
    settings = velocity_settings(settings, checks.velocity_lagging())
    parts, summary = process_segments(sync, model.joint_names, settings)
    gains = GainCheck(model)
    for p in parts:
        gains.add(p)
    return InputCheck(parts, summary, input_findings(model, settings.method, sync.report, checks, gains,
                                                     states_topic, effort_topic), settings)
