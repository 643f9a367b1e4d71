"""`robot-ident monitor`: an identified model run over a recording as the monitor node runs
it next to the arm -- external joint torques from the momentum observer, contact events,
model health (online/momentum_observer.py, online/model_health.py).

The recording is read by the one pipeline's read, synchronise and convert stages
(data/processing.py: the config's topics, actuators, couplings, unwrapping), and the
observer takes the converted samples in time order, as the node takes messages: nothing
is filtered ahead (a zero-phase filter would look into the future), and the velocity is
the measured one (or, without one, a causal difference of the positions).

Writes OUTPUT/events.yaml, OUTPUT/monitor.npz and OUTPUT/monitor.png.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..errors import ConfigError
from ..online.model_health import ModelHealth
from ..online.momentum_observer import (
    NOISE_FACTOR,
    ContactDetector,
    FrictionSlack,
    MomentumObserver,
    ObserverSettings,
    causal_velocity,
    end_effector_wrench,
)
from ..util.atomic import atomic_write_bytes, atomic_write_text
from ..util.progress import Progress
from .bag_workflow import load_result_model
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


def result_band(doc: dict, joints, raw_rms: dict) -> tuple[np.ndarray, str]:
    """The noise band per joint: the result's held-out RMS against the raw effort, else its
    in-sample one; and which it is."""
    held = ((doc.get("validation") or {}).get("joints")) or {}
    try:
        if all(j in held and held[j].get("rms") for j in joints):
            return np.array([float(held[j]["rms"]) for j in joints]), "held-out RMS"
        return np.array([float(raw_rms[j]) for j in joints]), "in-sample RMS"
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"result.yaml: the residual RMS per joint is incomplete ({exc})") from None


class _Run:
    """The observer, the contact detector and the health monitor over the pipeline's pieces."""

    def __init__(self, model, theta, band, settings: ObserverSettings, dead_band: float):
        from ..model.momentum import MomentumModel
        self.model = model
        momentum = MomentumModel(model, theta)
        self.observer = MomentumObserver(momentum, settings)
        self.slack = FrictionSlack(momentum.coulomb(), dead_band, settings.gain)
        self.detector = ContactDetector(model.joint_names, band, settings)
        self.health = ModelHealth(model, theta, band)
        self.parts: list = []          # (t, r, flag, q) per piece
        self.origin = None
        self._segment = None

    def piece(self, segment: int, rec) -> None:
        if segment != self._segment:
            self.observer.reset()
            self._segment = segment
        origin = rec.meta.get("stamp_origin_ns", 0) * 1e-9
        if self.origin is None:
            self.origin = origin + float(rec.t[0])
        t = rec.t + origin - self.origin
        qd = rec.qd if rec.qd is not None else causal_velocity(t, rec.q, self.observer.settings.gain)
        r = self.observer.update(t, rec.q, qd, rec.effort)
        slack = self.slack.update(t, qd)
        flag = self.detector.update(t, r, slack)
        self.health.update(t, rec.q, qd, r, flag, slack <= 0.01 * self.detector.model_band)
        self.parts.append((t, r, flag, rec.q))

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
        model = rm.model
        if getattr(model, "closures", None):
            raise ConfigError("monitor runs serial arms (this result is a closed chain)")
        band, band_kind = result_band(rm.doc, model.joint_names, rm.raw_rms)
        dead_band = float((rm.doc.get("settings") or {}).get("moving_threshold", rm.icfg.settings.moving_threshold))
        run = _Run(model, rm.standard_parameters(), band, settings, dead_band)
        with progress.stage("monitor"):
            processed = process_input(bag, rm.cfg, lambda _rate: [rm.icfg.settings.filter], observer=run,
                                      unwrap=tuple(model.continuous_joints))
            processed.close()
        events = run.detector.finish()
        t = np.concatenate([p[0] for p in run.parts])
        r = np.concatenate([p[1] for p in run.parts])
        flag = np.concatenate([p[2] for p in run.parts])
        q = np.concatenate([p[3] for p in run.parts])
        health = run.health.summary(run.detector.band)
        for line in calibration_findings(run.detector, settings):
            warn(line)
        for f in health.get("findings", []):
            warn(f"{f['level'].lower()}: joint {f['joint']!r}: {f['reason']}")
        wrench = None
        if flag.any():
            wrench = np.full((t.size, 6), np.nan)
            w = end_effector_wrench(model, q[flag], r[flag])
            if w is not None:
                wrench[flag] = w
            else:
                wrench = None
        joints = list(model.joint_names)
        doc = {"format": "robot_ident/monitor", "version": 1, "bag": str(bag), "result": str(result_dir),
               "samples": int(t.size), "duration_s": float(t[-1] - t[0]) if t.size else 0.0,
               "observer": {"gain": settings.gain, "threshold": settings.threshold, "release": settings.release,
                            "max_gap_s": settings.max_gap_s, "restarts": run.observer.restarts},
               "band": {"model": band_kind, "calibration_s": settings.calibration_s,
                        "note": f"per joint: max(the result's residual RMS, {NOISE_FACTOR:g} x the observer's RMS "
                                "in the calibration)",
                        **{j: {"band": _g(b), "model": _g(m), "observer_rms": _g(o)}
                           for j, b, m, o in zip(joints, run.detector.band, band, run.detector.observer_rms)}},
               "events": [e.as_dict() for e in events], "health": health}
        with StagedFolder(output, KIND) as tmp:
            atomic_write_text(tmp / "events.yaml", yaml.safe_dump(doc, sort_keys=False))
            thr = run.detector.band * settings.threshold
            _write_npz(tmp / "monitor.npz", t, r, thr, flag, joints, wrench)
            _plot(tmp / "monitor.png", t, r, thr, events, joints)
    finally:
        release_output(output)
    return MonitorOutcome(events, health, dict(zip(joints, run.detector.band)), int(t.size), doc["duration_s"],
                          Path(output))


