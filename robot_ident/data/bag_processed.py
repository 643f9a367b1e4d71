"""A rosbag2 recording -> processed identification samples on disk, in bounded memory.

The chunked equivalent of ``bag.read_recordings_from_config`` followed by
``pipeline.process_segments``: batches of messages (`bag_stream`), synchronised
stretch by stretch (`stream_sync.ChunkedSync`, which calls `sync.synchronise`),
currents converted to efforts per piece, each segment filtered, differentiated,
trimmed and decimated in windows (`stream_filter.SegmentFilter`, which calls
`signals.process`), the result appended to a `ProcessedStore` file.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ..errors import SignalError
from .bag_stream import DEFAULT_BATCH, bag_chunks
from .signals import FilterOptions
from .stream_filter import ProcessedStore, SegmentFilter
from .stream_sync import CHUNK_S, ChunkedSync, NeedsWholeRecording  # noqa: F401  (re-exported)
from .sync import SyncOptions, SyncReport


@dataclass
class ProcessedBag:
    store: ProcessedStore
    report: SyncReport
    skipped: list            # "segment a-b s skipped: why" lines, as process_segments writes them
    messages: int

    @property
    def summary(self) -> str:
        return self.report.summary() + "".join(f"\n{s}" for s in self.skipped)


def process_bag(path, cfg, filter_options: FilterOptions, sync_options: SyncOptions | None = None,
                progress: Callable[[int, int], None] | None = None, batch: int = DEFAULT_BATCH,
                chunk_s: float = CHUNK_S, store_dir=None, observer=None) -> ProcessedBag:
    """Read, synchronise, convert and process a bag with the topics, actuators and sync
    options of an `io.config.IdentConfig`; raises `NeedsWholeRecording` for recordings
    the chunked path does not handle (see `stream_sync`).

    `observer` (e.g. `estimation.stream_checks.StreamedInputChecks`) sees the data on the
    way: ``observer.piece(segment, rec)`` every synchronised, converted piece (a segment's
    pieces in time order), ``observer.segment_end(segment, kept)`` when a segment ends
    (``kept``: long enough to be one of the segments `sync.synchronise` keeps), and
    ``observer.processed(data)`` every block of processed samples appended to the store."""
    joints = tuple(cfg.joints)
    js_topic, cur_topic = cfg.joint_states_topic, cfg.current_topic
    dyn = cfg.current_kind == "dynamic_joint_state"
    effort_field = cfg.current_interface if dyn else "effort"
    topics = {js_topic: ("joint_state", None)}
    if cur_topic != js_topic:
        topics[cur_topic] = (cfg.current_kind, cfg.current_interface if dyn else None)
    elif cfg.current_kind != "joint_state":
        raise SignalError(f"topic {cur_topic!r} cannot be both the joint states and a DynamicJointState")
    opts = sync_options or cfg.sync
    acts = cfg.drive.for_joints(joints)      # actuators, then any coupled transmission
    sync = ChunkedSync(joints, opts, effort_field=effort_field, chunk_s=chunk_s, meta={"bag": str(path)})
    store = ProcessedStore(joints, store_dir)
    if observer is None:
        sink = store.append
    else:
        def sink(d) -> None:
            store.append(d)
            observer.processed(d)
    filters: dict[int, SegmentFilter] = {}
    lengths: dict[int, tuple[float, float, int]] = {}
    skipped: list[str] = []
    dropped = {"segments": 0, "samples": 0}
    kept = {"segments": 0, "samples": 0}
    messages = 0

    def min_needed() -> int:
        return max(int(opts.min_samples), 1, int(math.ceil(opts.min_segment_s * sync.rate - 1e-6)) + 1)

    def take(pieces) -> None:
        for seg, piece in pieces:
            rec = acts.apply(piece.reorder(joints))
            if observer is not None:
                observer.piece(seg, rec)
            f = filters.get(seg)
            if f is None:
                f = filters[seg] = SegmentFilter(filter_options, sync.rate, sink, min_needed())
                lengths[seg] = (float(rec.t[0]), float(rec.t[-1]), 0)
            t0, _, n = lengths[seg]
            lengths[seg] = (t0, float(rec.t[-1]), n + rec.n_samples)
            try:
                f.add(rec)
            except SignalError as exc:
                skipped.append(f"segment {t0:.3f}-... s skipped: {exc}")
                filters[seg] = _Dropped()
        for seg in list(sync.ended):
            finish(seg)
        sync.ended.clear()

    def finish(seg: int) -> None:
        f = filters.pop(seg, None)
        if f is None:
            return
        t0, t1, n = lengths.pop(seg)
        if observer is not None:
            observer.segment_end(seg, n >= min_needed())
        if isinstance(f, _Dropped):
            return
        if n < min_needed():
            dropped["segments"] += 1
            dropped["samples"] += n
            return
        kept["segments"] += 1
        kept["samples"] += n
        try:
            f.end()
        except SignalError as exc:
            skipped.append(f"segment {t0:.3f}-{t1:.3f} s skipped: {exc}")

    try:
        for chunk in bag_chunks(path, topics, batch, progress):
            messages += sum(len(s) for s in chunk.values())
            states = chunk.get(js_topic)
            take(sync.feed(states, states if cur_topic == js_topic else chunk.get(cur_topic)))
        take(sync.finish())
        for seg in list(filters):
            finish(seg)
        rep = sync.report
        rep.segments, rep.samples = kept["segments"], kept["samples"]
        rep.short_segments, rep.short_segment_samples = dropped["segments"], dropped["samples"]
        if kept["segments"] == 0:
            raise SignalError(f"topics {js_topic!r} and {cur_topic!r} have no common stretch of data "
                              f"without gaps:\n{rep.summary()}")
        if store.n_samples == 0:
            raise SignalError(f"no usable segment after synchronisation ({rep.summary()}; "
                              + "; ".join(skipped) + ")")
        return ProcessedBag(store, rep, skipped, messages)
    except BaseException:
        store.close()
        raise


class _Dropped:
    """A segment whose processing failed part-way (its earlier samples stay in the store)."""

    def add(self, rec) -> None:
        """Its later pieces are ignored."""
