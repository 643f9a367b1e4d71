"""The recording checks' statistics, chunk by chunk, in bounded memory: one
implementation for a bag read in chunks and for segments in memory (each one piece;
input_checks.py chains them with the other checks). The judgement (thresholds, texts)
is plausibility.py's.

How each statistic is kept (per joint; "exact" = the value the whole segment gives):

- spikes: the median of 7 and the spike levels (`plausibility.spike_levels`) are computed
  on each piece with the last samples of the previous piece of the segment in front (and
  the last 3 samples held back until the next piece or the segment's end), so that every
  sample sees the neighbours it has in the whole segment (exact, a spike on a piece
  boundary is found once). The threshold needs the segment's range of the median-filtered
  signal (running min/max: exact) and its MAD sigma: the median and MAD are taken over
  the segment's samples up to `SUBSAMPLE_CAP` of them, beyond that over a regular
  subsample (every 2^k-th sample, the same whatever the pieces: a statistical estimate).
  Samples whose level exceeds a lower bound of the final threshold (5 % of the range so
  far) are kept as candidates and counted against the final threshold at the segment's
  end; past `CANDIDATE_CAP` candidates the bound is raised to half the MAD-sigma rule of
  the data so far, then the weakest are let go (the count would then be a lower bound;
  real spikes are far fewer). The noise energy the spikes are judged against uses the
  running sum of |x - median of 7| (exact).
- effort peak of the median-filtered effort, position range, dead channel (ptp == 0 per
  segment), first effort: running values (exact).
- velocity against dq/dt: np.gradient on each piece with one sample of context either
  side (exact up to round-off: numpy takes the uniform-spacing formula when a buffer's
  time steps happen to be equal); the per-segment threshold (5 % of its max |dq/dt|) and
  the ">= 10 samples" rule are applied at the segment's end (running max, top 10: exact);
  the median is taken over the ratios of every sample up to `VELOCITY_CAP`, beyond that
  over a regular subsample whose stride doubles whenever the kept set passes the cap.
- velocity lag: sums of qd(t) dq/dt(t - m) and of both squares over the same pairs, at
  lags |m| <= LAG_MAX_S on a grid of about LAG_GRID_HZ (the last M grid samples of the
  open segment kept as history; a segment's sums are added when it is kept: exact).
- effort smoothness (a log filtered before it was saved): sums of squared first and second
  differences within segments, the previous samples in front (exact).

Memory: a few samples of context, at most `SUBSAMPLE_CAP` + `CANDIDATE_CAP` values per
joint and signal of the open segment, at most `VELOCITY_CAP` ratios per joint; nothing
grows with the recording.
"""
from __future__ import annotations

import warnings

import numpy as np

from .plausibility import (
    MEDIAN_WINDOW,
    SPIKE_RANGE,
    SPIKE_SIGMAS,
    Finding,
    JointRecordingStats,
    SpikeCount,
    count_spikes,
    judge_prefiltered,
    judge_recordings,
    noise_sigma,
    spike_levels,
    spike_threshold,
    velocity_lagging,
    velocity_ratio_mask,
)

SUBSAMPLE_CAP = 1 << 14      # samples per segment, joint and signal for the median / MAD
CANDIDATE_CAP = 5_000       # spike candidates per segment, joint and signal
QUANTUM_COUNTS = 3          # a spike exceeds this many of the channel's counts (its smallest step) ...
QUANTUM_HITS = 20           # ... where that step recurs this often (a flickering encoder, not a glitch's own step)
VELOCITY_CAP = 20_000       # velocity ratios per joint
CONTEXT = 3                  # samples either side a sample's statistics need (median of 7)
LAG_GRID_HZ = 100.0          # the velocity-lag correlation runs on samples decimated to about this rate
LAG_MAX_S = 0.4              # lags searched: +-this


