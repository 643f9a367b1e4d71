"""External joint torques from an identified model: a generalised-momentum observer and
the contact events it shows (the monitor's core, with ROS or on a recording).

The observer (Haddadin, De Luca and Albu-Schaeffer, IEEE T-RO 2017) estimates
``tau_ext`` in ``dp/dt = tau + tau_ext - beta(q, qd)`` (model/momentum.py) through a lag of
gain K, ``dr/dt = K (tau_ext - r)``. In discrete time, with the samples' own spacing ``dt``
(any rate, jitter included) it is exact for an external torque constant over a step:

    r_k = a r_(k-1) + (1 - a) [(p_k - p_(k-1)) / dt - (u_k + u_(k-1)) / 2],   a = exp(-K dt)

with ``u = tau - beta`` (the measured effort less the model's non-inertial terms). The
momentum and u pass the same first-order lag first, so the observer is of second order
from tau_ext to r: in the first-order form the velocity noise in ``p = M(q) qd`` reaches r
multiplied by K, unfiltered. No joint acceleration is used; a gap in the samples (more
than `max_gap_s`) restarts it at 0.

Each joint's band is the larger of the identification's residual RMS against the raw
effort (result.yaml: held out, else in-sample) and NOISE_FACTOR times the observer's own
noise RMS in the calibration (the first `calibration_s` of the data). A contact starts
when ``|r_j|`` exceeds ``threshold`` times the band (plus the friction slack of the dead
band), but never less than SLOW_PEAK times the model error the observer passes (the
result's held-out ``slow_rms``, estimation/validation.py), and ends when it falls below
``release`` times that; each event keeps its signed peak.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import defaults
from ..errors import ConfigError
from ..model.momentum import MomentumModel

DEFAULT_GAIN = defaults.MONITOR_GAIN            # 1/s
DEFAULT_THRESHOLD = defaults.MONITOR_THRESHOLD  # multiples of the band
DEFAULT_RELEASE = 0.5         # an event ends below half the threshold
DEFAULT_MAX_GAP_S = 0.1
DEFAULT_CALIBRATION_S = defaults.MONITOR_CALIBRATION_S
NOISE_FACTOR = 4.0            # the band is at least this times the observer's RMS in calibration
# (its RMS varies with the pose, M(q) times the velocity noise: 1.2-1.9x the calibration's in
# other seconds of the demo arm; 2.5 gave 6 false alarms an hour on clean simulated data)
SLOW_PEAK = 4.5               # the threshold is at least this times the result's slow_rms: a model
# error the observer passes whole is slow, and a slow Gaussian residual of RMS s and correlation
# time c peaks near s sqrt(2 ln(T / c)) in a time T: 4.3 s in an hour at c = 0.3 s. White effort
# noise is mostly filtered (slow_rms 0.17 x its RMS; the simulated arm's 0.21-0.35), so there the
# band's threshold rules. A monitor at another gain than slow_rms's keeps no floor (monitor/contact.py)


@dataclass(frozen=True)
class ObserverSettings:
    gain: float = DEFAULT_GAIN
    threshold: float = DEFAULT_THRESHOLD
    release: float = DEFAULT_RELEASE
    max_gap_s: float = DEFAULT_MAX_GAP_S
    calibration_s: float = DEFAULT_CALIBRATION_S

    def __post_init__(self):
        for name in ("gain", "threshold", "max_gap_s", "calibration_s"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"monitor {name} must be a positive number, got {v!r}")
        if not 0.0 < self.release <= 1.0:
            raise ConfigError(f"monitor release must be in (0, 1] (a fraction of the threshold), got {self.release!r}")


class FrictionSlack:
    """What the threshold must allow for where a joint is in the friction dead band: its
    friction there is anything between -Fc and +Fc (stiction), while the model's smooth
    Coulomb term is at -Fc or +Fc just before a reversal: an error of up to 2 |Fc|.
    ``2 |Fc| w(qd)`` with ``w`` 1 below the dead-band velocity and 0 above three times it, through
    the observer's own filter (its impulse response is positive, so the filtered friction
    error stays inside the filtered slack), fading no faster than RELEASE_S."""

    REST_S = 0.5      # s below the dead-band velocity that make a standstill, not a reversal
    RELEASE_S = 0.05  # the slack fades with this time constant once the joint moves: a real joint's
    # friction builds up over tens of ms after a reversal (the Panda's joint 7: 60 ms), later
    # than the model's smooth Coulomb term

    def __init__(self, coulomb: np.ndarray, dead_band: float, gain: float):
        self.fc = 2.0 * np.abs(np.asarray(coulomb, float))
        self.v = float(dead_band)
        self.gain = float(gain)
        self._t = None
        self._f = self._s = None
        self._rest = np.zeros(self.fc.size)          # s each joint has been below the dead band
        self.resting = np.zeros((0, self.fc.size), dtype=bool)   # of the last update's samples

    def steady(self, slack, band) -> np.ndarray:
        """(N, n) bool, for the last update's samples: where the friction error is steady --
        the joint moves (no slack) or stands still (below the dead band for REST_S: its
        stuck friction changes slowly); not in a reversal, where the friction flips."""
        return (np.atleast_2d(slack) <= 0.01 * np.asarray(band)) | self.resting

    def update(self, t, qd) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, float))
        speed = np.abs(np.atleast_2d(qd))
        w = np.clip(1.5 - 0.5 * speed / self.v, 0.0, 1.0) if self.v > 0 else np.zeros_like(speed)
        x = w * self.fc
        out = np.empty_like(x)
        self.resting = np.zeros(x.shape, dtype=bool)
        for k in range(t.size):
            if self._t is None or t[k] <= self._t:
                f = s = x[k]
                self._rest[:] = 0.0
            else:
                dt = t[k] - self._t
                a = math.exp(-self.gain * dt)
                f = a * self._f + (1.0 - a) * x[k]
                s = np.maximum(a * self._s + (1.0 - a) * f, self._s * math.exp(-dt / self.RELEASE_S))
                self._rest = np.where(speed[k] < self.v, self._rest + dt, 0.0)
            self._t, self._f, self._s = t[k], f, s
            out[k] = s
            self.resting[k] = self._rest >= self.REST_S
        return out


class MomentumObserver:
    """Streaming observer: `update` takes samples in time order, in batches of any size."""

    def __init__(self, momentum: MomentumModel, settings: ObserverSettings | None = None):
        self.momentum = momentum
        self.settings = settings or ObserverSettings()
        self.n = momentum.n
        self.restarts = 0
        self._t = None           # last sample: time, momentum, u, r
        self._p = self._u = self._r = None

    def reset(self) -> None:
        self._t = None

    def update(self, t, q, qd, effort) -> np.ndarray:
        """External torque estimates (N, n) at the samples (t (N,), q, qd, effort (N, n))."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        effort = np.atleast_2d(np.asarray(effort, dtype=float))
        p, beta = self.momentum.terms(q, qd)
        u = effort - beta
        out = np.empty_like(u)
        K, gap = self.settings.gain, self.settings.max_gap_s
        for k in range(t.size):
            if self._t is None or not (0.0 < t[k] - self._t <= gap):
                if self._t is not None:
                    self.restarts += 1
                r, pf, uf = np.zeros(self.n), p[k], u[k]
            else:
                dt = t[k] - self._t
                a = math.exp(-K * dt)
                pf = a * self._p + (1.0 - a) * p[k]
                uf = a * self._u + (1.0 - a) * u[k]
                r = a * self._r + (1.0 - a) * ((pf - self._p) / dt - 0.5 * (uf + self._u))
            self._t, self._p, self._u, self._r = t[k], pf, uf, r
            out[k] = r
        return out