def calibration_findings(detector: ContactDetector, settings: ObserverSettings) -> list[str]:
    """What the calibration says about what the monitor could see: nothing watched (data
    shorter than the calibration), or a band far above the model's residual."""
    if not detector.calibrated:
        return [f"warning: the data end within the calibration ({settings.calibration_s:g} s): no contact was "
                "watched for"]
    out = []
    for j, b, m in zip(detector.joints, detector.band, detector.model_band):
        if b > 5.0 * m:
            out.append(f"warning: joint {j!r}: the observer's noise in the calibration makes the band {b / m:.1f} x "
                       f"the model's residual ({b:.3g} against {m:.3g}): noisy velocities, or a contact in the first "
                       f"{settings.calibration_s:g} s; contacts below {settings.threshold * b:.3g} go unseen there")
    return out


def _g(x) -> float | None:
    return None if not np.isfinite(x) else float(f"{x:.6g}")


def _write_npz(path, t, r, threshold, flag, joints, wrench) -> None:
    import io
    buf = io.BytesIO()
    extra = {} if wrench is None else {"wrench": wrench}
    np.savez_compressed(buf, format=np.array("robot_ident/monitor"), time=t, joints=np.array(joints),
                        external_torque=r, threshold=threshold, contact=flag, **extra)
    atomic_write_bytes(path, buf.getvalue())


def _plot(path, t, r, threshold, events, joints) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(joints)
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.6 * n + 0.8), sharex=True, squeeze=False)
    for k, (ax, j) in enumerate(zip(axes[:, 0], joints)):
        ax.plot(t, r[:, k], lw=0.7, color="C0")
        ax.axhspan(-threshold[k], threshold[k], color="0.85", lw=0)
        for e in events:
            if e.joint == j:
                ax.axvspan(e.start, e.end, color="C3", alpha=0.3, lw=0)
        ax.set_ylabel(j, rotation=0, ha="right", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle("External torque estimate (grey: no-contact band x threshold; red: events)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