class _LagSums:
    """Cross-correlation sums of the measured velocity against dq/dt at lags -M..M samples
    of the decimated grid, over all segments (a pair never crosses a segment boundary),
    with each lag's own energies: the correlation at lag m is over the pairs it has, so a
    slow joint's changing amplitude does not move the peak (an exact velocity peaks at 0)."""

    def __init__(self, nj: int, M: int):
        self.M = M
        self.C = np.zeros((nj, 2 * M + 1))          # C[:, M + m]: sum of qd(t) dq(t - m)
        self.XX = np.zeros((nj, 2 * M + 1))         # ... of qd(t)^2 over the same pairs
        self.DD = np.zeros((nj, 2 * M + 1))         # ... of dq(t - m)^2

    def add(self, hist: tuple, X: np.ndarray, D: np.ndarray) -> tuple:
        """New decimated samples X (qd), D (dq/dt) of a segment whose last M samples are
        `hist`; returns the new history."""
        hx, hd = hist
        ex, ed = np.vstack([hx, X]), np.vstack([hd, D])
        h, L, M = hx.shape[0], X.shape[0], self.M
        for m in range(min(M, h + L - 1) + 1):
            lo = max(0, m - h)                        # new samples with a partner m before them
            if lo >= L:
                break
            x, d = X[lo:], ed[h + lo - m:h + L - m]
            self.C[:, M + m] += np.einsum("ij,ij->j", x, d)
            self.XX[:, M + m] += np.einsum("ij,ij->j", x, x)
            self.DD[:, M + m] += np.einsum("ij,ij->j", d, d)
            if m:
                d, x = D[lo:], ex[h + lo - m:h + L - m]
                self.C[:, M - m] += np.einsum("ij,ij->j", x, d)
                self.XX[:, M - m] += np.einsum("ij,ij->j", x, x)
                self.DD[:, M - m] += np.einsum("ij,ij->j", d, d)
        return ex[-M:], ed[-M:]

    def merge(self, other: "_LagSums") -> None:
        self.C += other.C
        self.XX += other.XX
        self.DD += other.DD

    def lags(self, step_s: float) -> list[tuple[float, float] | None]:
        """Per joint (lag of the measured velocity behind dq/dt in s, peak correlation), the
        lag refined between grid points by a parabola; None without data."""
        out = []
        for k in range(self.C.shape[0]):
            norm = np.sqrt(self.XX[k] * self.DD[k])      # per lag: a correlation over the pairs it has
            if not (norm > 0).any():
                out.append(None)
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                c = np.where(norm > 0, self.C[k] / np.where(norm > 0, norm, 1.0), -np.inf)
            i = int(np.argmax(c))
            frac = 0.0
            if 0 < i < c.size - 1 and np.isfinite(c[i - 1:i + 2]).all():
                den = c[i - 1] - 2 * c[i] + c[i + 1]
                frac = 0.5 * (c[i - 1] - c[i + 1]) / den if den < 0 else 0.0
            out.append(((i - self.M + frac) * step_s, float(c[i])))
        return out


