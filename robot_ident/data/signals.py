"""Time-stamped joint samples and the signal processing that turns them into
identification data.

`Recording` holds what was measured: times, positions, optionally velocities, and
efforts for named joints, on a uniform time grid. `process` turns it into
`ProcessedData` ready for the regressor (source A step 4):

1. zero-phase Butterworth low-pass (``scipy.signal.sosfiltfilt``) of positions,
   measured velocities (if any) and efforts, with the same filter so the
   phases of states and efforts agree;
2. velocity: the filtered measured velocity if the recording has one, otherwise
   the central difference of the filtered position; acceleration: the central
   difference of that velocity (``numpy.gradient``, second order);
3. trim the filter's edge transients, then decimate by keeping every k-th sample
   (the low-pass already removed content above the new Nyquist frequency, which is
   checked).

The unfiltered efforts at the kept samples are carried along as ``effort_raw`` so
that validation can compare predictions with what was really measured.

``scipy.signal`` takes 0.7 s to import: it is imported where a filter is made, so a
command starts reading its bag (data/processing.py) while this process imports it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..errors import ConfigError, SignalError


def _check_array(name: str, a, shape: tuple, joint_names: Sequence[str], t) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if a.shape != shape:
        raise SignalError(f"recording field {name!r} has shape {a.shape}, expected {shape}")
    bad = ~np.isfinite(a)
    if bad.any():
        rows, cols = np.nonzero(bad)
        j = cols[0]
        raise SignalError(
            f"recording field {name!r} of joint {joint_names[j]!r} is not finite at t = {t[rows[0]]:.6g} s "
            f"({int(bad[:, j].sum())} bad samples on that joint, {int(bad.sum())} in total)")
    return a


@dataclass
class Recording:
    """Measured samples of named joints on a common time base (SI units)."""

    t: np.ndarray
    joint_names: tuple[str, ...]
    q: np.ndarray
    effort: np.ndarray
    qd: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.joint_names = tuple(self.joint_names)
        if len(set(self.joint_names)) != len(self.joint_names):
            raise SignalError(f"recording lists a joint twice: {self.joint_names}")
        t = np.asarray(self.t, dtype=float)
        if t.ndim != 1:
            raise SignalError(f"recording time must be one-dimensional, got shape {t.shape}")
        if not np.isfinite(t).all():
            raise SignalError(f"recording time has {int((~np.isfinite(t)).sum())} non-finite stamps")
        if t.size >= 2:
            dt = np.diff(t)
            if (dt <= 0).any():
                k = int(np.flatnonzero(dt <= 0)[0])
                raise SignalError(f"recording time is not strictly increasing at sample {k + 1} "
                                  f"(t = {t[k]:.6f} s then {t[k + 1]:.6f} s)")
        self.t = t
        shape = (t.size, len(self.joint_names))
        self.q = _check_array("position", self.q, shape, self.joint_names, t)
        self.effort = _check_array("effort", self.effort, shape, self.joint_names, t)
        if self.qd is not None:
            self.qd = _check_array("velocity", self.qd, shape, self.joint_names, t)

    @property
    def n_samples(self) -> int:
        return self.t.size

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0]) if self.t.size else 0.0

    @property
    def sample_rate(self) -> float:
        if self.t.size < 2:
            raise SignalError("a recording needs at least two samples to have a sample rate")
        return 1.0 / float(np.median(np.diff(self.t)))

    def reorder(self, joint_names: Sequence[str]) -> "Recording":
        """The same recording with columns in the given joint order (by name)."""
        missing = [j for j in joint_names if j not in self.joint_names]
        if missing:
            raise SignalError(f"recording has no joint(s) {', '.join(map(repr, missing))}; "
                              f"it has {', '.join(self.joint_names)}")
        idx = [self.joint_names.index(j) for j in joint_names]
        return replace(self, joint_names=tuple(joint_names), q=self.q[:, idx],
                       effort=self.effort[:, idx], qd=None if self.qd is None else self.qd[:, idx])

    def slice_time(self, t0: float, t1: float) -> "Recording":
        keep = (self.t >= t0) & (self.t <= t1)
        return replace(self, t=self.t[keep], q=self.q[keep], effort=self.effort[keep],
                       qd=None if self.qd is None else self.qd[keep])


@dataclass(frozen=True)
class FilterOptions:
    """Low-pass, differentiation and decimation settings."""

    cutoff_hz: float = 20.0
    order: int = 4
    target_rate_hz: float | None = 200.0   # None: keep the recording's rate
    trim_s: float = 0.2                    # dropped at both ends (filter transients)
    use_measured_velocity: bool = True

    def __post_init__(self):
        if not self.cutoff_hz > 0:
            raise SignalError(f"cutoff_hz must be positive, got {self.cutoff_hz}")
        if self.order < 1:
            raise SignalError(f"filter order must be >= 1, got {self.order}")
        if self.target_rate_hz is not None and not self.target_rate_hz > 0:
            raise SignalError(f"target_rate_hz must be positive, got {self.target_rate_hz}")
        if not self.trim_s >= 0:
            raise SignalError(f"trim_s must be >= 0, got {self.trim_s}")


@dataclass
class ProcessedData:
    """Filtered states and efforts at the identification samples."""

    t: np.ndarray
    joint_names: tuple[str, ...]
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    effort: np.ndarray       # filtered
    effort_raw: np.ndarray   # as measured, at the same samples

    @property
    def n_samples(self) -> int:
        return self.t.size

    def moving_mask(self, threshold: float, reversal_guard_s: float = 0.0) -> np.ndarray:
        """(N, n) True where the joint is outside the friction dead band.

        A sample is in the dead band if ``|qd| <= threshold`` or if it lies within
        ``reversal_guard_s`` seconds of a velocity reversal: there the Coulomb step makes
        an acceleration transient that the low-pass filter smears over about 1/cutoff
        seconds, so neither a smooth friction model nor the filtered acceleration holds.
        """
        mask = np.abs(self.qd) > threshold
        if reversal_guard_s > 0 and self.t.size > 1:
            for k in range(self.qd.shape[1]):
                s = np.signbit(self.qd[:, k])
                flips = np.flatnonzero(s[1:] != s[:-1])
                if flips.size == 0:
                    continue
                tf = 0.5 * (self.t[flips] + self.t[flips + 1])
                pos = np.clip(np.searchsorted(tf, self.t), 1, tf.size)
                nearest = np.minimum(np.abs(self.t - tf[pos - 1]), np.abs(tf[np.minimum(pos, tf.size - 1)] - self.t))
                mask[:, k] &= nearest > reversal_guard_s
        return mask

    def subset(self, keep: np.ndarray) -> "ProcessedData":
        return ProcessedData(self.t[keep], self.joint_names, self.q[keep], self.qd[keep],
                             self.qdd[keep], self.effort[keep], self.effort_raw[keep])


def check_uniform(t: np.ndarray, tolerance: float = 0.01) -> float:
    """Return the sample period; raise if the grid is not uniform within `tolerance`."""
    if t.size < 3:
        raise SignalError(f"a recording needs at least 3 samples, got {t.size}")
    dt = np.diff(t)
    h = float(np.median(dt))
    worst = float(np.max(np.abs(dt - h)))
    if worst > tolerance * h:
        k = int(np.argmax(np.abs(dt - h)))
        raise SignalError(
            f"samples are not on a uniform time grid: step {dt[k]:.6g} s at t = {t[k]:.6g} s versus "
            f"median {h:.6g} s; resample the streams first (signals are synchronised onto a grid)")
    return h


def lowpass(x: np.ndarray, rate_hz: float, cutoff_hz: float, order: int = 4) -> np.ndarray:
    """Zero-phase Butterworth low-pass along axis 0."""
    nyq = 0.5 * rate_hz
    if not cutoff_hz < nyq:
        raise SignalError(f"low-pass cutoff {cutoff_hz} Hz must be below the Nyquist frequency "
                          f"{nyq:.6g} Hz of the {rate_hz:.6g} Hz recording")
    sos = butter_sos(order, cutoff_hz / nyq)
    padlen = min(x.shape[0] - 1, 3 * (2 * len(sos) + 1) * 4)
    # 0.7 s to import: where filters are made (module doc)
    from scipy import signal as sps
    return sps.sosfiltfilt(sos, x, axis=0, padlen=padlen)


def butter_sos(order: int, wn: float) -> np.ndarray:
    """The Butterworth low-pass's second-order sections (designed once per order and
    normalised cutoff: every window of a filter uses the same)."""
    return _butter_sos(order, wn).copy()


@lru_cache(maxsize=256)
def _butter_sos(order: int, wn: float) -> np.ndarray:
    from scipy import signal as sps
    sos = sps.butter(order, wn, output="sos")
    sos.setflags(write=False)
    return sos


def differentiate(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Second-order central differences along axis 0 (one-sided at the ends)."""
    return np.gradient(x, t, axis=0, edge_order=2)


