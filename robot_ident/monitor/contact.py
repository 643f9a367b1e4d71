"""The monitor's logic without ROS: an identified result at work over samples in time
order -- the momentum observer, the friction slack, contact events and model health
(monitor/observer.py, monitor/health.py). `robot-ident monitor` feeds it a
recording's converted samples (offline/monitor_workflow.py), the monitor node the live
joint states and currents (nodes/monitor_node.py): one implementation for both."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..model.momentum import MomentumModel
from .health import ModelHealth
from .observer import (
    NOISE_FACTOR,
    SLOW_PEAK,
    CausalVelocity,
    ContactDetector,
    FrictionSlack,
    MomentumObserver,
    ObserverSettings,
    end_effector_wrench,
)


def result_band(doc: dict, joints, raw_rms: dict) -> tuple[np.ndarray, str, np.ndarray | None]:
    """The model's band per joint: the result's held-out RMS against the raw effort, else
    its in-sample one; which it is; and the held-out residual's RMS through the observer's
    lags (`slow_rms`, estimation/validation.py) where the result has it, else None."""
    held = ((doc.get("validation") or {}).get("joints")) or {}
    try:
        if all(j in held and held[j].get("rms") for j in joints):
            slow = (np.array([float(held[j]["slow_rms"]) for j in joints])
                    if all(held[j].get("slow_rms") is not None for j in joints) else None)
            return np.array([float(held[j]["rms"]) for j in joints]), "held-out RMS", slow
        return np.array([float(raw_rms[j]) for j in joints]), "in-sample RMS", None
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"result.yaml: the residual RMS per joint is incomplete ({exc})") from None


@dataclass
class MonitorStep:
    r: np.ndarray              # (N, n) external torque estimates
    slack: np.ndarray          # (N, n) friction slack added to the thresholds
    contact: np.ndarray        # (N,) bool: any joint in contact


class ContactMonitor:
    def __init__(self, model, theta, band, settings: ObserverSettings | None = None, dead_band: float = 0.05,
                 band_kind: str = "given", slow=None):
        self.model = model
        self.joints = tuple(model.joint_names)
        self.settings = settings or ObserverSettings()
        momentum = MomentumModel(model, theta)
        self.observer = MomentumObserver(momentum, self.settings)
        self.velocity = CausalVelocity(self.settings.gain)
        self.slack = FrictionSlack(momentum.coulomb(), dead_band, self.settings.gain)
        self.detector = ContactDetector(self.joints, band, self.settings, slow=slow)
        self.health = ModelHealth(model, band)
        self.band_kind = band_kind

    @classmethod
    def from_result(cls, rm, settings: ObserverSettings | None = None) -> "ContactMonitor":
        """From an `io.result_model.ResultModel` (its residual RMS is the model's band)."""
        if getattr(rm.model, "closures", None):
            raise ConfigError("the monitor runs serial arms (this result is a closed chain)")
        band, kind, slow = result_band(rm.doc, rm.model.joint_names, rm.raw_rms)
        dead_band = float((rm.doc.get("settings") or {}).get("moving_threshold", rm.icfg.settings.moving_threshold))
        return cls(rm.model, rm.standard_parameters(), band, settings, dead_band, kind, slow)

    def restart(self) -> None:
        """A break in the data (a new segment): the observer and the velocity start again."""
        self.observer.reset()
        self.velocity.reset()

    def update(self, t, q, qd, effort) -> MonitorStep:
        """Samples in time order (`qd` None: from the positions, causally)."""
        t = np.atleast_1d(np.asarray(t, float))
        q = np.atleast_2d(q)
        if qd is None:
            qd = self.velocity.update(t, q)
        else:                       # measured: the positions' difference starts afresh if they stop coming
            self.velocity.reset()
            qd = np.atleast_2d(qd)
        r = self.observer.update(t, q, qd, effort)
        slack = self.slack.update(t, qd)
        flag = self.detector.update(t, r, slack, self.slack.steady(slack, self.detector.model_band))
        self.health.update(t, q, qd, r, flag, slack <= 0.01 * self.detector.model_band)
        return MonitorStep(r, slack, flag)

    def wrench(self, q, r) -> np.ndarray | None:
        return end_effector_wrench(self.model, q, r)

    def summary(self) -> dict:
        """The model's health against the calibrated bands; before the calibration ends there is
        no measure of the observer's own noise to judge a residual by, and no finding."""
        if not self.detector.calibrated:
            return {"level": "n/a", "findings": [], "note": "calibrating: no judgement before the calibration ends"}
        return self.health.summary(self.detector.band)

    def band_doc(self) -> dict:
        """The bands for events.yaml / the node's status."""
        def g(x):
            return None if not np.isfinite(x) else float(f"{x:.6g}")
        d = self.detector
        return {"model": self.band_kind, "calibration_s": self.settings.calibration_s,
                "note": f"per joint: band max(the result's residual RMS, {NOISE_FACTOR:g} x the observer's RMS in the "
                        f"calibration); threshold max({self.settings.threshold:g} x band, {SLOW_PEAK:g} x the "
                        "result's held-out residual through the observer (slow_rms))",
                **{j: {"band": g(b), "model": g(m), "observer_rms": g(o), "threshold": g(on)}
                   for j, b, m, o, on in zip(self.joints, d.band, d.model_band, d.observer_rms, d.on)}}

    def calibration_findings(self) -> list[str]:
        """What the calibration says about what the monitor could see: nothing watched (data
        shorter than the calibration), or a band far above the model's residual."""
        d, s = self.detector, self.settings
        if not d.calibrated:
            return [f"warning: the data end within the calibration ({s.calibration_s:g} s): no contact was "
                    "watched for"]
        out = [f"note: joint {j!r}: the model's own slow error ({f / SLOW_PEAK:.3g} RMS through the observer, "
               f"held out) keeps the contact threshold at {f:.3g}, {f / (s.threshold * b):.2f} x its band's: "
               "smaller contacts cannot be told from it"
               for j, f, b in zip(self.joints, d.floor, d.band) if f > s.threshold * b]
        for j, b, m, f in zip(self.joints, d.band, d.model_band, d.floor):
            if b > 5.0 * m:
                kind = "warning" if b > 20.0 * m else "note"
                why = ("a contact in the first {:g} s, or very noisy velocities" if kind == "warning"
                       else "the velocities' noise through M(q) qd").format(s.calibration_s)
                out.append(f"{kind}: joint {j!r}: the observer's noise in the calibration makes the band "
                           f"{b / m:.1f} x the model's residual ({b:.3g} against {m:.3g}; {why}): contacts below "
                           f"{max(s.threshold * b, f):.3g} go unseen there")
        return out
