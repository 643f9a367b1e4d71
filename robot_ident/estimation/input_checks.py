"""The input checks of the recordings, in order: the CAD check, per input the recording
checks (recording_checks.py), joints moving but not identified and the lag between the
topics, then the gain check (gain_check.py) on every processed sample. One
implementation, fed while the inputs are read (`InputChecks.observer`, the observer of
`data.processing.process_input`) and from the processed samples (`InputChecks.gains`).
Also where the measured velocity's use is decided (`velocity_settings`).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .gain_check import GainCheck
from .plausibility import Finding, check_cad, check_unidentified_motion, judge_gains
from .recording_checks import VELOCITY_CAP, RecordingChecks


class _InputObserver:
    """The observer of one input: its recording checks, started again on ``restart``."""

    def __init__(self, make):
        self.make = make
        self.checks: RecordingChecks = make()

    def piece(self, segment: int, rec) -> None:
        self.checks.add(segment, rec)

    def segment_end(self, segment: int, kept: bool) -> None:
        self.checks.end_segment(segment, kept)

    def restart(self) -> None:
        self.checks = self.make()


class InputChecks:
    """Every input check: `observer(label)` per input read, `gains.add` with the processed
    samples (`predict`: the efforts the gains compare with, default the CAD model's)."""

    def __init__(self, model, method: str = "physical", effort_label: str = "effort",
                 velocity_cap: int = VELOCITY_CAP, predict=None, velocity: str = "auto"):
        self.model, self.method = model, method
        self._make = lambda: RecordingChecks(model, method, effort_label, velocity_cap, velocity)
        self.inputs: list[tuple[str, _InputObserver]] = []
        self.gains = GainCheck(model, predict)

    def observer(self, label: str) -> _InputObserver:
        obs = _InputObserver(self._make)
        self.inputs.append((label, obs))
        return obs

    def velocity_lagging(self) -> list[str]:
        """Joints whose measured velocity lags dq/dt in some input."""
        return sorted({j for _, o in self.inputs for j in o.checks.velocity_lagging()})

    def recording_findings(self, processed, states_topic: str = "/joint_states",
                           effort_topic: str = "") -> list[Finding]:
        """Per input (`processed.inputs`, in the order observed): the recording checks, joints
        moving but not identified, the lag between the topics; the input's name prefixes the
        subjects when there are several."""
        out: list[Finding] = []
        several = len(self.inputs) > 1
        for (label, obs), read in zip(self.inputs, processed.inputs):
            found = obs.checks.findings()
            found += check_unidentified_motion(self.model, getattr(read.report, "other_joints", {}) or {},
                                               states_topic)
            found += lag_findings(read.report, effort_topic)
            if several:
                found = [Finding(f.severity, f"{label}: {f.subject}", f.text) for f in found]
            out += found
        return out

    def findings(self, processed, states_topic: str = "/joint_states", effort_topic: str = "") -> list[Finding]:
        """Every input check, in order: CAD, per input, gains."""
        findings: list[Finding] = check_cad(self.model, self.method)
        findings += self.recording_findings(processed, states_topic, effort_topic)
        findings += judge_gains(self.gains.slopes(), skip=spiky_joints(findings), tool=self.gains.tool(),
                                uncertain=self.gains.uncertain())
        return findings


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


def velocity_settings(settings, lagging):
    """`settings` with the differentiated positions instead of the measured velocity when its
    use is 'auto' and some joint's measured velocity lags dq/dt (`lagging`: those joints)."""
    if settings.measured_velocity != "auto" or not lagging or not settings.filter.use_measured_velocity:
        return settings
    return replace(settings, filter=replace(settings.filter, use_measured_velocity=False))
