"""Time handling of `sync.synchronise`: clock steps back cut a stream into passes
(`step_boundaries`), passes of the two topics are paired by receive time
(`pair_passes`), the current topic's lag is measured on positions and corrected
(`align_topics`, data/lag.py), and gaps split the data into runs (`runs`,
`intersect`); `interp` joins a run onto the grid. See the rules in data/sync.py."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import SignalError
from .joint_stream import NS_PER_S

LATE_MAX = 3             # up to this many messages in a row below the latest stamp: delivered late


@dataclass
class Pass:
    t_ns: np.ndarray               # sorted, unique, valid
    values: dict                   # field -> (m, n)
    rx_ns: np.ndarray | None = None   # receive times of the same samples, if known

    def within(self, lo: int, hi: int) -> "Pass":
        """The samples received in [lo, hi]."""
        k = (self.rx_ns >= lo) & (self.rx_ns <= hi)
        return Pass(self.t_ns[k], {f: v[k] for f, v in self.values.items()}, self.rx_ns[k])


def step_boundaries(stamps: np.ndarray) -> list[int]:
    """Indices where the clock stepped back (rule 2). A message stamped before the latest
    one so far was *delivered late* only if it fills a hole in what came before (its
    neighbouring stamps are more than 1.5 periods apart) and at most LATE_MAX messages
    in a row are late; anything else -- a long run below the latest stamp, or a stamp
    that lands among existing ones, which is what even a one-period clock step does --
    is a clock step and cuts the stream."""
    period = median_period_ns(stamps)
    out, a, M = [], 0, stamps.size
    while a < M - 1:
        s = stamps[a:]
        prev_max = np.maximum.accumulate(s)[:-1]
        below = np.concatenate([[False], s[1:] < prev_max])
        if not below.any():
            break
        edges = np.diff(np.concatenate([[0], below.astype(np.int8), [0]]))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        cut = None
        for r0, r1 in zip(starts, ends):
            if r1 - r0 > LATE_MAX or not math.isfinite(period):
                cut = r0
                break
            before = np.sort(s[:r0])
            for i in range(r0, r1):
                k = int(np.searchsorted(before, s[i]))
                lo = before[k - 1] if k > 0 else -np.inf
                hi = before[k] if k < before.size else np.inf
                if hi - lo <= 1.5 * period:
                    cut = r0
                    break
            if cut is not None:
                break
        if cut is None:
            break
        out.append(a + int(cut))
        a += int(cut)
    return out


def median_period_ns(stamps: np.ndarray) -> float:
    d = np.diff(stamps)
    d = d[d > 0]
    if d.size == 0:
        return float("nan")
    return float(np.median(d))


def pair_passes(sp: list[Pass], ep: list[Pass], s_topic: str, e_topic: str,
                 notes: list) -> tuple[list[tuple[Pass, Pass]], int]:
    """Pairs of passes to join (rule 2) and the number of pairs dropped for a clock offset
    that disagrees with the longest pair's."""
    if any(p.rx_ns is None for p in sp + ep):
        if len(sp) != len(ep):
            raise SignalError(f"topic {s_topic!r} jumps back in time {len(sp) - 1} time(s) but topic "
                              f"{e_topic!r} {len(ep) - 1} time(s), and without receive times the passes "
                              "cannot be paired")
        return list(zip(sp, ep)), 0
    if len(sp) == 1 and len(ep) == 1:
        return [(sp[0], ep[0])], 0
    cand = []
    for ps in sp:
        if ps.t_ns.size == 0:
            continue
        for pe in ep:
            if pe.t_ns.size == 0:
                continue
            lo = max(int(ps.rx_ns.min()), int(pe.rx_ns.min()))
            hi = min(int(ps.rx_ns.max()), int(pe.rx_ns.max()))
            if hi <= lo:
                continue
            a, b = ps.within(lo, hi), pe.within(lo, hi)
            if a.t_ns.size < 2 or b.t_ns.size < 2:
                continue
            la, lb = a.t_ns - a.rx_ns, b.t_ns - b.rx_ns
            spread = float(np.median(np.abs(la - np.median(la))) + np.median(np.abs(lb - np.median(lb))))
            cand.append((hi - lo, float(np.median(la) - np.median(lb)), spread, a, b))
    if not cand:
        return [], 0
    # reference: among the long pairs (>= half the longest), the one whose clocks agree best
    # (one robot's topics are normally stamped by one clock: offset ~ 0)
    longest = max(c[0] for c in cand)
    ref = min((c for c in cand if c[0] >= 0.5 * longest), key=lambda c: abs(c[1]))
    tol = max(1e-3 * NS_PER_S, 10.0 * ref[2])
    pairs, dropped = [], 0
    for dur, off, _, a, b in sorted(cand, key=lambda c: int(c[3].rx_ns[0])):
        if abs(off - ref[1]) > tol:
            dropped += 1
            if dur > tol:
                notes.append(f"{dur / NS_PER_S:.3g} s of data dropped: the clocks of topics {s_topic!r} and "
                             f"{e_topic!r} disagree there by {(off - ref[1]) / NS_PER_S * 1e3:+.4g} ms more than "
                             "in the rest of the recording (the clock of one topic stepped)")
            continue
        pairs.append((a, b))
    return pairs, dropped


