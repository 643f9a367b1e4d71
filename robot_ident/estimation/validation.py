"""Validation by RMS (source A step 6): predicted versus measured effort per joint.

The prediction uses the processed (filtered) states; it is compared with the effort
*as measured* (``ProcessedData.effort_raw``), so a perfect model scores the effort
noise: ``rms / noise_std`` close to 1 is the best achievable figure.

Next to the relative RMS (``rms / RMS(measured)``, which exceeds 100 % on a joint
whose effort stays near zero however good the fit) the report gives the NRMS:
``rms`` over the joint's effort limit from the URDF, or, when the URDF has none,
over the measured effort range (max - min); ``nrms_reference`` says which.

``slow_rms`` is the RMS of the residual as a momentum observer of gain ``slow_gain``
passes it (two first-order lags, monitor/observer.py; the monitor's default gain): white
effort noise mostly filtered away, a slow model error whole; ``slow_peak`` its largest
value and ``slow_peak_t`` when. It is taken on the residual of the *filtered* effort: the
processed samples run at the decimated rate (200 Hz by default), where white noise
through the lags would keep 0.53 of its RMS against 0.22 at the 1 kHz a monitor runs at;
the zero-phase filter takes that noise out first (0.17 on white noise at any rate, a
slow error unchanged). The monitor's contact threshold is kept above the peaks such an
error reaches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import defaults
from ..data.signals import ProcessedData
from ..errors import SignalError
from ..model.robot import RobotModel
from ..model.transmission import dead_band_rows

# A joint with fewer moving held-out samples than this is "not validated" (by name);
# the others are validated and the result is kept.
MIN_VALIDATION_SAMPLES = 10
LAG_GAP_S = 0.1      # a longer step between samples (or a step back: another run) restarts the lags


@dataclass
class ValidationReport:
    joint_names: tuple[str, ...]
    rms: np.ndarray              # (n,) RMS of measured - predicted [N*m or N] (NaN: not validated)
    relative_rms: np.ndarray     # (n,) rms / RMS(measured)
    noise_ratio: np.ndarray | None  # (n,) rms / effort noise std, when the noise is known
    max_abs_error: np.ndarray    # (n,)
    n_samples: np.ndarray        # (n,) samples used per joint
    moving_threshold: float | None
    t: np.ndarray                # sample times
    measured: np.ndarray         # (N, n) measured effort
    predicted: np.ndarray        # (N, n)
    nrms: np.ndarray | None = None          # (n,) rms / nrms_scale
    nrms_scale: np.ndarray | None = None    # (n,) effort limit or measured range [N*m or N]
    nrms_reference: tuple[str, ...] = ()    # per joint: 'effort_limit' or 'effort_range'
    not_validated: dict = field(default_factory=dict)   # joint -> why (too few moving samples)
    slow_rms: np.ndarray | None = None      # (n,) RMS of the residual through the observer's lags
    slow_gain: float | None = None          # their gain [1/s]
    slow_peak: np.ndarray | None = None     # (n,) its largest |value|
    slow_peak_t: np.ndarray | None = None   # (n,) its time [s, the samples' clock]

    @property
    def validated(self) -> np.ndarray:
        """(n,) True for the joints with a validation figure."""
        return np.array([j not in self.not_validated for j in self.joint_names])

    def as_dict(self) -> dict:
        out = {}
        for k, j in enumerate(self.joint_names):
            if j in self.not_validated:
                out[j] = {"validated": False, "reason": self.not_validated[j], "samples": int(self.n_samples[k])}
                continue
            d = {"rms": float(self.rms[k]), "relative_rms": float(self.relative_rms[k]),
                 "max_abs_error": float(self.max_abs_error[k]), "samples": int(self.n_samples[k])}
            if self.noise_ratio is not None:
                d["rms_over_noise_std"] = float(self.noise_ratio[k])
            if self.slow_rms is not None and np.isfinite(self.slow_rms[k]):
                d["slow_rms"] = float(self.slow_rms[k])
                d["slow_gain"] = float(self.slow_gain)
                d["slow_peak"] = float(self.slow_peak[k])
                d["slow_peak_t"] = float(self.slow_peak_t[k])
            if self.nrms is not None:
                d["nrms"] = float(self.nrms[k])
                d["nrms_reference"] = self.nrms_reference[k]
                d["nrms_scale"] = float(self.nrms_scale[k])
            out[j] = d
        return out


class RmsAccumulator:
    """Per-joint RMS of measured - predicted over masked samples that arrive in blocks in
    time order; the report's time series keep every `every`-th sample (counted over all
    blocks). A whole recording in memory is one block (`rms_report`). Also the RMS of the
    residual through two first-order lags of gain `slow_gain` (the module's doc), restarted
    where the samples break off."""

    def __init__(self, joint_names, every: int = 1, slow_gain: float = defaults.MONITOR_GAIN):
        self.joint_names = tuple(joint_names)
        n = len(self.joint_names)
        self.ss, self.ref, self.mx = np.zeros(n), np.zeros(n), np.zeros(n)
        self.cnt = np.zeros(n, dtype=np.int64)
        self.lo, self.hi = np.full(n, np.inf), np.full(n, -np.inf)    # measured range (NRMS fallback)
        self.every = max(1, int(every))
        self.done = 0
        self.ts, self.meas, self.pred = [], [], []
        self.slow_gain = float(slow_gain)
        self.slow_ss, self.slow_mx, self.slow_mx_t = np.zeros(n), np.zeros(n), np.full(n, np.nan)
        self._lag_t, self._lag_y = None, None

    def _lagged(self, t, e) -> np.ndarray:
        """e (N, n) through the two lags, exp(-K dt) at each piece's median step; they carry
        over from the last block, and restart at 0 after a gap or a step back in time. Every
        sample drives them, as every sample drives the observer; only the masked ones count."""
        # 0.7 s to import: only where used (data/signals.py)
        from scipy.signal import lfilter
        t = np.asarray(t, float)
        step = t - np.concatenate([[np.nan if self._lag_t is None else self._lag_t], t[:-1]])
        fresh = ~((step > 0) & (step <= LAG_GAP_S))
        cuts = np.unique(np.concatenate([[0], np.flatnonzero(fresh), [t.size]]))
        out = np.empty_like(e)
        for a, b in zip(cuts[:-1], cuts[1:]):
            if fresh[a]:
                self._lag_y = np.zeros((2, e.shape[1]))
            steps = step[a + 1:b] if fresh[a] else step[a:b]
            g = math.exp(-self.slow_gain * float(np.median(steps))) if steps.size else 1.0
            y1 = lfilter([1.0 - g], [1.0, -g], e[a:b], axis=0, zi=g * self._lag_y[:1])[0]
            out[a:b] = lfilter([1.0 - g], [1.0, -g], y1, axis=0, zi=g * self._lag_y[1:])[0]
            self._lag_y = np.stack([y1[-1], out[b - 1]])
        self._lag_t = t[-1]
        return out

    def add(self, t, measured, predicted, mask=None, filtered=None) -> None:
        """`filtered`: the zero-phase filtered effort, whose residual the lags take (module
        doc); without it, the measured one's."""
        measured = np.asarray(measured, float)
        predicted = np.asarray(predicted, float)
        if measured.shape != predicted.shape:
            raise SignalError(f"measured {measured.shape} and predicted {predicted.shape} efforts differ in shape")
        mask = np.ones(measured.shape, bool) if mask is None else np.asarray(mask, bool)
        e = measured - predicted
        self.ss += np.sum(np.where(mask, e ** 2, 0.0), axis=0)
        if e.shape[0]:
            lag = np.abs(self._lagged(t, e if filtered is None else np.asarray(filtered, float) - predicted))
            lag = np.where(mask, lag, 0.0)
            self.slow_ss += np.sum(lag ** 2, axis=0)
            k = np.argmax(lag, axis=0)
            top = lag[k, np.arange(lag.shape[1])]
            new = top > self.slow_mx
            self.slow_mx = np.where(new, top, self.slow_mx)
            self.slow_mx_t = np.where(new, np.asarray(t, float)[k], self.slow_mx_t)
        self.ref += np.sum(np.where(mask, measured ** 2, 0.0), axis=0)
        self.mx = np.maximum(self.mx, np.max(np.where(mask, np.abs(e), 0.0), axis=0, initial=0.0))
        self.cnt += mask.sum(axis=0)
        self.lo = np.minimum(self.lo, np.min(np.where(mask, measured, np.inf), axis=0, initial=np.inf))
        self.hi = np.maximum(self.hi, np.max(np.where(mask, measured, -np.inf), axis=0, initial=-np.inf))
        idx = np.arange(-self.done % self.every, measured.shape[0], self.every)
        self.ts.append(np.asarray(t)[idx])
        self.meas.append(measured[idx])
        self.pred.append(predicted[idx])
        self.done += measured.shape[0]

    def report(self, noise_std=None, moving_threshold=None, effort_limit=None) -> ValidationReport:
        """The report; a joint with fewer than MIN_VALIDATION_SAMPLES masked samples is not
        validated (NaN figures, the reason in `not_validated`), the others are."""
        n = len(self.joint_names)
        ok = self.cnt >= MIN_VALIDATION_SAMPLES
        c = np.where(ok, self.cnt, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            rms = np.where(ok, np.sqrt(self.ss / c), np.nan)
            slow = np.where(ok, np.sqrt(self.slow_ss / c), np.nan)
            rref = np.sqrt(self.ref / c)
            rel = np.where(ok, np.where(rref > 0, rms / np.where(rref > 0, rref, 1.0), np.inf), np.nan)
        ratio = None if noise_std is None else rms / np.asarray(noise_std, float)
        nrms, scale, refs = nrms_of(rms, effort_limit, np.where(ok, self.hi - self.lo, 0.0))
        thr = None if moving_threshold is None else np.broadcast_to(np.asarray(moving_threshold, float), (n,))
        why = {self.joint_names[k]: f"only {int(self.cnt[k])} moving held-out sample(s)"
                                    + ("" if thr is None else f" (|velocity| > {thr[k]:g} outside reversals)")
                                    + f"; at least {MIN_VALIDATION_SAMPLES} are needed"
               for k in range(n) if not ok[k]}
        cat = (lambda a, w: np.concatenate(a) if a else np.zeros((0,) if w == 0 else (0, n)))  # noqa: E731
        return ValidationReport(self.joint_names, rms, rel, ratio, np.where(ok, self.mx, np.nan), self.cnt.astype(int),
                                moving_threshold, cat(self.ts, 0), cat(self.meas, n), cat(self.pred, n), nrms, scale,
                                refs, why, slow, self.slow_gain, np.where(ok, self.slow_mx, np.nan), self.slow_mx_t)


def not_validated_lines(report: ValidationReport | None) -> list[str]:
    """One ``warning:`` line per joint the validation could not judge."""
    if report is None:
        return []
    return [f"warning: joint {j!r}: not validated: {why}" for j, why in report.not_validated.items()]


def rms_report(t, measured, predicted, joint_names, mask=None, noise_std=None,
               moving_threshold=None, effort_limit=None, filtered=None) -> ValidationReport:
    """Per-joint RMS of measured - predicted over the samples where mask is True; NRMS
    against `effort_limit` (per joint; a non-positive or non-finite entry falls back on
    the measured effort range)."""
    acc = RmsAccumulator(joint_names)
    acc.add(t, measured, predicted, mask, filtered)
    return acc.report(noise_std, moving_threshold, effort_limit)


def nrms_of(rms: np.ndarray, effort_limit, effort_range: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple]:
    """(NRMS, its scale, reference per joint): RMS over the effort limit, or over the measured
    effort range where the limit is not positive and finite."""
    n = len(rms)
    limit = (np.full(n, np.nan) if effort_limit is None
             else np.broadcast_to(np.asarray(effort_limit, float), (n,)))
    use_limit = np.isfinite(limit) & (limit > 0)
    scale = np.where(use_limit, limit, np.asarray(effort_range, float))
    refs = tuple("effort_limit" if u else "effort_range" for u in use_limit)
    with np.errstate(divide="ignore"):
        nrms = np.where(scale > 0, rms / np.where(scale > 0, scale, 1.0), np.inf)
    return nrms, scale, refs


def validate(result, model: RobotModel, data: ProcessedData, moving_threshold: float | None = None,
             noise_std=None, reversal_guard_s: float = 0.0) -> ValidationReport:
    """Validate an identification result on held-out processed data (outside the
    friction dead band when `moving_threshold` is given)."""
    predicted = result.predict(model, data.q, data.qd, data.qdd)
    mask = None if moving_threshold is None else dead_band_rows(model, data, moving_threshold, reversal_guard_s)
    return rms_report(data.t, data.effort_raw, predicted, data.joint_names, mask, noise_std, moving_threshold,
                      effort_limit=model.limits.effort, filtered=data.effort)
