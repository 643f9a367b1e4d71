"""The filter cutoff chosen from a rosbag2 recording in bounded memory: the choice of
`auto_cutoff.choose_cutoff`, from one read of the bag.

The bag is read, synchronised and converted once; every piece goes through one
zero-phase filter pipeline per candidate cutoff (`data.bag_processed.process_bag_filters`,
the windowed filter of `data.stream_filter`), each into its own processed-sample file.
The samples cannot be given to a fold while they are read: which samples are held out
(the last fraction of *all* processed samples) and the block length (2 s, or shorter
when the allowed data last under ``2 * folds`` blocks) depend on the number of processed
samples, known only at the end. So the cross-validation runs afterwards, candidate by
candidate, over each candidate's file in chunks, with the rules of `choose_cutoff`:

* blocks: ``floor((t - t_part0) / block_s)`` on the times `inputs.load_input` gives the
  in-memory path (re-based on the first kept segment, the same floating-point
  operations), numbered over the allowed (not held-out) samples only, across segments;
  block ``i`` is in fold ``i % folds``; fold ``folds - 1`` scores, the others train;
* training rows: the candidate's own dead band (``settings.moving_threshold``, reversal
  guard 1 / cutoff) judged on the training samples as one sequence, as `identify` judges
  ``data.subset(train)``; scoring rows: the dead band of the lowest candidate on the
  whole recording, on the scoring samples (the common mask);
* the same errors when the data cannot decide (then the caller keeps the default
  cutoff with a note, as `settings_with_data_cutoff` does).

Why the figures are exact (to rounding): the training rows and the scoring rows each go
into a `compressed.CompressedAccumulator` (the streamed identification's): per joint
``[W_std | y_filtered | y_raw]`` reduced by an incremental QR to its R factor (the QR of
the previous R stacked on a chunk's rows is the QR of all rows so far, Q orthogonal).
The stacked R factors are a least-squares problem with the rows' W^T W and W^T y, hence
the same OLS solution, column norms, rank decision and condition number
(`least_squares.ols` runs on it unchanged, with the true row counts), and
``||y_raw - W x||^2 = ||R [x; 0; -1]||^2`` for every x, so the held-out sum of squared
errors at the training solution follows exactly. The dead-band masks are computed on
windows with margins longer than the reversal guard, so they equal the masks of the
whole sequence (`compressed.store_chunks`, `_SequenceDeadBand`).

Memory: the filters' windows, a chunk of samples and per joint two R factors of
``n_std + 2`` columns, whatever the recording's length; disk: one
processed-sample file per candidate ((1 + 5 n) x 8 bytes per processed sample each,
e.g. 30 MB per candidate for 10 min of a 6-joint arm at 200 Hz), the one chosen kept
for the identification (no second read of the bag).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..data.bag_processed import ProcessedBag, process_bag_filters
from ..data.signals import ProcessedData, concatenate
from ..errors import IdentificationError, SignalError
from ..model.transmission import dead_band_rows
from ..util.blas import single_threaded_blas
from .auto_cutoff import CANDIDATES_HZ, CutoffChoice, decimated_rate, default_cutoff_note
from .compressed import CHUNK_SAMPLES, CompressedAccumulator, store_chunks


def candidates_for_rate(rate_hz: float, filter_options, candidates=None) -> tuple[float, ...]:
    """The candidates `choose_cutoff` tries on a recording synchronised at `rate_hz`."""
    top = 0.4 * decimated_rate(rate_hz, filter_options)
    return tuple(c for c in (candidates or CANDIDATES_HZ) if c < top)


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
    """The fold of every processed sample, chunk by chunk, as `choose_cutoff` assigns it
    (-1: held out for the final validation)."""

    def __init__(self, starts, N: int, cut: int, shift: float, t_first, block_s: float, folds: int):
        self.starts, self.N, self.cut, self.shift = list(starts), N, cut, shift
        self.t_first, self.block_s, self.folds = list(t_first), block_s, folds
        self.count = 0
        self.last: dict[int, int] = {}

    def of(self, a: int, t: np.ndarray) -> np.ndarray:
        f = np.full(t.size, -1)
        b = a + t.size
        for k, (s, e) in enumerate(zip(self.starts, self.starts[1:] + [self.N])):
            lo, hi = max(a, s), min(b, e, self.cut)
            if lo >= hi:
                continue
            tt = t[lo - a:hi - a] + self.shift
            blk = np.floor((tt - self.t_first[k]) / self.block_s).astype(int)
            new = np.empty(blk.size, bool)
            new[0] = self.last.get(k) != blk[0]
            new[1:] = blk[1:] != blk[:-1]
            ids = self.count - 1 + np.cumsum(new)
            self.count += int(new.sum())
            self.last[k] = int(blk[-1])
            f[lo - a:hi - a] = ids % self.folds
        return f


def choose_cutoff_stored(model, pb: ProcessedBag, cands, settings, holdout: float, base,
                         block_s: float = 2.0, folds: int = 5, chunk: int = CHUNK_SAMPLES,
                         progress=None) -> CutoffChoice:
    """`choose_cutoff` on the candidates' processed files of `pb` (``pb.stores[k]`` is
    processed with cutoff ``cands[k]``), the last `holdout` fraction of the samples held
    out; raises the same `SignalError`s when the data cannot decide."""
    from . import ESTIMATORS

    if not cands:
        raise SignalError(f"no cutoff candidate below 0.4 x the sample rate "
                          f"({decimated_rate(pb.report.rate_hz, settings.filter):.4g} Hz)")
    stores = pb.stores[:len(cands)]
    N = stores[0].n_samples
    starts = list(stores[0].segment_starts) or [0]
    ends = starts[1:] + [N]
    cut = int(round((1.0 - holdout) * N)) if holdout > 0 else N
    # the in-memory path's times: re-based on the first kept segment (inputs.load_input)
    origin = pb.origin_ns * 1e-9
    shift = origin - (origin + pb.first_t)
    t_first, total_s = [], 0
    for s, e in zip(starts, ends):
        t0, t1 = stores[0].read(s, s + 1).t[0] + shift, stores[0].read(e - 1, e).t[0] + shift
        t_first.append(t0)
        total_s += float(max(0, min(e, cut) - s)) / max(e - s, 1) * float(t1 - t0)
    block_s = min(block_s, total_s / (2 * folds)) if total_s > 0 else block_s
    thr, guard0 = settings.moving_threshold, 1.0 / cands[0]

    def common_chunks():
        return store_chunks(stores[0], 0, N, thr, guard0, chunk, model)

    fold = _Folds(starts, N, cut, shift, t_first, block_s, folds)
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
        raise SignalError(f"the recordings ({cut} usable samples) are too short to "
                          f"cross-validate the filter cutoff in {block_s:g} s blocks")
    if not scored.all():
        raise SignalError("too few moving samples to cross-validate the filter cutoff")

    scores, rms_all = [], []
    for k, c in enumerate(cands):
        guard = 1.0 / c
        train, test = CompressedAccumulator(model, base), CompressedAccumulator(model, base)
        seq = _SequenceDeadBand(model, thr, guard, int(math.ceil(guard / max(min_step, 1e-9))) + 3)
        fold = _Folds(starts, N, cut, shift, t_first, block_s, folds)
        for a, (d0, m) in zip(range(0, N, chunk), common_chunks()):
            d = d0 if k == 0 else stores[k].read(a, a + d0.n_samples)
            f = fold.of(a, d.t)
            te = np.flatnonzero(f == folds - 1)
            if te.size:
                test.add(d.subset(te), m[te])
            for rows, keep in seq.add(d.subset(np.flatnonzero((f >= 0) & (f != folds - 1)))):
                train.add(rows, keep)
            if progress is not None:
                progress(k * N + a + d.n_samples, len(cands) * N)
        for rows, keep in seq.end():
            train.add(rows, keep)
        try:
            values = ESTIMATORS["ols"](train.problem()).values
        except IdentificationError:
            scores.append(math.inf)
            rms_all.append(np.full(model.n, np.inf))
            continue
        rms = test.raw_residual_rms(values)
        rms_all.append(rms)
        scores.append(float(np.mean(np.log(np.maximum(rms, 1e-300)))))
    best = int(np.argmin(scores))
    if not math.isfinite(scores[best]):
        raise SignalError("no cutoff candidate gave an identification; set identification.filter.cutoff_hz")
    return CutoffChoice(cands[best], tuple(cands), tuple(scores), tuple(rms_all))


class _PiecesOnly:
    """An observer that sees the pieces, not the processed blocks (replayed once the
    cutoff is chosen)."""

    def __init__(self, observer):
        self.observer = observer

    def piece(self, segment, rec) -> None:
        self.observer.piece(segment, rec)

    def segment_end(self, segment, kept) -> None:
        self.observer.segment_end(segment, kept)

    def processed(self, data) -> None:
        """Not now: at the chosen cutoff, afterwards."""


def process_choosing_cutoff(bag, cfg, settings, holdout: float, model, base, progress, observer=None,
                            candidates=None, chunk: int = CHUNK_SAMPLES):
    """Read `bag` once through every candidate's filter (and the default cutoff's, for
    when the data cannot decide), choose the cutoff (`choose_cutoff_stored`) and return
    (the `ProcessedBag` of the cutoff used, the settings with it, the one-line note, the
    `CutoffChoice` or None). `observer` (the input checks) sees the pieces while reading
    and the chosen cutoff's processed samples afterwards, as `process_bag` shows them."""
    seen: dict[str, tuple] = {}

    def filters_for_rate(rate: float):
        cands = candidates_for_rate(rate, settings.filter, candidates)
        seen["cands"] = cands
        opts = [replace(settings.filter, cutoff_hz=c) for c in cands]
        if settings.filter.cutoff_hz not in cands:
            opts.append(settings.filter)
        return opts

    with progress.stage("read bag"):
        pb = process_bag_filters(bag, cfg, filters_for_rate, progress=progress.counter("msg"),
                                 observer=None if observer is None else _PiecesOnly(observer),
                                 joints=model.joint_names)
    try:
        cands = seen["cands"]
        try:
            with progress.stage("choose cutoff"), single_threaded_blas():    # many small QRs (util.blas)
                choice = choose_cutoff_stored(model, pb, cands, settings, holdout, base, chunk=chunk,
                                              progress=progress.counter("samples"))
        except SignalError as exc:
            choice, note = None, default_cutoff_note(settings, exc)
        else:
            settings = replace(settings, filter=replace(settings.filter, cutoff_hz=choice.cutoff_hz))
            note = choice.summary()
        k = [o.cutoff_hz for o in pb.filters].index(settings.filter.cutoff_hz)
        store = pb.stores[k]
        if observer is not None:
            for a in range(0, store.n_samples, chunk):
                observer.processed(store.read(a, a + chunk))
    except BaseException:
        pb.close()
        raise
    for s in pb.stores:
        if s is not store:
            s.close()
    kept = ProcessedBag(store, pb.report, pb.skipped, pb.messages, [store], [pb.filters[k]], pb.origin_ns,
                        pb.first_t)
    return kept, settings, note, choice