def align_topics(pairs, position_field: str, opt, s_topic: str, e_topic: str, notes: list, given=None):
    """Measure the lag of the current topic from the positions it also carries (data/lag.py)
    on the longest pair; move its stamps when the lag exceeds the threshold. A lag at the
    search bound is an error: the topics are not on one clock. `given` (a `LagEstimate`
    measured elsewhere: the chunked reader's first stretch) is applied instead of measuring,
    so that every stretch of a recording is shifted alike."""
    from .lag import CORRECT_ABOVE_S, MAX_LAG_S, estimate_lag_from_positions
    max_lag = opt.max_lag_s or MAX_LAG_S
    thr = opt.lag_threshold_s or CORRECT_ABOVE_S
    if given is not None:
        return _apply_lag(pairs, given, thr, s_topic, e_topic, notes)
    ps, pe = max(pairs, key=lambda p: min(p[0].t_ns.size, p[1].t_ns.size))
    ok = np.isfinite(pe.values[position_field]).all(axis=1)     # joints without a position interface
    if ok.sum() < 10:
        return pairs, None, False
    o = int(ps.t_ns[0])
    qs, qe = ps.values[position_field], pe.values[position_field][ok]
    est = estimate_lag_from_positions((ps.t_ns - o) / NS_PER_S, qs, (pe.t_ns[ok] - o) / NS_PER_S, qe, max_lag)
    if not math.isfinite(est.lag_s):
        return pairs, est, False
    span = lambda q: np.percentile(q, 99, axis=0) - np.percentile(q, 1, axis=0)  # noqa: E731  (spike-proof)
    span_s, span_e = span(qs), span(qe)
    for k in range(qs.shape[1]):
        if span_s[k] > 1e-3 and not 0.8 <= span_e[k] / span_s[k] <= 1.25:
            raise SignalError(f"the positions of joint {k + 1} of topic {e_topic!r} span {span_e[k]:.4g}, those of "
                              f"{s_topic!r} {span_s[k]:.4g} ({span_s[k] / max(span_e[k], 1e-300):.3g} x): one topic "
                              "in degrees, another unit, or another joint order?")
    if est.at_bound:
        raise SignalError(f"topic {e_topic!r} is offset from {s_topic!r} by {1e3 * est.lag_s:+.3g} ms or more "
                          f"(their positions do not line up within sync.max_lag_s = {max_lag:g} s): are the two "
                          "topics stamped by different clocks? raise sync.max_lag_s if the offset is real")
    return _apply_lag(pairs, est, thr, s_topic, e_topic, notes)


def _apply_lag(pairs, est, thr: float, s_topic: str, e_topic: str, notes: list):
    if not math.isfinite(est.lag_s) or abs(est.lag_s) <= thr:
        return pairs, est, False
    from .lag import SHIFT_RESOLUTION_S
    res = int(round(SHIFT_RESOLUTION_S * NS_PER_S))
    shift = int(round(est.lag_s * NS_PER_S / res)) * res
    notes.append(f"topic {e_topic!r} is stamped {1e3 * est.lag_s:+.3g} ms late relative to {s_topic!r} (measured "
                 "on the positions both carry); its stamps are corrected")
    return [(a, Pass(b.t_ns - shift, b.values, b.rx_ns)) for a, b in pairs], est, True


def runs(t: np.ndarray, max_gap: float) -> tuple[list[tuple[int, int]], list[tuple[float, float]], int]:
    """Index ranges [i0, i1] of runs without gaps (>= 2 samples), the gaps, isolated sample count."""
    if t.size == 0:
        return [], [], 0
    breaks = np.flatnonzero(np.diff(t) > max_gap)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [t.size - 1]])
    gaps = [(float(t[i]), float(t[i + 1])) for i in breaks]
    runs, isolated = [], 0
    for a, b in zip(starts, ends):
        if b > a:
            runs.append((int(a), int(b)))
        else:
            isolated += 1
    return runs, gaps, isolated


def intersect(r1: list[tuple[float, float]], r2: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, k = [], 0, 0
    while i < len(r1) and k < len(r2):
        a = max(r1[i][0], r2[k][0])
        b = min(r1[i][1], r2[k][1])
        if b > a:
            out.append((a, b))
        if r1[i][1] < r2[k][1]:
            i += 1
        else:
            k += 1
    return out


def interp(ts: np.ndarray, values: np.ndarray, tg: np.ndarray) -> np.ndarray:
    """Linear interpolation of all columns of `values` (m, n) at `tg` (inside [ts0, ts-1])."""
    idx = np.searchsorted(ts, tg, side="right") - 1
    idx = np.clip(idx, 0, ts.size - 2)
    t0, t1 = ts[idx], ts[idx + 1]
    w = ((tg - t0) / (t1 - t0))[:, None]
    return values[idx] * (1.0 - w) + values[idx + 1] * w