class _Signal:
    """Spike statistics of one signal (all joints) of the open segment."""

    def __init__(self, nj: int):
        self.nj = nj
        self.lo = np.full(nj, np.inf)                 # range of the median-filtered signal
        self.hi = np.full(nj, -np.inf)
        self.peak_smooth = np.zeros(nj)               # max |median of 7|
        self.peak_raw = np.zeros(nj)                  # max |x|
        self.abs_sum = np.zeros(nj)                   # sum of |x - median of 7|
        self.sub: list[np.ndarray] = []               # d = x - median of 7, every `stride`-th sample
        self.n_sub = 0
        self.stride = 1
        self.last_level = np.zeros(nj)
        self.cand = [[] for _ in range(nj)]           # per joint: arrays (level, level before, |d|)
        self.n_cand = np.zeros(nj, dtype=np.int64)
        self.quantum = np.full(nj, np.inf)            # smallest nonzero step between samples: one count
        self.quantum_hits = np.zeros(nj, dtype=np.int64)   # steps of about that size seen

    def add(self, x: np.ndarray, g0: int, a: int, b: int) -> None:
        """`x` a buffer whose rows a..b-1 are the segment's samples g0.. to finalise; rows
        outside are context (or the zero padding of the segment's ends, as medfilt pads)."""
        if b <= a:
            return
        # 0.7 s to import: only where used (data/signals.py)
        from scipy.signal import medfilt
        with warnings.catch_warnings():          # a short buffer is zero-padded, as medfilt pads a segment
            warnings.simplefilter("ignore", UserWarning)
            smooth = np.column_stack([medfilt(x[:, k], MEDIAN_WINDOW) for k in range(self.nj)])
        d = x - smooth
        lev = np.column_stack([spike_levels(x[:, k], d[:, k]) for k in range(self.nj)])[a:b]
        seg = x[max(a - 1, 0):b]
        step = np.abs(np.diff(seg, axis=0))       # steps above the arithmetic's rounding (interpolation)
        real = step > 1e-9 * np.maximum(np.max(np.abs(seg), axis=0, initial=0.0), 1.0)
        smallest = np.min(np.where(real, step, np.inf), axis=0, initial=np.inf)
        new = smallest < 0.99 * self.quantum
        self.quantum = np.where(new, smallest, self.quantum)
        self.quantum_hits = np.where(new, 0, self.quantum_hits) + np.sum(real & (step <= 1.01 * self.quantum), axis=0)
        sm, d, xs = smooth[a:b], d[a:b], x[a:b]
        self.lo, self.hi = np.minimum(self.lo, sm.min(axis=0)), np.maximum(self.hi, sm.max(axis=0))
        self.peak_smooth = np.maximum(self.peak_smooth, np.abs(sm).max(axis=0))
        self.peak_raw = np.maximum(self.peak_raw, np.abs(xs).max(axis=0))
        self.abs_sum += np.abs(d).sum(axis=0)
        g = np.arange(g0, g0 + (b - a))
        take = g % self.stride == 0
        self.sub.append(d[take])
        self.n_sub += int(take.sum())
        while self.n_sub > SUBSAMPLE_CAP:
            # the kept rows are samples 0, stride, 2 stride, ... in order: every other one stays
            self.stride *= 2
            self.sub = [np.concatenate(self.sub)[::2]]
            self.n_sub = self.sub[0].shape[0]
        before = np.vstack([self.last_level[None, :], lev[:-1]])
        self.last_level = lev[-1].copy()
        bound = SPIKE_RANGE * (self.hi - self.lo)        # <= the final threshold
        for k in range(self.nj):
            m = lev[:, k] > max(bound[k], 1e-12)
            if m.any():
                self.cand[k].append(np.column_stack([lev[m, k], before[m, k], np.abs(d[m, k])]))
                self.n_cand[k] += int(m.sum())
                if self.n_cand[k] > CANDIDATE_CAP:
                    self._prune(k)

    def _mad(self) -> tuple[np.ndarray, np.ndarray]:
        d = np.concatenate(self.sub) if self.sub else np.zeros((0, self.nj))
        if d.shape[0] == 0:
            return np.zeros(self.nj), np.zeros(self.nj)
        med = np.median(d, axis=0)
        return med, np.median(np.abs(d - med), axis=0)

    def _prune(self, k: int) -> None:
        c = np.concatenate(self.cand[k])
        _, mad = self._mad()
        bound = max(SPIKE_RANGE * (self.hi[k] - self.lo[k]), 0.5 * SPIKE_SIGMAS * 1.4826 * mad[k])
        c = c[c[:, 0] > bound]
        if c.shape[0] > CANDIDATE_CAP:
            c = c[np.argsort(c[:, 0])[-CANDIDATE_CAP:]]
        self.cand[k] = [c]
        self.n_cand[k] = c.shape[0]

    def spikes(self, n: int) -> list[tuple[SpikeCount, float]]:
        """Per joint the spikes of the ended segment of `n` samples and its noise sigma."""
        if n < 9:
            return [(SpikeCount(), 0.0)] * self.nj
        _, mad = self._mad()
        out = []
        for k in range(self.nj):
            thr = spike_threshold(float(mad[k]), float(self.hi[k] - self.lo[k]))
            if np.isfinite(self.quantum[k]) and self.quantum_hits[k] >= QUANTUM_HITS:   # a flicker is no spike
                thr = max(thr, QUANTUM_COUNTS * float(self.quantum[k]))
            c = np.concatenate(self.cand[k]) if self.cand[k] else np.zeros((0, 3))
            sp = count_spikes(c[:, 0], c[:, 1], c[:, 2], thr, n)
            out.append((sp, noise_sigma(float(mad[k]), float(self.abs_sum[k]), n, sp)))
        return out

    def peak(self, n: int) -> np.ndarray:
        return self.peak_smooth if n >= MEDIAN_WINDOW else self.peak_raw


