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
from dataclasses import dataclass, field
from typing import Callable, Sequence

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
    # `process_bag_filters`: one store per filter pipeline (`store` is the first)
    stores: list = field(default_factory=list)
    filters: list = field(default_factory=list)     # their FilterOptions
    origin_ns: int = 0       # the synchronised time's origin (`stamp_origin_ns` of its segments)
    first_t: float = 0.0     # synchronised time of the first kept segment's first sample

    @property
    def summary(self) -> str:
        return self.report.summary() + "".join(f"\n{s}" for s in self.skipped)

    def close(self) -> None:
        for s in self.stores or [self.store]:
            s.close()


def process_bag(path, cfg, filter_options: FilterOptions, sync_options: SyncOptions | None = None,
                progress: Callable[[int, int], None] | None = None, batch: int = DEFAULT_BATCH,
                chunk_s: float = CHUNK_S, store_dir=None, observer=None, joints=None) -> ProcessedBag:
    """Read, synchronise, convert and process a bag with the topics, actuators and sync
    options of an `io.config.IdentConfig`; raises `NeedsWholeRecording` for recordings
    the chunked path does not handle (see `stream_sync`). The samples' joints are in the
    order of `joints` (the model's; default the config's), matched by name.

    `observer` (e.g. `estimation.recording_checks.InputChecks`) sees the data on the
    way: ``observer.piece(segment, rec)`` every synchronised, converted piece (a segment's
    pieces in time order), ``observer.segment_end(segment, kept)`` when a segment ends
    (``kept``: long enough to be one of the segments `sync.synchronise` keeps), and
    ``observer.processed(data)`` every block of processed samples appended to the store."""
    return process_bag_filters(path, cfg, lambda _rate: [filter_options], sync_options, progress, batch,
                               chunk_s, store_dir, observer, joints)


def process_bag_filters(path, cfg, filters_for_rate: Callable[[float], Sequence[FilterOptions]],
                        sync_options: SyncOptions | None = None,
                        progress: Callable[[int, int], None] | None = None, batch: int = DEFAULT_BATCH,
                        chunk_s: float = CHUNK_S, store_dir=None, observer=None, joints=None) -> ProcessedBag:
    """`process_bag` with several filter pipelines on one read of the bag: the synchronised
    pieces go through one `SegmentFilter` per `FilterOptions` of ``filters_for_rate(rate)``
    (called once, with the synchronised rate, when the first piece arrives) into one store
    each (`ProcessedBag.stores`, in that order). A segment that one pipeline cannot process
    is skipped in all. ``observer.processed`` sees the first pipeline's blocks."""
    joints = tuple(cfg.joints) if joints is None else tuple(joints)
    if sorted(joints) != sorted(cfg.joints):
        raise SignalError(f"joints {', '.join(joints)} are not the config's ({', '.join(cfg.joints)})")
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
    pipes: list[tuple[FilterOptions, ProcessedStore]] = []

    def pipelines() -> list[tuple[FilterOptions, ProcessedStore]]:
        if not pipes:
            options = list(filters_for_rate(sync.rate))
            if not options:
                raise SignalError("no filter to process the recording with")
            pipes.extend((o, ProcessedStore(joints, store_dir)) for o in options)
        return pipes

    def sink_for(seg: int, k: int, store: ProcessedStore):
        def sink(d) -> None:
            if (seg, k) not in rows:       # where this segment's processed samples start
                store.segment_starts.append(store.n_samples)
                rows[seg, k] = [store.n_samples, store.n_samples]
            store.append(d)
            rows[seg, k][1] = store.n_samples
            if k == 0 and observer is not None:
                observer.processed(d)
        return sink

    filters: dict[int, list[SegmentFilter] | _Dropped] = {}
    rows: dict[tuple[int, int], list[int]] = {}    # (segment, pipeline) -> [first, end) rows in its store
    lengths: dict[int, tuple[float, float, int, int]] = {}
    skipped: list[str] = []
    dropped = {"segments": 0, "samples": 0}
    kept = {"segments": 0, "samples": 0}
    first: dict[str, float | int] = {}
    messages = 0

    def min_needed() -> int:
        return max(int(opts.min_samples), 1, int(math.ceil(opts.min_segment_s * sync.rate - 1e-6)) + 1)

    def take(pieces) -> None:
        for seg, piece in pieces:
            rec = acts.apply(piece.reorder(joints))
            if observer is not None:
                observer.piece(seg, rec)
            fs = filters.get(seg)
            if fs is None:
                fs = filters[seg] = [SegmentFilter(o, sync.rate, sink_for(seg, k, st), min_needed())
                                     for k, (o, st) in enumerate(pipelines())]
                lengths[seg] = (float(rec.t[0]), float(rec.t[-1]), 0, int(rec.meta.get("stamp_origin_ns", 0)))
            t0, _, n, origin = lengths[seg]
            lengths[seg] = (t0, float(rec.t[-1]), n + rec.n_samples, origin)
            if isinstance(fs, _Dropped):
                continue
            try:
                for f in fs:
                    f.add(rec)
            except SignalError as exc:
                skipped.append(f"segment {t0:.3f}-... s skipped: {exc}")
                filters[seg] = _Dropped()
                take_back(seg)
        for seg in list(sync.ended):
            finish(seg)
        sync.ended.clear()

    def take_back(seg: int) -> None:
        """The samples a failed segment had already put in the stores are removed (the
        whole-recording path skips such a segment whole); they are the stores' last rows,
        else the recording is read at once."""
        for k, (_, st) in enumerate(pipes):
            a, b = rows.pop((seg, k), (st.n_samples, st.n_samples))
            if b != st.n_samples:
                raise NeedsWholeRecording("a segment failed part-way after a later segment's samples were stored")
            st.truncate(a)

    def finish(seg: int) -> None:
        fs = filters.pop(seg, None)
        if fs is None:
            return
        t0, t1, n, origin = lengths.pop(seg)
        if observer is not None:
            observer.segment_end(seg, n >= min_needed())
        if isinstance(fs, _Dropped):
            return
        if n < min_needed():
            dropped["segments"] += 1
            dropped["samples"] += n
            return
        kept["segments"] += 1
        kept["samples"] += n
        if "t" not in first or t0 < first["t"]:
            first.update(t=t0, origin=origin)
        try:
            for f in fs:
                f.end()
        except SignalError as exc:
            skipped.append(f"segment {t0:.3f}-{t1:.3f} s skipped: {exc}")
            take_back(seg)

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
        stores = [st for _, st in pipes]
        if stores[0].n_samples == 0:
            raise SignalError(f"no usable segment after synchronisation ({rep.summary()}; "
                              + "; ".join(skipped) + ")")
        if any(st.n_samples != stores[0].n_samples or st.segment_starts != stores[0].segment_starts
               for st in stores):
            raise NeedsWholeRecording("a segment failed part-way in one filter pipeline and not in another")
        return ProcessedBag(stores[0], rep, skipped, messages, stores, [o for o, _ in pipes],
                            int(first.get("origin", 0)), float(first.get("t", 0.0)))
    except BaseException:
        for _, st in pipes:
            st.close()
        raise


class _Dropped:
    """A segment whose processing failed part-way (its earlier samples were taken back out)."""

    def add(self, rec) -> None:
        """Its later pieces are ignored."""
