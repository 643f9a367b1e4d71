"""Do a recording's positions and measured velocities tell the same motion? The observer
takes both (M(q) qd, the gravity at q); where they disagree its output is not a torque
the arm felt, whatever its size.

Over a window of `WINDOW_S`, per joint, the change of the position ``a`` against the
integral of the measured velocity ``b`` over the same stretch of motion:

    mismatch = |a - b| / (|a| + |b| + v_floor W)

0 where they agree, 1 where one of them stands still while the other moves; the floor
(`FLOOR_DEAD_BANDS` x the friction dead band) keeps a joint near rest, where both are
noise, out of it. A sample's mismatch is the largest over the joints. A velocity that is
a filtered estimate lags the positions, and on a fast arm that alone would read as a
mismatch (the demo arm with its velocities 50 ms late: up to 0.72); so the first
`calibration_s` of the data measure the lag (the shift within +-`MAX_LAG_S` that best
aligns the two, least squares over every joint) and the windows are compared shifted by
it, with no judgement before (as the contact detector's calibration). The edge of a
zero-phase filter run over a recording after it was made is a mismatch (the KUKA LWR4+
log's last 0.25 s: the positions come to rest while the velocities carry on at 0.46
rad/s: 0.75); on the real arms' logs the largest elsewhere is 0.09 (Panda; KUKA 0.08,
UR10e 0.03), on the simulated demo arm 0.02, pushes included (bench/monitor.py).
`DISAGREE`: the share above which they tell different motions (one moved less than a
third of the other).
"""
from __future__ import annotations

import numpy as np

WINDOW_S = 0.05
FLOOR_DEAD_BANDS = 2.0
MAX_LAG_S = 0.1
DISAGREE = 0.5
EVERY_S = 0.005          # evaluated at least this often (a window is 10 of these)


