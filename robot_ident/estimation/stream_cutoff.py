"""The filter cutoff chosen from a rosbag2 recording in bounded memory, from one read of
the bag: every piece goes through one zero-phase filter pipeline per candidate cutoff
(`data.bag_processed.process_bag_filters`, the windowed filter of `data.stream_filter`),
each into its own processed-sample file; then `auto_cutoff.cross_validate_cutoff` (the
one implementation of the choice, also behind `choose_cutoff` on recordings in memory)
runs over the files with the last hold-out fraction of the samples kept out and the
times re-based as `inputs.load_input` re-bases them. The samples cannot be given to a
fold while they are read: which samples are held out and the block length depend on
the number of processed samples, known only at the end.

Memory: the filters' windows, a chunk of samples and per joint two R factors of
``n_std + 2`` columns, whatever the recording's length; disk: one processed-sample file
per candidate ((1 + 5 n) x 8 bytes per processed sample each, e.g. 30 MB per candidate
for 10 min of a 6-joint arm at 200 Hz), the one chosen kept for the identification (no
second read of the bag).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..data.bag_processed import ProcessedBag, process_bag_filters
from ..errors import SignalError
from ..util.blas import single_threaded_blas
from .auto_cutoff import CANDIDATES_HZ, CutoffChoice, cross_validate_cutoff, decimated_rate, default_cutoff_note
from .compressed import CHUNK_SAMPLES


def candidates_for_rate(rate_hz: float, filter_options, candidates=None) -> tuple[float, ...]:
    """The candidates `choose_cutoff` tries on a recording synchronised at `rate_hz`."""
    top = 0.4 * decimated_rate(rate_hz, filter_options)
    return tuple(c for c in (candidates or CANDIDATES_HZ) if c < top)


def choose_cutoff_stored(model, pb: ProcessedBag, cands, settings, holdout: float, base,
                         block_s: float = 2.0, folds: int = 5, chunk: int = CHUNK_SAMPLES,
                         progress=None) -> CutoffChoice:
    """`cross_validate_cutoff` on the candidates' processed files of `pb` (``pb.stores[k]``
    is processed with cutoff ``cands[k]``), the last `holdout` fraction of the samples held
    out, the times re-based as `inputs.load_input` re-bases them on the first kept segment."""
    if not cands:
        raise SignalError(f"no cutoff candidate below 0.4 x the sample rate "
                          f"({decimated_rate(pb.report.rate_hz, settings.filter):.4g} Hz)")
    stores = pb.stores[:len(cands)]
    N = stores[0].n_samples
    cut = int(round((1.0 - holdout) * N)) if holdout > 0 else N
    origin = pb.origin_ns * 1e-9
    return cross_validate_cutoff(model, stores, cands, settings, base, np.arange(N) < cut,
                                 origin - (origin + pb.first_t), block_s, folds, chunk, progress)


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
