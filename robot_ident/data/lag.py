"""The lag between the joint-state topic and the current (effort) topic, measured on
positions.

Two topics stamped by different clocks or at different points of the driver's loop
can be offset by tens of milliseconds; joined as they are, the efforts no longer
match the motion (a 20 ms offset gives ~5 % parameter error on the demo arm) while
the fit residual barely changes -- the parameters absorb the shift -- so the offset
cannot be read from the identification. It is measured where it is unambiguous:
when the current topic also carries the joint positions (ros2_control's
``/dynamic_joint_states`` publishes every state interface), the shift ``L`` that
best aligns them with the joint-state positions (least squares over every moving
joint, the worst 2 % of samples left out so that glitches do not steer it, on a grid of 0.5 ms steps within ``+-max_lag_s``, refined by a parabola
through the best three points).

Convention: the current topic's sample stamped ``t`` was taken at ``t - L`` (its
stamps are late by ``L`` when ``L > 0``); `synchronise` corrects by moving them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_LAG_S = 0.05          # default bound of the search (config sync.max_lag_s)
CORRECT_ABOVE_S = 0.0005  # default: shifts smaller than this are reported, not applied (sync.lag_threshold_s)
STEP_S = 0.0005
COARSE = 5               # the coarse search's step, in STEP_S
# A corrected lag moves the stamps by whole multiples of this: far below the estimate's
# accuracy and a sample period, and it lets two estimates a few ns apart (the chunked
# reader's, on its first stretch, and the whole recording's) shift the stamps alike.
SHIFT_RESOLUTION_S = 1e-5
# The mismatch grows like |velocity| x |shift| away from the estimate: a mismatch at the
# search bound (0.05 s) 100 x the residual one locates the lag to about 0.5 ms.
DETERMINED_CONTRAST = 100.0


@dataclass
class LagEstimate:
    lag_s: float               # nan when not measurable
    max_lag_s: float
    at_bound: bool             # the best shift is at the edge of the search
    rms_before: float          # RMS position mismatch at zero shift
    rms_after: float           # ... at the estimate
    rms_far: float = float("nan")   # ... at the nearer end of the search (+-max_lag_s)

    @property
    def determined(self) -> bool:
        """The data pin the lag down to about the search step: shifting by the search
        bound costs `DETERMINED_CONTRAST` x the mismatch at the estimate (positions at
        rest only show their noise, and any shift fits them)."""
        return bool(np.isfinite(self.lag_s) and self.rms_far > DETERMINED_CONTRAST * self.rms_after)

    def summary(self) -> str:
        if not np.isfinite(self.lag_s):
            return "lag between the topics: not measurable"
        return (f"lag between the topics: {1e3 * self.lag_s:+.2f} ms from positions (current stamps late when > 0; "
                f"position mismatch RMS {self.rms_before:.3g} -> {self.rms_after:.3g})")


def estimate_lag_from_positions(t_states: np.ndarray, q_states: np.ndarray, t_other: np.ndarray,
                                q_other: np.ndarray, max_lag_s: float = MAX_LAG_S) -> LagEstimate:
    """`t_*` seconds on one time base, `q_*` (N, n) positions of the same joints."""
    n_steps = max(1, int(round(max_lag_s / STEP_S)))
    lags = np.linspace(-n_steps * STEP_S, n_steps * STEP_S, 2 * n_steps + 1)
    inner = (t_other - lags[-1] >= t_states[0]) & (t_other + lags[-1] <= t_states[-1])
    moving = np.ptp(q_states, axis=0) > 1e-6
    if inner.sum() < 10 or not moving.any():
        return LagEstimate(float("nan"), max_lag_s, False, float("nan"), float("nan"))
    te, qe = t_other[inner], q_other[inner][:, moving]
    qs = q_states[:, moving]
    keep = max(1, int(0.98 * te.size))

    def mismatch(L):
        pred = np.stack([np.interp(te - L, t_states, qs[:, k]) for k in range(qs.shape[1])], axis=1)
        d = pred - qe
        err = (d * d) @ np.full(d.shape[1], 1.0 / d.shape[1])
        if keep < err.size:    # trimmed: a few glitches do not steer it (the smallest 98 %, unordered)
            err = np.partition(err, keep - 1)[:keep]
        return float(np.mean(err))

    # Coarse to fine: every COARSE-th shift (both ends included), then every shift within a
    # coarse step of the best. The mismatch grows monotonically away from the lag (the
    # motion is smooth on the scale of the search), so this finds the full grid's minimum
    # with a quarter of the evaluations; where it does not (positions at rest: a flat,
    # noisy mismatch), the estimate is not `determined` either way.
    cost = np.full(lags.size, np.inf)
    coarse = np.unique(np.r_[np.arange(0, lags.size, COARSE), lags.size - 1])
    for i in coarse:
        cost[i] = mismatch(lags[i])
    c = int(coarse[np.argmin(cost[coarse])])
    for i in range(max(0, c - COARSE), min(lags.size, c + COARSE + 1)):
        if not np.isfinite(cost[i]):
            cost[i] = mismatch(lags[i])
    if not np.isfinite(cost[n_steps]):
        cost[n_steps] = mismatch(lags[n_steps])     # the zero shift, for rms_before
    i = int(np.argmin(cost))
    lag = float(lags[i])
    if 0 < i < lags.size - 1:
        y0, y1, y2 = cost[i - 1], cost[i], cost[i + 1]
        den = y0 - 2 * y1 + y2
        if np.isfinite(den) and den > 0:
            lag += 0.5 * STEP_S * (y0 - y2) / den
    return LagEstimate(lag, max_lag_s, i in (0, lags.size - 1), float(np.sqrt(cost[n_steps])),
                       float(np.sqrt(cost[i])), float(np.sqrt(min(cost[0], cost[-1]))))
