"""Everything checked between synchronising a recording and identifying it: the
plausibility checks (estimation/plausibility.py) on the synchronised segments, the
lag between the topics that `data.sync.synchronise` measured (data/lag.py), and the
gain check on the processed data. The command line calls `check_input`; its
findings' lines are the warnings (the identification node can publish the same text
in its diagnostics)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data.signals import concatenate
from ..data.sync import SyncResult
from .pipeline import process_segments
from .plausibility import Finding, check_cad, check_gains, check_recordings, check_unidentified_motion


@dataclass
class InputCheck:
    parts: list                      # processed segments
    summary: str                     # synchronisation summary
    findings: list = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return [f.line() for f in self.findings]


def lag_findings(sync: SyncResult, effort_topic: str) -> list[Finding]:
    lag = sync.report.lag
    if lag is None or not np.isfinite(lag.lag_s) or not sync.report.lag_corrected:
        return []
    return [Finding("warning", f"topic {effort_topic!r}",
                    f"its stamps are {1e3 * lag.lag_s:+.3g} ms late relative to the joint states (measured on the "
                    "positions both topics carry); corrected")]


def recording_findings(model, segments, report, method: str, states_topic: str = "/joint_states",
                       effort_topic: str = "", effort_label: str = "effort", label: str = "") -> list[Finding]:
    """The checks on one recording's synchronised segments (everything but the gain check,
    which needs the processed data); `label` (a file name) prefixes the subjects when
    several recordings are identified together."""
    found = check_recordings(model, segments, method, effort_label)
    if report is not None:
        found += check_unidentified_motion(model, getattr(report, "other_joints", {}) or {}, states_topic)
        found += lag_findings(SyncResult(list(segments), report), effort_topic)
    if label:
        found = [Finding(f.severity, f"{label}: {f.subject}", f.text) for f in found]
    return found


def check_input(model, sync: SyncResult, settings, states_topic: str = "/joint_states",
                effort_topic: str = "", effort_label: str = "effort") -> InputCheck:
    """Plausibility findings and the processed segments."""
    findings: list[Finding] = check_cad(model, settings.method)
    findings += check_recordings(model, sync.segments, settings.method, effort_label)
    findings += check_unidentified_motion(model, sync.report.other_joints, states_topic)
    findings += lag_findings(sync, effort_topic)
    parts, summary = process_segments(sync, model.joint_names, settings)
    spiky = {f.subject.split("'")[1] for f in findings if "spike" in f.text}
    findings += check_gains(model, concatenate(parts), skip=spiky)
    return InputCheck(parts, summary, findings)