@dataclass
class ContactEvent:
    joint: str
    start: float             # s
    end: float               # s
    peak: float              # signed, N*m or N
    open: bool = False       # still above the release level when the data ended

    def as_dict(self) -> dict:
        d = {"joint": self.joint, "start": round(float(self.start), 6), "end": round(float(self.end), 6),
             "peak": float(f"{self.peak:.6g}")}
        if self.open:
            d["open"] = True
        return d


@dataclass
class ContactDetector:
    """Per-joint contact events from the observer's output, with hysteresis."""

    joints: tuple
    band: np.ndarray                  # (n,) N*m or N
    settings: ObserverSettings = field(default_factory=ObserverSettings)
    events: list = field(default_factory=list)
    slow: np.ndarray | None = None    # (n,) the model error the observer passes (RMS), if known

    def __post_init__(self):
        self.band = np.asarray(self.band, dtype=float)
        bad = [j for j, b in zip(self.joints, self.band) if not (math.isfinite(b) and b > 0)]
        if bad:
            raise ConfigError(f"the noise band of joint(s) {', '.join(map(repr, bad))} is not a positive number "
                              "(the result's residual RMS)")
        self.model_band = self.band.copy()
        slow = np.zeros(self.band.size) if self.slow is None else np.nan_to_num(np.asarray(self.slow, float))
        self.floor = SLOW_PEAK * slow     # the threshold's floor
        self._set_band(self.band)
        self._open: dict[int, ContactEvent] = {}
        self._t0 = None
        self._sum = np.zeros(self.band.size)
        self._count = np.zeros(self.band.size)
        self.calibrated = False
        self.observer_rms = np.full(self.band.size, np.nan)

    def _set_band(self, band) -> None:
        self.band = np.asarray(band, float)
        self.on = np.fmax(self.settings.threshold * self.band, self.floor)
        self.off = self.settings.release * self.on

    def _calibrate(self, t, r, moving) -> int:
        """Samples of the calibration (the first `calibration_s`): the RMS of the observer's
        noise on the joints' moving samples -- r less its own lag at a tenth of the gain, so
        that a model error at the motion's frequencies (a worn joint's friction) is not
        taken for noise and does not widen the band; then the band is max(model band,
        NOISE_FACTOR x that RMS). Returns how many samples it took."""
        if self._t0 is None:
            self._t0, self._lp, self._lp_t = t[0], r[0].copy(), t[0]
        k = int(np.searchsorted(t, self._t0 + self.settings.calibration_s))
        slow = self.settings.gain / 10.0
        for i in range(k):
            a = math.exp(-slow * max(t[i] - self._lp_t, 0.0))
            self._lp = a * self._lp + (1.0 - a) * r[i]
            self._lp_t = t[i]
            self._sum += (r[i] - self._lp) ** 2 * moving[i]
            self._count += moving[i]
        if k < t.size:
            self.observer_rms = np.sqrt(self._sum / np.maximum(self._count, 1))
            self.observer_rms[self._count == 0] = np.nan
            self._set_band(np.fmax(self.model_band, NOISE_FACTOR * np.nan_to_num(self.observer_rms)))
            self.calibrated = True
        return k

    def update(self, t, r, slack=None, steady=None) -> np.ndarray:
        """The contact flag (N,) bool (any joint in contact) of the samples; events are
        appended to `events` when they end. `slack` (N, n): added to the thresholds (the
        friction dead band, `FrictionSlack`); `steady` (N, n) bool: the samples the
        calibration may use (default: outside the dead band; `FrictionSlack.steady` adds a
        joint at rest, whose stuck friction the calibration's high-pass removes)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        r = np.atleast_2d(r)
        extra = np.zeros_like(r) if slack is None else np.atleast_2d(slack)
        flag = np.zeros(t.size, dtype=bool)
        if not self.calibrated:
            first = self._calibrate(t, r, extra <= 0.01 * self.model_band if steady is None else steady)
        else:
            first = 0
        above = np.abs(r) > self.on + extra
        below = np.abs(r) < self.off + extra
        busy = above.any(axis=1)
        for k in range(first, t.size):
            if not (self._open or busy[k]):        # nothing above and no event running
                continue
            for j in np.flatnonzero(above[k]):
                if j not in self._open:
                    self._open[j] = ContactEvent(self.joints[j], t[k], t[k], r[k, j])
            for j in list(self._open):
                ev = self._open[j]
                ev.end = t[k]
                if abs(r[k, j]) > abs(ev.peak):
                    ev.peak = r[k, j]
                if below[k, j]:
                    self.events.append(self._open.pop(j))
            flag[k] = bool(self._open)
        return flag

    def finish(self) -> list:
        """Close the events still open (marked ``open``); every event, in start order."""
        for ev in self._open.values():
            ev.open = True
            self.events.append(ev)
        self._open.clear()
        self.events.sort(key=lambda e: (e.start, e.joint))
        return self.events

    @property
    def in_contact(self) -> tuple:
        return tuple(self.joints[j] for j in sorted(self._open))


def end_effector_wrench(model, q, tau_ext) -> np.ndarray | None:
    """The wrench (N, 6: force, torque in the base frame's axes, at the origin of the last
    identified joint) whose joint torques best explain `tau_ext` -- the contact assumed at
    the end of a serial arm; None when the identified joints are not one serial chain."""
    import pinocchio as pin
    m, d = model.model, model.data
    jids = list(model._jid)
    tip = max(jids, key=lambda j: len(m.supports[j]))
    if not set(jids) <= set(m.supports[tip]):
        return None
    q = np.atleast_2d(q)
    tau_ext = np.atleast_2d(tau_ext)
    out = np.empty((q.shape[0], 6))
    for k in range(q.shape[0]):
        pin.computeJointJacobians(m, d, model.to_pinocchio_q(q[k]))
        J = pin.getJointJacobian(m, d, tip, pin.LOCAL_WORLD_ALIGNED)[:, model._idx_v]
        out[k] = np.linalg.lstsq(J.T, tau_ext[k], rcond=1e-6)[0]
    return out


class CausalVelocity:
    """Joint velocities from positions alone, causally (joint states without velocities):
    the backward difference through a first-order lag 4x faster than the observer."""

    def __init__(self, gain: float):
        self.gain = float(gain)
        self.reset()

    def reset(self) -> None:
        self._t = self._q = self._v = None

    def update(self, t, q) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, float))
        q = np.atleast_2d(np.asarray(q, float))
        out = np.zeros_like(q)
        for k in range(t.size):
            if self._t is None or t[k] <= self._t:
                v = np.zeros(q.shape[1]) if self._v is None else self._v
            else:
                dt = t[k] - self._t
                a = math.exp(-4.0 * self.gain * dt)
                v = a * self._v + (1.0 - a) * (q[k] - self._q) / dt
            self._t, self._q, self._v = t[k], q[k], v
            out[k] = v
        return out
