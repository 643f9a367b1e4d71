"""`robot-ident monitor`: an identified model run over a recording as the monitor node runs
it next to the arm -- external joint torques from the momentum observer, contact events,
model health (monitor/: observer.py, health.py, contact.py).

The recording is read by the one pipeline's read, synchronise and convert stages
(data/processing.py: the config's topics, actuators, couplings, unwrapping), and the
observer takes the converted samples in time order, as the node takes messages: nothing
is filtered ahead (a zero-phase filter would look into the future), and the velocity is
the measured one (or, without one, a causal difference of the positions).

Writes OUTPUT/events.yaml, OUTPUT/monitor.npz, OUTPUT/monitor.png and OUTPUT/monitor.html (the page).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..errors import ConfigError
from ..io.result_model import load_result_model
from ..monitor.contact import ContactMonitor
from ..monitor.observer import ObserverSettings
from ..report.monitor_page import write_monitor_page
from ..util.atomic import atomic_write_bytes, atomic_write_text
from ..util.progress import Progress
from .inputs import print_stderr

KIND = "monitor"


@dataclass
class MonitorOutcome:
    events: list
    health: dict
    band: dict
    samples: int
    duration: float
    output: Path


class _Pieces:
    """The pipeline's converted pieces, in order, through the monitor (a processing observer)."""

    def __init__(self, monitor: ContactMonitor):
        self.monitor = monitor
        self.parts: list = []          # (t, r, flag, q, slack) per piece
        self.origin = None
        self._segment = None

    def piece(self, segment: int, rec) -> None:
        if segment != self._segment:
            self.monitor.restart()
            self._segment = segment
        origin = rec.meta.get("stamp_origin_ns", 0) * 1e-9
        if self.origin is None:
            self.origin = origin + float(rec.t[0])
        t = rec.t + origin - self.origin
        step = self.monitor.update(t, rec.q, rec.qd, rec.effort)
        self.parts.append((t, step.r, step.contact, rec.q, step.slack))

    def segment_end(self, segment: int, kept: bool) -> None:
        pass

    def restart(self) -> None:
        raise ConfigError("the recording must be read at once (a looped bag); monitor reads it in order only")


def monitor_bag(bag, result_dir, output, *, urdf=None, config_path=None, settings: ObserverSettings | None = None,
                progress: Progress | None = None, warn=print_stderr) -> MonitorOutcome:
    """The monitor over `bag` (a rosbag2 folder or table) with result folder `result_dir`."""
    from ..data.processing import process_input
    from ..io.staging import StagedFolder, check_output_folder, release_output

    progress = progress or Progress(quiet=True)
    settings = settings or ObserverSettings()
    check_output_folder(output, KIND)
    try:
        rm = load_result_model(result_dir, urdf, config_path)
        monitor = ContactMonitor.from_result(rm, settings)
        model = monitor.model
        feed = _Pieces(monitor)
        with progress.stage("monitor"):      # the filter stage runs too; its output is not used
            process_input(bag, rm.cfg, lambda _rate: [rm.icfg.settings.filter], observer=feed,
                          unwrap=tuple(model.continuous_joints)).close()
        events = monitor.detector.finish()
        t, r, flag, q, slack = (np.concatenate([p[i] for p in feed.parts]) for i in range(5))
        health = monitor.summary()
        for line in monitor.calibration_findings():
            warn(line)
        for f in health.get("findings", []):
            warn(f"{f['level'].lower()}: joint {f['joint']!r}: {f['reason']}")
        wrench = None
        if flag.any():
            w = monitor.wrench(q[flag], r[flag])
            if w is not None:
                wrench = np.full((t.size, 6), np.nan)
                wrench[flag] = w
        joints = list(model.joint_names)
        doc = {"format": "robot_ident/monitor", "version": 1, "bag": str(bag), "result": str(result_dir),
               "samples": int(t.size), "duration_s": float(t[-1] - t[0]) if t.size else 0.0,
               "observer": {"gain": settings.gain, "threshold": settings.threshold, "release": settings.release,
                            "max_gap_s": settings.max_gap_s, "restarts": monitor.observer.restarts},
               "band": monitor.band_doc(), "events": [e.as_dict() for e in events], "health": health}
        with StagedFolder(output, KIND) as tmp:
            atomic_write_text(tmp / "events.yaml", yaml.safe_dump(doc, sort_keys=False))
            thr = monitor.detector.on.copy()     # band x threshold, at least the slow-error floor
            _write_npz(tmp / "monitor.npz", t, r, thr, slack, flag, joints, wrench)
            _plot(tmp / "monitor.png", t, r, thr + slack, events, joints, settings.calibration_s)
            write_monitor_page(tmp)
    finally:
        release_output(output)
    return MonitorOutcome(events, health, dict(zip(joints, monitor.detector.band)), int(t.size), doc["duration_s"],
                          Path(output))


def _write_npz(path, t, r, threshold, slack, flag, joints, wrench) -> None:
    import io
    buf = io.BytesIO()
    extra = {} if wrench is None else {"wrench": wrench}
    np.savez_compressed(buf, format=np.array("robot_ident/monitor"), time=t, joints=np.array(joints),
                        external_torque=r, threshold=threshold, friction_slack=slack, contact=flag, **extra)
    atomic_write_bytes(path, buf.getvalue())


def _plot(path, t, r, threshold, events, joints, calibration_s: float) -> None:
    """`threshold` (N, n): the contact threshold at each sample (band x threshold, at least the
    model's slow-error floor, + slack)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(joints)
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.6 * n + 0.8), sharex=True, squeeze=False)
    for k, (ax, j) in enumerate(zip(axes[:, 0], joints)):
        ax.plot(t, r[:, k], lw=0.7, color="C0")
        ax.fill_between(t, -threshold[:, k], threshold[:, k], color="0.85", lw=0)
        if t.size:
            ax.axvspan(t[0], min(t[0] + calibration_s, t[-1]), color="C0", alpha=0.07, lw=0)
        for e in events:
            if e.joint == j:
                ax.axvspan(e.start, e.end, color="C3", alpha=0.3, lw=0)
        ax.set_ylabel(j, rotation=0, ha="right", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle("External torque estimate (grey: the contact threshold, band x threshold or the model's slow-error "
                 "floor, widened by the friction slack in the dead band; blue: the calibration, not watched; "
                 "red: events)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
