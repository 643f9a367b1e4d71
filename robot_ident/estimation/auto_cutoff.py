"""The low-pass cutoff chosen from the data, when the configuration does not set it.

The cutoff trades two errors: too low and the filter removes effort content the
model must explain (fast accelerations, the drive's reaction to friction steps);
too high and the noise of the twice-differentiated positions enters the regressor
(``qdd`` noise grows with f^2). Where the balance lies depends on the robot, its
sensors and its controller -- 20 Hz was right for one arm and 10 Hz for another.

`cross_validate_cutoff` decides it by cross-validation on the identification data itself:
for each candidate cutoff the recordings are processed, an ordinary least-squares model is
identified from 4 of every 5 blocks of ``block_s`` seconds (shorter when the data
are short: at least 10 blocks), and the RMS against the
*raw* measured effort is taken on the 5th blocks. All candidates are scored on the
same samples (the dead band of the lowest candidate, which is the widest), so a
longer reversal guard cannot flatter a low cutoff. The score is the mean over joints
of log RMS (every joint counts equally, whatever its effort scale); the lowest wins.
The held-out validation data take no part in the choice.

The choice runs on processed samples in files, chunk by chunk: the one pipeline
(estimation/flow.py) reads the recordings once through every candidate's filter, each
into its own file (data/processing.py). The candidates are independent: in the command
line's process they are scored side by side in forked workers, one per further processor
(`candidate_workers`; the files are read by position, so each candidate's result is the
one it gets alone); the identification node scores them in turn. Rules:

* blocks: ``floor((t - t_segment0) / block_s)``, numbered over the allowed (not held-out)
  samples only, across segments; block ``i`` is in fold ``i % folds``; fold
  ``folds - 1`` scores, the others train;
* training rows: the candidate's own dead band (``settings.moving_threshold``, reversal
  guard 1 / cutoff) judged on the training samples as one sequence; scoring rows: the
  dead band of the lowest candidate on the whole recording, on the scoring samples;
* the training and the scoring rows each go into a `compressed.CompressedAccumulator`:
  per joint ``[W_std | y_filtered | y_raw]`` reduced by an incremental QR to its R
  factor, the same OLS solution as on the rows (`least_squares.ols` runs on it
  unchanged), and ``||y_raw - W x||^2 = ||R [x; 0; -1]||^2``, so the held-out errors at
  the training solution follow exactly. The dead-band masks are computed on windows
  with margins longer than the reversal guard, so they equal the whole sequence's;
* the criterion's own noise: the scoring blocks are dealt into `GROUPS` groups (the
  scoring fold's blocks in turn), each with its own accumulator; per candidate, the
  difference of its score from the best one's is taken in every group, and its standard
  error across the groups is the criterion's noise for that candidate. Going up from the
  best candidate, every candidate whose score is within max(2 standard errors,
  `TIE_FLOOR`) of the best is a tie; the highest of that run is taken: it distorts the
  efforts least (a flat criterion never picks the lowest);
* joints left out of the criterion, with a note: a joint without a moving scoring sample
  (it does not veto the choice), and a joint whose cross-validated fit blows up for some
  candidate (its RMS above `BLOWUP` x the RMS of its raw effort on the scoring rows:
  predicting zero would do better).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..data.signals import FilterOptions, ProcessedData, concatenate
from ..errors import IdentificationError, SignalError
from ..model.transmission import dead_band_rows
from ..util.parallel import ForkedCall, can_fork, usable_cpus
from .compressed import CHUNK_SAMPLES, CompressedAccumulator, store_chunks

CANDIDATES_HZ = (4.0, 6.0, 8.0, 10.0, 13.0, 16.0, 20.0, 25.0, 32.0)
GROUPS = 4                     # scoring-block groups for the criterion's noise
TIE_FLOOR = math.log(1.005)    # score differences below 0.5 % RMS are ties whatever the noise
BLOWUP = 3.0                   # a joint whose fit's RMS exceeds this x its raw effort's is left out


@dataclass
class CutoffChoice:
    cutoff_hz: float
    candidates: tuple[float, ...]
    scores: tuple[float, ...]        # mean over the judged joints of log RMS, per candidate
    rms: tuple[np.ndarray, ...]      # per candidate, (n,) cross-validated RMS per joint
    best_hz: float | None = None     # the candidate with the lowest score (None: cutoff_hz)
    noise: tuple[float, ...] = ()    # per candidate, the band its score difference was judged in
    notes: tuple[str, ...] = ()      # joints left out of the criterion, and why

    def summary(self) -> str:
        best_hz = self.cutoff_hz if self.best_hz is None else self.best_hz
        best = self.candidates.index(best_hz)
        ref = self.rms[self.candidates.index(self.cutoff_hz)]
        parts = [f"{c:g} Hz x{float(np.exp(s - self.scores[best])):.3f}"
                 for c, s in zip(self.candidates, self.scores)]
        tie = ""
        if best_hz != self.cutoff_hz:
            k = self.candidates.index(self.cutoff_hz)
            tie = (f"; {best_hz:g} Hz scored best, up to {self.cutoff_hz:g} Hz the scores are within the "
                   f"criterion's noise (x{float(np.exp(self.noise[k])):.3f} there): the highest of those is taken, "
                   "it distorts the efforts least")
        return (f"filter cutoff {self.cutoff_hz:g} Hz chosen from the data (cross-validated RMS relative to "
                f"the best, geometric mean over joints: {', '.join(parts)}{tie}; RMS per joint at the choice "
                + ", ".join(f"{v:.4g}" for v in ref) + ")" + "".join(f"; {n}" for n in self.notes))


def decimated_rate(fs: float, opt: FilterOptions) -> float:
    """The processed samples' rate of a recording at `fs` Hz (`signals.process`'s decimation)."""
    if opt.target_rate_hz is not None and opt.target_rate_hz < fs:
        return fs / max(1, int(round(fs / opt.target_rate_hz)))
    return fs


class _SequenceDeadBand:
    """`dead_band_rows` of a sequence of samples that arrives in pieces: `add` returns
    (rows, mask) pairs once `margin` later rows are known, `end` the rest. With `margin`
    rows spanning more than the reversal guard, each row's mask equals the one of the
    whole sequence (a reversal farther than the guard does not mask it)."""

    def __init__(self, model, threshold: float, guard_s: float, margin: int):
        self.model, self.thr, self.guard, self.margin = model, threshold, guard_s, margin
        self.buf: ProcessedData | None = None
        self.done = 0                 # rows of `buf` already given out

    def add(self, d: ProcessedData) -> list:
        if d.n_samples == 0:
            return []
        self.buf = d if self.buf is None else concatenate([self.buf, d])
        return self._emit(self.buf.n_samples - self.margin)

    def end(self) -> list:
        return [] if self.buf is None else self._emit(self.buf.n_samples)

    def _emit(self, upto: int) -> list:
        if upto <= self.done:
            return []
        lo = max(0, self.done - self.margin)
        win = self.buf.subset(np.arange(lo, self.buf.n_samples))
        mask = np.asarray(dead_band_rows(self.model, win, self.thr, self.guard))
        rows = np.arange(self.done, upto)
        out = [(self.buf.subset(rows), mask[rows - lo])]
        self.done = upto
        drop = max(0, self.done - self.margin)
        if drop:
            self.buf = self.buf.subset(np.arange(drop, self.buf.n_samples))
            self.done -= drop
        return out


class _Folds:
    """The fold of every processed sample, chunk by chunk (-1: not allowed, e.g. held out for
    the final validation): blocks of ``block_s`` seconds from each segment's first sample,
    numbered over the allowed samples only, across segments; block i is in fold i % folds."""

    block: np.ndarray      # the block number of each sample of the last `of` call (-1: none)

    def __init__(self, starts, N: int, allowed: np.ndarray, shift: float, t_first, block_s: float, folds: int):
        self.starts, self.N, self.allowed, self.shift = list(starts), N, allowed, shift
        self.t_first, self.block_s, self.folds = list(t_first), block_s, folds
        self.count = 0
        self.last: dict[int, int] = {}

    def of(self, a: int, t: np.ndarray) -> np.ndarray:
        """The folds of samples a.. (times `t`); `self.block` then holds their block numbers."""
        f = np.full(t.size, -1)
        self.block = np.full(t.size, -1)
        b = a + t.size
        for k, (s, e) in enumerate(zip(self.starts, self.starts[1:] + [self.N])):
            lo, hi = max(a, s), min(b, e)
            if lo >= hi:
                continue
            sel = lo - a + np.flatnonzero(self.allowed[lo:hi])
            if not sel.size:
                continue
            blk = np.floor((t[sel] + self.shift - self.t_first[k]) / self.block_s).astype(int)
            new = np.empty(blk.size, bool)
            new[0] = self.last.get(k) != blk[0]
            new[1:] = blk[1:] != blk[:-1]
            ids = self.count - 1 + np.cumsum(new)
            self.count += int(new.sum())
            self.last[k] = int(blk[-1])
            f[sel] = ids % self.folds
            self.block[sel] = ids
        return f


MAX_WORKERS = 3     # forked scoring processes at most (each holds about 50 MB of its own)


def candidate_workers(n_candidates: int) -> int:
    """Processes forked beside this one to score candidates: one per further processor this
    process may use (``taskset`` limits them), at most `MAX_WORKERS`; none in a process that
    runs other threads or has ROS loaded (`util.parallel.can_fork`)."""
    if not can_fork():
        return 0
    return max(0, min(usable_cpus() - 1, n_candidates - 1, MAX_WORKERS))


def _scored(score, share: list) -> list:
    return [score(k, False) for k in share]


def _score_candidates(score, n: int, workers: int) -> list:
    """[score(k) for k in range(n)]: candidates k with k % (workers + 1) == w + 1 in forked
    worker w (`util.parallel.ForkedCall`: the same code on the same stores, read by position,
    so each candidate's result is the one it gets alone), the others here, with the progress.
    A worker's error is raised here, a worker that dies is named; when no process can be
    started, all are scored here; the workers end with this call, however it ends."""
    if workers <= 0 or n < 2:
        return [score(k, True) for k in range(n)]
    shares = [[k for k in range(n) if k % (workers + 1) == w + 1] for w in range(workers)]
    helpers = []
    try:
        for share in shares:
            helpers.append(ForkedCall(partial(_scored, score, share),
                                      f"scoring cutoff candidates {', '.join(str(k) for k in share)}"))
        out = {k: score(k, True) for k in range(0, n, workers + 1)}
        for share, helper in zip(shares, helpers):
            out.update(zip(share, helper.result()))
    finally:
        for helper in helpers:
            helper.close()
    return [out[k] for k in range(n)]


def cross_validate_cutoff(model, stores, cands, settings, base, allowed: np.ndarray, shift: float = 0.0,
                          block_s: float = 2.0, folds: int = 5, chunk: int = CHUNK_SAMPLES,
                          progress=None, workers: int | None = None) -> CutoffChoice:
    """The choice (module doc) on processed samples in stores: ``stores[k]`` holds them
    processed with cutoff ``cands[k]`` (the same rows in each, segments at
    ``stores[0].segment_starts``); `allowed` (N,) marks the samples that may take part (not
    held out for the final validation); `shift` is added to the stored times to give the
    times the blocks are counted on. Reads the stores chunk by chunk: memory independent of
    their length. The candidates are scored side by side in `workers` forked processes
    besides this one (default `candidate_workers`). Raises `SignalError` when the data cannot
    decide."""
    from . import ESTIMATORS

    N = stores[0].n_samples
    starts = list(stores[0].segment_starts) or [0]
    ends = starts[1:] + [N]
    t_first, total_s = [], 0
    for s, e in zip(starts, ends):
        t0, t1 = stores[0].read(s, s + 1).t[0] + shift, stores[0].read(e - 1, e).t[0] + shift
        t_first.append(t0)
        total_s += float(np.count_nonzero(allowed[s:e])) / max(e - s, 1) * float(t1 - t0)
    block_s = min(block_s, total_s / (2 * folds)) if total_s > 0 else block_s
    thr, guard0 = settings.moving_threshold, 1.0 / cands[0]

    def common_chunks():
        return store_chunks(stores[0], 0, N, thr, guard0, chunk, model)

    fold = _Folds(starts, N, allowed, shift, t_first, block_s, folds)
    n_test = n_train = 0
    scored = np.zeros(model.n, dtype=np.int64)
    min_step, last_t = math.inf, None          # the smallest step, for the guard margins
    for a, (d, m) in zip(range(0, N, chunk), common_chunks()):
        t = d.t if last_t is None else np.concatenate([[last_t], d.t])
        if t.size > 1:
            min_step = min(min_step, float(np.min(np.diff(t))))
        last_t = d.t[-1]
        f = fold.of(a, d.t)
        test = f == folds - 1
        n_test += int(test.sum())
        n_train += int(((f >= 0) & ~test).sum())
        scored += (m & test[:, None]).sum(axis=0)
    if not n_test or not n_train:
        raise SignalError(f"the recordings ({int(np.count_nonzero(allowed))} usable samples) are too short to "
                          f"cross-validate the filter cutoff in {block_s:g} s blocks")
    judged = scored > 0
    notes = [f"joint {model.joint_names[j]!r} left out of the criterion: no moving sample in the scoring blocks"
             for j in np.flatnonzero(~judged)]
    if not judged.any():
        raise SignalError("too few moving samples to cross-validate the filter cutoff")

    def score(k: int, report: bool):
        """Candidate k's squared-error sums (group, joint), with (k == 0) the scoring rows'
        counts and raw-effort sums."""
        guard = 1.0 / cands[k]
        train = CompressedAccumulator(model, base, probes=False)
        tests = [CompressedAccumulator(model, base, probes=False) for _ in range(GROUPS)]
        seq = _SequenceDeadBand(model, thr, guard, int(math.ceil(guard / max(min_step, 1e-9))) + 3)
        fold = _Folds(starts, N, allowed, shift, t_first, block_s, folds)
        for a, (d0, m) in zip(range(0, N, chunk), common_chunks()):
            d = d0 if k == 0 else stores[k].read(a, a + d0.n_samples)
            f = fold.of(a, d.t)
            group = (fold.block // folds) % GROUPS
            for g, acc in enumerate(tests):
                te = np.flatnonzero((f == folds - 1) & (group == g))
                if te.size:
                    acc.add(d.subset(te), m[te])
            for rows, keep in seq.add(d.subset(np.flatnonzero((f >= 0) & (f != folds - 1)))):
                train.add(rows, keep)
            if report and progress is not None:
                progress(k * N + a + d.n_samples, len(cands) * N)
        for rows, keep in seq.end():
            train.add(rows, keep)
        scoring = None
        if k == 0:          # the scoring rows are every candidate's: their counts and raw efforts once
            scoring = (np.array([acc.counts for acc in tests]),
                       np.array([acc.raw_residual_rms(np.zeros(base.size)) ** 2 * acc.counts for acc in tests]))
        try:
            values = ESTIMATORS["ols"](train.problem()).values
        except IdentificationError:
            return np.full((GROUPS, model.n), np.inf), scoring
        return np.array([acc.raw_residual_rms(values) ** 2 * acc.counts for acc in tests]), scoring

    scores = _score_candidates(score, len(cands), candidate_workers(len(cands)) if workers is None else workers)
    sq_all = [sq for sq, _ in scores]
    counts, raw_sq = scores[0][1]
    return _judge(model, cands, np.array(sq_all), counts, raw_sq, judged, notes)


def _judge(model, cands, sq, counts, raw_sq, judged, notes) -> CutoffChoice:
    """The choice from the scoring rows' squared-error sums `sq` (candidate, group, joint),
    their counts and raw-effort sums (group, joint) (module doc)."""
    total = np.maximum(counts.sum(axis=0), 1)
    with np.errstate(invalid="ignore", over="ignore"):
        rms = np.sqrt(sq.sum(axis=1) / total)                      # (candidate, joint)
        raw = np.sqrt(raw_sq.sum(axis=0) / total)
    finite = np.isfinite(rms)
    blown = judged & np.any(finite & (rms > BLOWUP * raw), axis=0)
    for j in np.flatnonzero(blown):
        notes.append(f"joint {model.joint_names[j]!r} left out of the criterion: its cross-validated fit blows up "
                     f"(RMS up to {float(np.max(rms[finite[:, j], j])):.3g} against {raw[j]:.3g} of its effort)")
    use = judged & ~blown
    ok = finite[:, use].all(axis=1) if use.any() else np.zeros(len(cands), bool)
    if not ok.any():
        raise SignalError("no cutoff candidate gave an identification; set identification.filter.cutoff_hz")
    with np.errstate(divide="ignore"):
        scores = np.where(ok, np.mean(np.log(np.maximum(np.where(finite, rms, 1.0)[:, use], 1e-300)), axis=1),
                          np.inf)
    best = int(np.argmin(scores))
    # per group: each candidate's score minus the best one's, on the judged joints
    g_ok = (counts[:, use] > 0).all(axis=1)
    band = np.full(len(cands), TIE_FLOOR)
    if g_ok.sum() >= 2:
        with np.errstate(divide="ignore", invalid="ignore"):
            g_rms = np.sqrt(sq[:, g_ok][:, :, use] / counts[g_ok][:, use])
            g_score = np.mean(np.log(np.maximum(g_rms, 1e-300)), axis=2)          # (candidate, group)
            se = np.std(g_score - g_score[best], axis=1, ddof=1) / np.sqrt(g_ok.sum())
        band = np.maximum(TIE_FLOOR, np.where(np.isfinite(se), 2.0 * se, TIE_FLOOR))
    chosen = best
    while chosen + 1 < len(cands) and ok[chosen + 1] and scores[chosen + 1] - scores[best] <= band[chosen + 1]:
        chosen += 1
    return CutoffChoice(cands[chosen], tuple(cands), tuple(float(x) for x in scores), tuple(rms),
                        cands[best], tuple(float(b) for b in band), tuple(notes))


# ------------------------------------------------------------------ config glue
def strip_auto_cutoff(section, cutoff_hz: float | None = None, force_auto: bool = False) -> tuple[dict, bool]:
    """The `identification:` section ready for `pipeline.identification_config`, and whether
    the cutoff is to be chosen from the data: it is when the section's
    ``filter.cutoff_hz`` is absent or ``auto`` (or `force_auto`), unless `cutoff_hz` is given."""
    section = dict(section or {})
    filt = dict(section.get("filter") or {})
    auto = cutoff_hz is None and (force_auto or filt.get("cutoff_hz", "auto") == "auto")
    if cutoff_hz is not None:
        filt["cutoff_hz"] = float(cutoff_hz)
    elif auto:
        filt.pop("cutoff_hz", None)
    section["filter"] = filt
    return section, auto


def default_cutoff_note(settings, why) -> str:
    """The note when the data cannot decide and the default cutoff of `settings` is kept."""
    return f"filter cutoff {settings.filter.cutoff_hz:g} Hz (default): it could not be chosen from the data: {why}"