def filtered(rec: Recording, opt: FilterOptions) -> tuple:
    """(q, qd, qdd, effort, rate) of the whole recording, low-passed and differentiated (the
    arrays may run backwards in memory: `process` copies what it keeps)."""
    h = check_uniform(rec.t)
    fs = 1.0 / h
    q = lowpass(rec.q, fs, opt.cutoff_hz, opt.order)
    effort = lowpass(rec.effort, fs, opt.cutoff_hz, opt.order)
    if rec.qd is not None and opt.use_measured_velocity:
        qd = lowpass(rec.qd, fs, opt.cutoff_hz, opt.order)
    else:
        qd = differentiate(q, rec.t)
    return q, qd, differentiate(qd, rec.t), effort, fs


def process(rec: Recording, options: FilterOptions | None = None) -> ProcessedData:
    """Filter, differentiate, trim and decimate a recording."""
    opt = options or FilterOptions()
    q, qd, qdd, effort, fs = filtered(rec, opt)
    step = 1
    if opt.target_rate_hz is not None and opt.target_rate_hz < fs:
        step = max(1, int(round(fs / opt.target_rate_hz)))
        if opt.cutoff_hz >= 0.5 * fs / step:
            raise SignalError(f"cutoff {opt.cutoff_hz} Hz is not below the Nyquist frequency "
                              f"{0.5 * fs / step:.6g} Hz of the decimated rate; lower the cutoff or raise "
                              "target_rate_hz")
    n_trim = int(round(opt.trim_s * fs))
    idx = np.arange(n_trim, rec.n_samples - n_trim, step)
    if idx.size < 3:
        raise SignalError(f"recording of {rec.duration:.3g} s is too short after trimming "
                          f"{opt.trim_s} s at both ends")
    return ProcessedData(rec.t[idx], rec.joint_names, q[idx], qd[idx], qdd[idx], effort[idx],
                         rec.effort[idx].copy())


def concatenate(parts: Sequence[ProcessedData]) -> ProcessedData:
    """Join processed segments (each filtered on its own, so no filter crosses a gap)."""
    if not parts:
        raise SignalError("no processed segment to concatenate")
    names = parts[0].joint_names
    for p in parts[1:]:
        if p.joint_names != names:
            raise SignalError(f"segments have different joints: {names} and {p.joint_names}")
    cat = lambda attr: np.concatenate([getattr(p, attr) for p in parts], axis=0)  # noqa: E731
    return ProcessedData(cat("t"), names, cat("q"), cat("qd"), cat("qdd"), cat("effort"), cat("effort_raw"))


def decimation_stride(n: int, max_samples: int) -> int:
    """The smallest stride that leaves at most max_samples of n rows."""
    if max_samples < 1:
        raise ConfigError(f"max_samples must be >= 1, got {max_samples}")
    return max(1, -(-int(n) // int(max_samples)))