class PositionVelocityCheck:
    """Streaming: `update` takes samples in time order, in batches of any size."""

    def __init__(self, dead_band: float, calibration_s: float, window_s: float = WINDOW_S):
        self.window = float(window_s)
        self.calibration_s = float(calibration_s)
        self.floor = FLOOR_DEAD_BANDS * max(float(dead_band), 0.0) * self.window
        self.lag: int | None = None          # samples the velocities are late by (< 0: early); None: calibrating
        self._cal: list = []
        self.reset()

    def reset(self) -> None:
        """A break in the data: the windows (and a calibration under way) start again."""
        self._t = self._q = self._i = None
        self._qd_last = None
        self._cal = []
        self._pending: list = []
        self._held = 0.0
        self._last = -np.inf

    def update(self, t, q, qd) -> np.ndarray:
        """(N,) the mismatch of each sample (0 in the calibration and until a window has
        filled). Samples arriving less than `EVERY_S` after the last evaluated one wait for
        the next evaluation and get the mismatch last evaluated (a sample at a time costs
        little more than a batch)."""
        t = np.atleast_1d(np.asarray(t, float))
        q, qd = np.atleast_2d(q), np.atleast_2d(qd)
        n = t.size
        if n and t[-1] - self._last < EVERY_S:
            self._pending.append((t, q, qd))
            return np.full(n, self._held)
        if self._pending:
            self._pending.append((t, q, qd))
            t, q, qd = (np.concatenate(x) for x in zip(*self._pending))
            self._pending = []
        out = self._evaluate(t, q, qd)
        if out.size:
            self._held, self._last = float(out[-1]), float(t[-1])
        return out[out.size - n:]

    def _evaluate(self, t, q, qd) -> np.ndarray:
        if self._t is None:
            T, Q = t, q
            integral = np.concatenate([np.zeros((1, q.shape[1])),
                                       np.cumsum(0.5 * (qd[1:] + qd[:-1]) * np.diff(t)[:, None], axis=0)])
        else:
            prev = np.concatenate([self._qd_last[None], qd[:-1]])
            steps = 0.5 * (qd + prev) * np.diff(np.concatenate([self._t[-1:], t]))[:, None]
            T, Q = np.concatenate([self._t, t]), np.concatenate([self._q, q])
            integral = np.concatenate([self._i, self._i[-1] + np.cumsum(steps, axis=0)])
        out = np.zeros(t.size)
        first = 0                       # the batch's first sample judged
        if self.lag is None:
            t0 = self._cal[0][0][0] if self._cal else t[0]
            first = int(np.searchsorted(t, t0 + self.calibration_s))
            self._cal.append((t[:first], q[:first], qd[:first]))
            if first < t.size:
                self.lag = self._estimate_lag(*(np.concatenate(x) for x in zip(*self._cal)))
                self._cal = []
        if self.lag is not None and first < t.size:
            new = np.arange(T.size - t.size + first, T.size)
            pos_end, int_end = new - max(self.lag, 0), new - max(-self.lag, 0)
            ok = np.minimum(pos_end, int_end) >= 0
            a, b = self._changes(T, Q, integral, pos_end[ok], int_end[ok])
            out[first:][ok] = self._mismatch(a, b)
        keep = max(0, int(np.searchsorted(T, T[-1] - self.window - 2 * MAX_LAG_S)) - 1)   # any shift's windows
        self._t, self._q, self._i, self._qd_last = T[keep:], Q[keep:], integral[keep:], qd[-1]
        return out

    def _changes(self, T, Q, integral, pos_end, int_end):
        """Position change over the window ending at `pos_end`, velocity integral over the one
        ending at `int_end`, each window exactly W long (values at its start interpolated: no
        sample of jitter); a window that does not fit yet gives 0 change (no mismatch)."""
        def at_start(X, end):
            ts = T[end] - self.window
            k = np.clip(np.searchsorted(T, ts), 1, T.size - 1)
            w = ((ts - T[k - 1]) / np.maximum(T[k] - T[k - 1], 1e-300))[:, None]
            return X[k - 1] * (1.0 - w) + X[k] * w
        full = ((T[pos_end] - T[0] >= self.window) & (T[int_end] - T[0] >= self.window))[:, None]
        a = np.where(full, Q[pos_end] - at_start(Q, pos_end), 0.0)
        b = np.where(full, integral[int_end] - at_start(integral, int_end), 0.0)
        return a, b

    def _mismatch(self, a, b) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            m = np.abs(a - b) / (np.abs(a) + np.abs(b) + self.floor)
        return np.nan_to_num(m, nan=0.0).max(axis=1) if m.size else np.zeros(a.shape[0])

    def _estimate_lag(self, t, q, qd) -> int:
        """The shift (samples, velocities late when > 0) that best aligns the windows' position
        changes with the velocity integrals in the calibration; 0 where nothing tells."""
        if t.size < 3:
            return 0
        steps = 0.5 * (qd[1:] + qd[:-1]) * np.diff(t)[:, None]
        integral = np.concatenate([np.zeros((1, q.shape[1])), np.cumsum(steps, axis=0)])
        dt = float(np.median(np.diff(t)))
        M = int(round(MAX_LAG_S / dt)) if dt > 0 else 0
        ends = np.arange(M, t.size - M)
        if ends.size < 10:
            return 0

        def cost(lag: int) -> float:
            a, b = self._changes(t, q, integral, ends - max(lag, 0), ends - max(-lag, 0))
            return float(np.sum((a - b) ** 2))

        coarse = max(1, M // 20)            # every coarse step, then every sample around the best of them
        best = 0
        for lags in (range(-M, M + 1, coarse), None):
            if lags is None:
                lags = range(max(-M, best - coarse + 1), min(M, best + coarse - 1) + 1)
            costs = {lag: cost(lag) for lag in sorted(set(lags) | {0}, key=abs)}   # ties: the smallest shift
            low = min(costs.values())
            best = next(lag for lag, c in costs.items() if c <= low * (1 + 1e-9))
        return best


def set_aside(events, t, mismatch, threshold: float = DISAGREE) -> tuple[list, list]:
    """(events kept, events set aside): an event during which (from one window before its
    start to its end) the positions and the velocities tell different motions is no
    judgement of a contact; each set-aside event as a dict with the reason."""
    t, mismatch = np.asarray(t, float), np.asarray(mismatch, float)
    kept, aside = [], []
    for e in events:
        a, b = np.searchsorted(t, [e.start - WINDOW_S, e.end], side="left")
        worst = float(np.max(mismatch[a:b + 1])) if b + 1 > a and mismatch.size else 0.0
        if worst > threshold:
            d = e.as_dict()
            d["reason"] = (f"the positions and the velocities tell different motions there (mismatch {worst:.2f} "
                           f"over {WINDOW_S * 1e3:.0f} ms, above {threshold:g}: one moved less than a third of the "
                           "other; the edge of a filter run over the recording?): not judged as a contact")
            aside.append(d)
        else:
            kept.append(e)
    return kept, aside