class _Segment:
    """The open segment: context buffer and its statistics."""

    def __init__(self, nj: int, velocity: bool):
        self.n = 0                       # samples received
        self.done = 0                    # samples finalised
        self.buf = None                  # (t, q, e, qd) rows from sample `done - context` on
        self.b0 = 0                      # segment index of the buffer's first row
        self.effort, self.position = _Signal(nj), _Signal(nj)
        self.q_lo, self.q_hi = np.full(nj, np.inf), np.full(nj, -np.inf)
        self.e_lo, self.e_hi = np.full(nj, np.inf), np.full(nj, -np.inf)
        self.de_sq, self.d2e_sq = np.zeros(nj), np.zeros(nj)   # squared first / second effort differences
        self.dt_sum, self.n_diff = 0.0, 0
        self.first_effort = None
        self.velocity = velocity
        self.dq_max = np.zeros(nj)
        self.top10 = np.zeros((10, nj))                 # the 10 largest |dq/dt| (0: none yet)
        self.ratios = [[] for _ in range(nj)]           # per joint: arrays (sample id, |dq|, ratio)
        self.lag_hist = (np.zeros((0, nj)), np.zeros((0, nj)))   # the lag sums' last decimated samples
        self.lag: _LagSums | None = None                 # this segment's lag sums (added when kept)


