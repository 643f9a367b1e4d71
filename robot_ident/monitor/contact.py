"""The monitor's logic without ROS: an identified result at work over samples in time
order -- the momentum observer, the friction slack, contact events and model health
(monitor/observer.py, monitor/health.py). `robot-ident monitor` feeds it a
recording's converted samples (offline/monitor_workflow.py), the monitor node the live
joint states and currents (nodes/monitor_node.py): one implementation for both."""
from __future__ import annotations

import math
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


def result_band(doc: dict, joints, raw_rms: dict) -> tuple[np.ndarray, str, dict | None]:
    """The model's band per joint: the result's held-out RMS against the raw effort, else
    its in-sample one; which it is; and the held-out residual through the observer's lags
    (estimation/validation.py) where the result has it: {rms, peak, peak_t (NaN for a joint
    without), gain}, else None."""
    held = ((doc.get("validation") or {}).get("joints")) or {}
    try:
        if not all(j in held and held[j].get("rms") for j in joints):
            return np.array([float(raw_rms[j]) for j in joints]), "in-sample RMS", None
        band = np.array([float(held[j]["rms"]) for j in joints])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"result.yaml: the residual RMS per joint is incomplete ({exc})") from None
    if not any(held[j].get("slow_rms") is not None for j in joints):
        return band, "held-out RMS", None          # a result from before slow_rms
    slow = {k: np.full(len(joints), np.nan) for k in ("rms", "peak", "peak_t")}
    gains = set()
    for i, j in enumerate(joints):
        if held[j].get("slow_rms") is None:
            continue
        try:
            vals = [float(held[j][k]) for k in ("slow_rms", "slow_peak", "slow_peak_t", "slow_gain")]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"result.yaml: validation.joints.{j}: slow_rms without its slow_peak, slow_peak_t "
                              f"and slow_gain ({exc})") from None
        if not all(math.isfinite(v) for v in vals) or vals[0] < 0 or vals[1] < 0 or vals[3] <= 0:
            raise ConfigError(f"result.yaml: validation.joints.{j}: slow_rms {vals[0]!r}, slow_peak {vals[1]!r}, "
                              f"slow_gain {vals[3]!r} must be finite and not negative")
        slow["rms"][i], slow["peak"][i], slow["peak_t"][i] = vals[:3]
        gains.add(vals[3])
    if len(gains) > 1:
        raise ConfigError(f"result.yaml: validation.joints: slow_rms taken at different gains {sorted(gains)}")
    slow["gain"] = gains.pop()
    return band, "held-out RMS", slow


@dataclass
class MonitorStep:
    r: np.ndarray              # (N, n) external torque estimates
    slack: np.ndarray          # (N, n) friction slack added to the thresholds
    contact: np.ndarray        # (N,) bool: any joint in contact


class ContactMonitor:
    def __init__(self, model, theta, band, settings: ObserverSettings | None = None, dead_band: float = 0.05,
                 band_kind: str = "given", slow: dict | None = None):
        """`slow`: the result's held-out residual through the observer's lags (`result_band`);
        it floors the contact threshold when it was taken at this monitor's gain."""
        self.model = model
        self.joints = tuple(model.joint_names)
        self.settings = settings or ObserverSettings()
        momentum = MomentumModel(model, theta)
        self.observer = MomentumObserver(momentum, self.settings)
        self.velocity = CausalVelocity(self.settings.gain)
        self.slack = FrictionSlack(momentum.coulomb(), dead_band, self.settings.gain)
        self.slow = slow
        same_gain = slow is not None and math.isclose(slow["gain"], self.settings.gain, rel_tol=1e-9)
        self.detector = ContactDetector(self.joints, band, self.settings, slow=slow["rms"] if same_gain else None)
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
                        f"calibration); threshold {self.settings.threshold:g} x band"
                        + (f", at least {SLOW_PEAK:g} x the result's held-out residual through the observer (slow_rms)"
                           if self.detector.floor.any() else ""),
                **{j: {"band": g(b), "model": g(m), "observer_rms": g(o), "threshold": g(on)}
                   for j, b, m, o, on in zip(self.joints, d.band, d.model_band, d.observer_rms, d.on)}}

    def calibration_findings(self) -> list[str]:
        """What the calibration says about what the monitor could see: nothing watched (data
        shorter than the calibration), or a band far above the model's residual."""
        d, s = self.detector, self.settings
        if not d.calibrated:
            return [f"warning: the data end within the calibration ({s.calibration_s:g} s): no contact was "
                    "watched for"]
        out = []
        sl = self.slow
        if sl is not None and not math.isclose(sl["gain"], s.gain, rel_tol=1e-9):
            out.append(f"note: the result's held-out residual through the observer was taken at gain {sl['gain']:g} "
                       f"1/s, this monitor runs at {s.gain:g}: the contact thresholds are {s.threshold:g} x the "
                       "bands, without the floor of the model's slow error")
        for k, (j, f, b) in enumerate(zip(self.joints, d.floor, d.band)):
            if f > s.threshold * b:
                out.append(f"note: joint {j!r}: the held-out residual through the observer (RMS "
                           f"{sl['rms'][k]:.3g}, largest {sl['peak'][k]:.3g} at {sl['peak_t'][k]:.2f} s of the "
                           "held-out samples: the model's own slow error, or an event in those data) keeps the "
                           f"contact threshold at {f:.3g}, {f / (s.threshold * b):.2f} x its band's: smaller "
                           "contacts cannot be told from it")
        for j, b, m, f in zip(self.joints, d.band, d.model_band, d.floor):
            if b > 5.0 * m:
                kind = "warning" if b > 20.0 * m else "note"
                why = ("a contact in the first {:g} s, or very noisy velocities" if kind == "warning"
                       else "the velocities' noise through M(q) qd").format(s.calibration_s)
                out.append(f"{kind}: joint {j!r}: the observer's noise in the calibration makes the band "
                           f"{b / m:.1f} x the model's residual ({b:.3g} against {m:.3g}; {why}): contacts below "
                           f"{max(s.threshold * b, f):.3g} go unseen there")
        return out
