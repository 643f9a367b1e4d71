"""The monitor node's logic without ROS: joint states and currents in (the torque node's
conversion, `torque_stream.EffortConverter`: actuators and couplings), the result's
model at work (`monitor.contact.ContactMonitor`) over them in batches, and what the
node publishes: the latest external torques, the contact flag, the wrench, the events
that ended, and a diagnostic level with its reason.

Samples are the current measurements, stamped with their header stamps, with the
positions and velocities of the latest joint state (at most `max_state_age_s` apart);
a sample without positions is counted and skipped. A joint state without velocities
makes the batch's velocities come from the positions (causally).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..io.result_model import ResultModel
from ..monitor.contact import ContactMonitor
from ..monitor.observer import ObserverSettings
from .torque_stream import EffortConverter

LEVEL = {"OK": 0, "WARN": 1, "ERROR": 2}


@dataclass
class MonitorOutput:
    stamp_ns: int
    external: np.ndarray              # (n,) latest estimate
    threshold: np.ndarray             # (n,) contact thresholds (band x threshold, at least the model's slow
    # error's floor; without the friction slack)
    contact: bool
    in_contact: tuple                 # joints in contact now
    wrench: np.ndarray | None         # (6,) force, torque at the last joint, base axes; None: not a serial arm
    events: list = field(default_factory=list)    # ContactEvent dicts ended since the last output
    samples: int = 0                  # samples in this batch


class MonitorStream:
    def __init__(self, monitor: ContactMonitor, converter: EffortConverter):
        self.monitor = monitor
        self.converter = converter
        self.joints = monitor.joints
        self._pending: list = []
        self._t0 = None
        self._published_events = 0
        self.samples = 0
        self.without_state = 0
        self.backwards = 0
        self._last_stamp = None

    @classmethod
    def from_result(cls, rm: ResultModel, cfg=None, settings: ObserverSettings | None = None,
                    max_state_age_s: float = 0.05) -> "MonitorStream":
        """`cfg`: the parameter file read by the node (default: the result's config.yaml)."""
        cfg = cfg or rm.cfg
        monitor = ContactMonitor.from_result(rm, settings)
        if sorted(cfg.joints) != sorted(monitor.joints):
            from ..errors import ConfigError
            raise ConfigError(f"the config's joints ({', '.join(cfg.joints)}) are not the result's "
                              f"({', '.join(monitor.joints)})")
        conv = EffortConverter(monitor.joints, cfg.drive, cfg.current_kind, cfg.current_interface,
                               cfg.current_topic == cfg.joint_states_topic, max_state_age_s)
        return cls(monitor, conv)

    def on_joint_state(self, msg) -> None:
        self._take(self.converter.on_joint_state(msg))

    def on_current(self, msg) -> None:
        self._take(self.converter.on_current(msg))

    def _take(self, sample) -> None:
        if sample is None:
            return
        if sample.position.size == 0:
            self.without_state += 1
            return
        if self._last_stamp is not None and sample.stamp_ns <= self._last_stamp:
            self.backwards += 1             # a repeated or reordered message: the observer needs time order
            return
        self._last_stamp = sample.stamp_ns
        self._pending.append(sample)

    def flush(self) -> MonitorOutput | None:
        """Run the monitor over the samples since the last call; None when there were none."""
        if not self._pending:
            return None
        batch, self._pending = self._pending, []
        if self._t0 is None:
            self._t0 = batch[0].stamp_ns
        t = np.array([(s.stamp_ns - self._t0) * 1e-9 for s in batch])
        q = np.array([s.position for s in batch])
        qd = None if any(s.velocity.size == 0 for s in batch) else np.array([s.velocity for s in batch])
        effort = np.array([s.effort for s in batch])
        step = self.monitor.update(t, q, qd, effort)
        self.samples += len(batch)
        d = self.monitor.detector
        ended = d.events[self._published_events:]
        self._published_events = len(d.events)
        wrench = None
        if step.contact[-1]:
            w = self.monitor.wrench(q[-1:], step.r[-1:])
            wrench = None if w is None else w[0]
        return MonitorOutput(batch[-1].stamp_ns, step.r[-1], d.on.copy(),
                             bool(step.contact[-1]), d.in_contact, wrench,
                             [e.as_dict() for e in ended], len(batch))

    def open_events(self) -> list:
        """The events still on (closed here, marked open), as dicts."""
        ended = self.monitor.detector.finish()
        out = [e.as_dict() for e in ended[self._published_events:]]
        self._published_events = len(ended)
        return out

    def diagnostic(self) -> tuple[int, str, list]:
        """(level 0/1/2, message, key-values) of the model's health and the monitor's state."""
        d = self.monitor.detector
        if not d.calibrated:
            return 0, f"calibrating (the first {self.monitor.settings.calibration_s:g} s learn the observer's " \
                      "noise; keep the arm free of contact)", self._counts()
        h = self.monitor.summary()
        findings = h.get("findings", [])
        level = max((LEVEL[f["level"]] for f in findings), default=0)
        if findings:
            message = "; ".join(f"{f['joint']}: {f['reason']}" for f in findings)
        else:
            message = "model holds" + (f"; contact on {', '.join(d.in_contact)}" if d.in_contact else "")
        kv = self._counts() + [(f"{j} residual / band", "n/a (at rest)" if v is None else f"{v:.3g}")
                               for j, v in (h.get("residual_ratio") or {}).items()]
        kv += [(f"{j} band", f"{b:.4g}") for j, b in zip(self.joints, d.band)]
        kv += [(f"{j} contact threshold", f"{on:.4g}") for j, on in zip(self.joints, d.on)]
        kv += [(f"calibration {k + 1}", line) for k, line in enumerate(self.monitor.calibration_findings())]
        return level, message, kv

    def _counts(self) -> list:
        return [("samples", str(self.samples)), ("events", str(len(self.monitor.detector.events))),
                ("samples without joint state", str(self.without_state)),
                ("samples out of time order", str(self.backwards)),
                ("current messages skipped", str(self.converter.skipped))]