class RecordingChecks:
    """The recording checks piece by piece: `add(segment, piece)` with the converted pieces
    (a segment's pieces in order, any joint order), `end_segment(segment, kept)` when a
    segment ends (kept: long enough to be one of the synchronised segments), `findings()`."""

    def __init__(self, model, method: str = "physical", effort_label: str = "effort",
                 velocity_cap: int = VELOCITY_CAP, velocity: str = "auto"):
        self.model, self.method, self.effort_label = model, method, effort_label
        self.velocity = velocity         # the measured velocity's use (plausibility.judge_recordings)
        self.joints = tuple(model.joint_names)
        nj = len(self.joints)
        self.open: dict[int, _Segment] = {}
        self.n_samples = 0
        self.stats = [JointRecordingStats() for _ in range(nj)]
        self.velocity_cap = int(velocity_cap)
        self.stride = 1                                  # velocity ratios kept: sample id % stride == 0
        self.kept_ratios = [[] for _ in range(nj)]       # per joint: arrays (sample id, ratio)
        self._ids = 0                                    # sample ids for the velocity subsample
        self.has_ratios = np.zeros(nj, dtype=bool)
        self.lag: _LagSums | None = None                 # the kept segments' (grid set with the first velocities)
        self.lag_k, self.lag_step_s = 1, 0.0

    # ---------------------------------------------------------------- input
    def add(self, segment: int, piece) -> None:
        rec = piece.reorder(self.joints)
        if rec.n_samples == 0:
            return
        s = self.open.get(segment)
        if s is None:
            s = self.open[segment] = _Segment(len(self.joints), rec.qd is not None)
            s.first_effort = rec.effort[0].astype(float)
        s.velocity = s.velocity and rec.qd is not None
        qd = rec.qd if rec.qd is not None else np.full_like(rec.q, np.nan)
        rows = np.column_stack([np.asarray(rec.t, float), rec.q, rec.effort, qd])
        s.buf = rows if s.buf is None else np.vstack([s.buf, rows])
        s.n += rec.n_samples
        self._advance(s, ended=False)

    def end_segment(self, segment: int, kept: bool = True) -> None:
        s = self.open.pop(segment, None)
        if s is None:
            return
        if not kept:
            return
        self._advance(s, ended=True)
        self._close(s)

    # ------------------------------------------------------------- internals
    def _advance(self, s: _Segment, ended: bool) -> None:
        nj = len(self.joints)
        buf = s.buf
        a = s.done - s.b0
        b = buf.shape[0] if ended else buf.shape[0] - CONTEXT
        if b <= a:
            return
        t, q, e, qd = buf[:, 0], buf[:, 1:1 + nj], buf[:, 1 + nj:1 + 2 * nj], buf[:, 1 + 2 * nj:]
        s.effort.add(e, s.done, a, b)
        s.position.add(q, s.done, a, b)
        qa, ea = q[a:b], e[a:b]
        s.q_lo, s.q_hi = np.minimum(s.q_lo, qa.min(axis=0)), np.maximum(s.q_hi, qa.max(axis=0))
        s.e_lo, s.e_hi = np.minimum(s.e_lo, ea.min(axis=0)), np.maximum(s.e_hi, ea.max(axis=0))
        lo = max(a - 1, 0)                       # differences ending at rows a..b-1 (earlier rows in front)
        if b - lo >= 2:
            de = np.diff(e[lo:b], axis=0)
            s.de_sq += np.einsum("ij,ij->j", de, de)
            s.dt_sum += float(t[b - 1] - t[lo])
            s.n_diff += b - lo - 1
        lo = max(a - 2, 0)
        if b - lo >= 3:
            d2e = np.diff(e[lo:b], n=2, axis=0)
            s.d2e_sq += np.einsum("ij,ij->j", d2e, d2e)
        if s.velocity and buf.shape[0] >= 2:
            dq = np.gradient(q, t, axis=0)[a:b]
            self._velocity(s, np.abs(dq), qd[a:b] / np.where(dq == 0, np.nan, dq))
            self._lag(s, t, dq, qd[a:b], s.done)
        s.done += b - a
        keep = max(0, b - CONTEXT)
        s.buf, s.b0 = buf[keep:], s.b0 + keep

    def _lag(self, s: _Segment, t: np.ndarray, dq: np.ndarray, qd: np.ndarray, g0: int) -> None:
        """Feed the samples g0.. of the segment (on the decimated grid) to the lag sums."""
        if self.lag is None:
            if t.size < 3:
                return
            step = float(np.median(np.diff(t)))
            self.lag_k = max(1, int(round(1.0 / (step * LAG_GRID_HZ))))
            self.lag_step_s = step * self.lag_k
            self.lag = _LagSums(len(self.joints), max(1, int(round(LAG_MAX_S / self.lag_step_s))))
        take = (np.arange(g0, g0 + dq.shape[0]) % self.lag_k) == 0
        if take.any():
            if s.lag is None:
                s.lag = _LagSums(len(self.joints), self.lag.M)
            s.lag_hist = s.lag.add(s.lag_hist, qd[take], dq[take])

    def velocity_lags(self) -> list[tuple[float, float] | None]:
        """Per joint (lag of the measured velocity behind dq/dt [s], peak correlation) or None."""
        return [None] * len(self.joints) if self.lag is None else self.lag.lags(self.lag_step_s)

    def _velocity(self, s: _Segment, adq: np.ndarray, ratio: np.ndarray) -> None:
        ids = np.arange(self._ids, self._ids + adq.shape[0])
        self._ids += adq.shape[0]
        s.dq_max = np.maximum(s.dq_max, adq.max(axis=0))
        s.top10 = -np.sort(-np.vstack([s.top10, adq]), axis=0)[:10]
        floor = np.maximum(0.05 * s.dq_max, 1e-6)        # <= the segment's final threshold
        take = ids % self.stride == 0
        for k in range(len(self.joints)):
            m = take & (adq[:, k] > floor[k])
            if m.any():
                s.ratios[k].append(np.column_stack([ids[m], adq[m, k], ratio[m, k]]))
        self._bound()

    def _close(self, s: _Segment) -> None:
        """Fold an ended, kept segment into the totals."""
        n = s.n
        self.n_samples += n
        if s.lag is not None:
            self.lag.merge(s.lag)
        sp_e, sp_q = s.effort.spikes(n), s.position.spikes(n)
        peak = s.effort.peak(n)
        for k, st in enumerate(self.stats):
            (e, se), (p, sp) = sp_e[k], sp_q[k]
            st.spikes_effort += e.count
            st.spike_effort = max(st.spike_effort, e.largest)
            st.spike_effort_energy += e.energy
            st.effort_noise_energy += n * se ** 2
            st.spikes_position += p.count
            st.spike_position = max(st.spike_position, p.largest)
            st.spike_position_energy += p.energy
            st.position_noise_energy += n * sp ** 2
            st.peak_effort = max(st.peak_effort, float(peak[k]))
            st.q_min, st.q_max = min(st.q_min, float(s.q_lo[k])), max(st.q_max, float(s.q_hi[k]))
            st.effort_constant = st.effort_constant and bool(s.e_hi[k] - s.e_lo[k] == 0)
            st.effort_diff_sq += float(s.de_sq[k])
            st.effort_diff2_sq += float(s.d2e_sq[k])
            st.diff_count += s.n_diff
            st.diff_time += s.dt_sum
            if not np.isfinite(st.first_effort):
                st.first_effort = float(s.first_effort[k])
            if not s.velocity or n < 5:
                continue
            r = np.concatenate(s.ratios[k]) if s.ratios[k] else np.zeros((0, 3))
            m = velocity_ratio_mask(r[:, 1], float(s.dq_max[k]))
            enough = velocity_ratio_mask(s.top10[:, k], float(s.dq_max[k])).sum() >= 10
            if enough:
                self.has_ratios[k] = True
                r = r[m & (r[:, 0] % self.stride == 0)]
                # one array per joint, whatever the number of segments
                self.kept_ratios[k] = [np.concatenate(self.kept_ratios[k] + [r[:, [0, 2]]])]
        s.ratios = [[] for _ in self.joints]
        self._bound()

    def _bound(self) -> None:
        """Halve every kept ratio set (stride x 2) while one passes the cap."""
        def size(k):
            return sum(a.shape[0] for a in self.kept_ratios[k]) + sum(
                a.shape[0] for s in self.open.values() for a in s.ratios[k])
        while max((size(k) for k in range(len(self.joints))), default=0) > self.velocity_cap:
            self.stride *= 2
            for k in range(len(self.joints)):
                self.kept_ratios[k] = [a[a[:, 0] % self.stride == 0] for a in self.kept_ratios[k]]
                for s in self.open.values():
                    if s.ratios[k]:
                        a = np.concatenate(s.ratios[k])
                        s.ratios[k] = [a[a[:, 0] % self.stride == 0]]

    def kept_ratio_count(self) -> int:
        """The most velocity ratios kept for a joint (the memory the velocity check holds)."""
        return max((sum(a.shape[0] for a in self.kept_ratios[k]) + sum(
            a.shape[0] for s in self.open.values() for a in s.ratios[k])
            for k in range(len(self.joints))), default=0)

    # ---------------------------------------------------------------- output
    def joint_stats(self) -> list[JointRecordingStats]:
        """Per joint statistics (segments still open are closed as kept first)."""
        for seg in list(self.open):
            self.end_segment(seg, True)
        lags = self.velocity_lags()
        for k, st in enumerate(self.stats):
            if lags[k] is not None:
                st.velocity_lag_s, st.velocity_lag_correlation = lags[k]
            if self.has_ratios[k]:
                r = np.concatenate(self.kept_ratios[k])[:, 1]
                st.velocity_ratio = float(np.median(r)) if r.size else None
        return self.stats

    def findings(self) -> list[Finding]:
        stats = self.joint_stats()
        if self.n_samples == 0:
            return []
        return (judge_recordings(self.model, stats, self.n_samples, self.method, self.effort_label, self.velocity)
                + judge_prefiltered(stats, self.effort_label))

    def velocity_lagging(self) -> list[str]:
        """The joints whose measured velocity is shifted against dq/dt (`plausibility.velocity_lagging`)."""
        return [j for j, st in zip(self.joints, self.joint_stats()) if velocity_lagging(st)]
