"""Recordings -> processed identification samples on disk: the read, synchronise,
convert and filter stages of the one pipeline, for every kind of input.

An input is a rosbag2 folder, a CSV/NPZ table (data/table.py) or two joint streams
already in memory (`StreamsInput`: the identification node's window). A bag is read in
batches (`bag_stream`) and synchronised stretch by stretch (`stream_sync.ChunkedSync`,
which calls `sync.synchronise`); a bag the chunked synchroniser does not reproduce (a
looped bag: `NeedsWholeRecording`) and the inputs already in memory are synchronised
in one call of `sync.synchronise` -- a memory policy, not another pipeline: the
synchronised segments then take the same road. Currents become joint efforts
(the config's `Drive`), each segment is filtered, differentiated, trimmed and decimated
in windows (`stream_filter.SegmentFilter`, which calls `signals.process`) into one
`ProcessedStore` per filter pipeline (several: the candidates of a cutoff chosen from
the data). Several inputs go into the same stores, each segment marked with its input.
A bag's batches are read and decoded in a forked process while this one synchronises and
filters the ones before (up to `READ_AHEAD` batches ahead: the process reads on while
this one imports the filters' scipy.signal), and a piece's filters run side by side in
threads (util/parallel.py): the same samples, in the same order, as one after the other.

An `observer` (the input checks, estimation/input_checks.py) sees the converted pieces:
``observer.piece(segment, rec)`` in time order and ``observer.segment_end(segment,
kept)``. When the chunked read has to start again whole, ``observer.restart()`` is
called first.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import SignalError
from ..util.parallel import MAX_THREADS, forked_items, run_all, thread_pool
from .bag_stream import DEFAULT_BATCH, bag_chunks
from .joint_stream import AngleUnwrap, JointStream
from .signals import FilterOptions
from .stream_filter import ProcessedStore, SegmentFilter
from .stream_sync import CHUNK_S, ChunkedSync, NeedsWholeRecording
from .sync import SyncOptions, SyncReport, synchronise
from .table import TABLE_SUFFIXES

READ_AHEAD = 8          # batches (`bag_stream.DEFAULT_BATCH` messages; ~2 MB for the demo arm) read ahead


@dataclass(frozen=True)
class StreamsInput:
    """Joint states and efforts (or currents) already in memory."""

    states: JointStream
    efforts: JointStream
    label: str = "streams"


@dataclass
class InputRead:
    """What one input gave: its label, synchronisation report, skipped segments, messages."""

    label: str
    report: SyncReport
    skipped: list                 # "segment a-b s skipped: why" lines
    messages: int
    whole: str = ""               # why it was synchronised in one call ('' for a chunked read)

    @property
    def summary(self) -> str:
        why = [f"  note: synchronised in one call ({self.whole})"] if self.whole.startswith("read at once") else []
        return "\n".join([self.report.summary(), *why, *self.skipped])


@dataclass
class Segment:
    start: int                    # its first row in the stores
    input: int                    # index into `Processed.inputs`
    offset_s: float               # added to its stored times: seconds from its input's first synchronised sample


@dataclass
class Processed:
    """Processed samples of one or more inputs: ``stores[k]`` processed with ``filters[k]``
    (the same rows and segments in each)."""

    stores: list
    filters: list
    joints: tuple
    inputs: list = field(default_factory=list)      # InputRead per input
    segments: list = field(default_factory=list)    # Segment per stored segment, in row order

    @property
    def store(self) -> ProcessedStore:
        return self.stores[0]

    @property
    def n_samples(self) -> int:
        return self.stores[0].n_samples if self.stores else 0

    def segment_rows(self) -> list[tuple[int, int]]:
        ends = [s.start for s in self.segments[1:]] + [self.n_samples]
        return [(s.start, e) for s, e in zip(self.segments, ends)]

    @property
    def summary(self) -> str:
        if len(self.inputs) == 1:
            return self.inputs[0].summary
        return "\n".join(f"{x.label}: " + x.summary.replace("\n", "\n  ") for x in self.inputs)

    def keep_only(self, k: int) -> None:
        """Keep the stores of filter `k` only (the cutoff chosen), the others closed."""
        self.keep([k])

    def keep(self, ks) -> None:
        """Keep the stores of the filters `ks` (in their order), the others closed."""
        for i, s in enumerate(self.stores):
            if i not in ks:
                s.close()
        self.stores, self.filters = [self.stores[k] for k in ks], [self.filters[k] for k in ks]

    def close(self) -> None:
        for s in self.stores:
            s.close()


def segments_in_memory(processed: Processed) -> list:
    """Every stored segment as `ProcessedData` in memory (small problems: a payload, a demo)."""
    return [processed.store.read(a, b) for a, b in processed.segment_rows()]


def process_one(source, cfg, filter_options: FilterOptions, joints=None, progress=None) -> Processed:
    """`process_input` of one input with one filter."""
    return process_input(source, cfg, lambda _rate: [filter_options], joints=joints, progress=progress)


def input_fingerprint(source, cfg, messages: int = 500) -> str | None:
    """What identifies a recording whatever its path (a copy has the same): a table's bytes, a
    bag's first `messages` joint states (stamps and positions); None for streams in memory or
    an unreadable input (its own error comes when it is read). Both topics count: the same
    motion with other currents is another recording."""
    import hashlib
    if isinstance(source, StreamsInput):
        return None
    path = Path(source)
    try:
        if path.is_file():
            return "sha1:" + hashlib.sha1(path.read_bytes()).hexdigest()
        h = hashlib.sha1()
        for chunk in bag_chunks(path, _topics(cfg), messages):
            for topic in sorted(chunk):
                s = chunk[topic]
                h.update(topic.encode() + s.stamps.tobytes())
                for name in sorted(s.fields):
                    for v in s.fields[name]:
                        h.update(np.asarray(v, float).tobytes())
            return "messages:" + h.hexdigest()
    except Exception:       # noqa: BLE001 -- a fingerprint never fails a run; reading it will say why
        return None
    return None


def input_label(source) -> str:
    return source.label if isinstance(source, StreamsInput) else str(source)


def process_input(source, cfg, filters_for_rate: Callable[[float], Sequence[FilterOptions]], *,
                  into: Processed | None = None, joints=None, observer=None, progress=None,
                  batch: int = DEFAULT_BATCH, chunk_s: float = CHUNK_S, store_dir=None,
                  sync_options: SyncOptions | None = None, unwrap: Sequence[str] = ()) -> Processed:
    """Read, synchronise, convert and process one input (a bag or table path, or a
    `StreamsInput`) with the topics, actuators and sync options of an
    `io.config.IdentConfig` into `into`'s stores (new ones when None: one per
    `FilterOptions` of ``filters_for_rate(rate)``, called with the first input's
    synchronised rate; for a later input, the stores of the filters its own rate's call
    does not return are dropped for every input, with a note). The samples' joints are in
    the order of `joints` (default the config's), matched by name. The positions of the
    `unwrap` joints (continuous joints) are made continuous before anything else
    (`joint_stream.AngleUnwrap`; a note counts the wraps). Raises `SignalError` when nothing usable remains."""
    joints = tuple(cfg.joints) if joints is None else tuple(joints)
    if sorted(joints) != sorted(cfg.joints):
        raise SignalError(f"joints {', '.join(joints)} are not the config's ({', '.join(cfg.joints)})")
    out = into or Processed([], [], joints)
    label = input_label(source)
    opts = sync_options or cfg.sync
    if isinstance(source, StreamsInput):
        return _run(out, label, _WholeFeed(source.states, source.efforts, joints, opts, cfg.effort_field, label,
                                           unwrap), cfg, filters_for_rate, observer, store_dir, "in memory")
    path = Path(source)
    if path.suffix.lower() in TABLE_SUFFIXES:
        from .table import read_table_streams
        field_ = "effort" if cfg.current_source == "effort" else "current"
        states, values = read_table_streams(path, joints, field_)
        return _run(out, label, _WholeFeed(states, values, joints, opts, field_, f"table {path}", unwrap), cfg,
                    filters_for_rate, observer, store_dir, "a table")
    if not path.exists():
        raise SignalError(f"bag not found: {path}")
    topics = _topics(cfg)
    try:
        return _run(out, label, _ChunkedFeed(path, topics, cfg, joints, opts, batch, chunk_s, progress, unwrap),
                    cfg, filters_for_rate, observer, store_dir, "")
    except NeedsWholeRecording as exc:        # what the chunked read stored was taken back
        if observer is not None:
            observer.restart()
        from .bag import read_streams
        streams = read_streams(path, topics)
        return _run(out, label, _WholeFeed(streams[cfg.joint_states_topic], streams[cfg.current_topic], joints,
                                           opts, cfg.effort_field, str(path), unwrap),
                    cfg, filters_for_rate, observer, store_dir, f"read at once: {exc}")


def _topics(cfg) -> dict:
    js, cur = cfg.joint_states_topic, cfg.current_topic
    topics = {js: ("joint_state", None)}
    if cur != js:
        dyn = cfg.current_kind == "dynamic_joint_state"
        topics[cur] = (cfg.current_kind, cfg.current_interface if dyn else None)
    elif cfg.current_kind != "joint_state":
        raise SignalError(f"topic {cur!r} cannot be both the joint states and a DynamicJointState")
    return topics


class _ChunkedFeed:
    """A bag's synchronised pieces, stretch by stretch: ``batches()`` yields lists of
    ``(segment, Recording)``; `ended` lists the segments complete after a batch."""

    kept_by_sync = False         # the pipeline drops the segments too short to keep

    def __init__(self, path, topics, cfg, joints, opts, batch, chunk_s, progress, unwrap=()):
        self.sync = ChunkedSync(joints, opts, effort_field=cfg.effort_field, chunk_s=chunk_s,
                                meta={"bag": str(path)})
        self.unwrap = AngleUnwrap(unwrap)
        self.unwrap_efforts = AngleUnwrap(unwrap)      # a DynamicJointState topic carries positions too
        self.args = path, topics, batch, progress
        self.states_topic, self.effort_topic = cfg.joint_states_topic, cfg.current_topic
        self.messages = 0

    options = property(lambda self: self.sync.options)
    rate = property(lambda self: self.sync.rate)
    report = property(lambda self: self.sync.report)
    ended = property(lambda self: self.sync.ended)

    def batches(self):
        js, cur = self.states_topic, self.effort_topic
        path, topics, batch, progress = self.args
        for chunk, count in forked_items(partial(_counted_chunks, path, topics, batch), f"reading {path}",
                                         ahead=READ_AHEAD):
            if count is not None and progress is not None:
                progress(*count)
            self.messages += sum(len(s) for s in chunk.values())
            states = self.unwrap(chunk.get(js))
            yield self.sync.feed(states, states if cur == js else self.unwrap_efforts(chunk.get(cur)))
        yield self.sync.finish()
        _note_wraps(self.sync.report, self.unwrap)


class _WholeFeed:
    """Streams synchronised in one call (`sync.synchronise`), each segment one piece."""

    kept_by_sync = True          # `synchronise` dropped the short segments already

    def __init__(self, states, efforts, joints, opts, effort_field, where, unwrap=()):
        same = efforts is states
        unwrapper = AngleUnwrap(unwrap)
        states = unwrapper(states)
        efforts = states if same else AngleUnwrap(unwrap)(efforts)    # their positions too, if they carry any
        res = synchronise(states, efforts, list(joints), options=opts, effort_field=effort_field,
                          meta={"source": where})
        _note_wraps(res.report, unwrapper)
        self.segments, self.report, self.rate = res.segments, res.report, res.report.rate_hz
        self.options = opts or SyncOptions()
        self.messages = len(states) + (0 if efforts is states else len(efforts))
        self.ended: list = []

    def batches(self):
        for k, seg in enumerate(self.segments):
            self.ended.append(k)
            yield [(k, seg)]


def _counted_chunks(path, topics, batch):
    """(chunk, (messages read, messages in all)) of `bag_chunks`."""
    counts: list = []
    for chunk in bag_chunks(path, topics, batch, lambda done, total: counts.append((done, total))):
        yield chunk, (counts.pop() if counts else None)


def _note_wraps(report, unwrapper: AngleUnwrap) -> None:
    if unwrapper.wraps and report is not None:
        report.notes.append(f"positions of the continuous joint(s) {', '.join(unwrapper.joints)} unwrapped "
                            f"({unwrapper.wraps} jump(s) of 2 pi: published modulo 2 pi)")


def _run(out: Processed, label: str, feed, cfg, filters_for_rate, observer, store_dir, whole: str) -> Processed:
    """The pieces of `feed` through the actuators and the filters into `out`'s stores."""
    opts_sync = feed.options
    acts = cfg.drive.for_joints(out.joints)       # actuators, then any coupled transmission
    first_store_rows = out.n_samples
    n_segments_before = len(out.segments)
    created = not out.stores             # this input's first pieces create the stores
    filters: dict = {}
    rows: dict = {}          # (segment, pipeline) -> [first, end) rows in its store
    lengths: dict = {}
    origins: dict = {}       # segment -> its stamps' origin (ns)
    seg_origin: dict = {}    # segment -> (its first row, its origin)
    sync_starts: list = []   # (origin, first synchronised time) of every segment long enough
    skipped: list[str] = []
    dropped = {"segments": 0, "samples": 0}
    kept = {"segments": 0, "samples": 0}
    sync_kept = feed.kept_by_sync
    checked = False          # this input's filters were matched with its rate

    def min_needed() -> int:
        return max(int(opts_sync.min_samples), 1, int(math.ceil(opts_sync.min_segment_s * feed.rate - 1e-6)) + 1)

    def pipelines() -> list:
        nonlocal checked
        if not out.stores:
            options = list(filters_for_rate(feed.rate))
            if not options:
                raise SignalError("no filter to process the recording with")
            out.filters.extend(options)
            out.stores.extend(ProcessedStore(out.joints, store_dir) for _ in options)
            checked = True
        elif not checked:       # a later input: only the filters its own rate carries are kept
            usable = list(filters_for_rate(feed.rate))
            ks = [k for k, f in enumerate(out.filters) if f in usable]
            gone = [f.cutoff_hz for k, f in enumerate(out.filters) if k not in ks]
            if gone and ks:
                out.keep(ks)
                skipped.append(f"note: filter cutoff candidate(s) {', '.join(f'{c:g}' for c in gone)} Hz dropped "
                               f"for every input: this input's rate ({feed.rate:.6g} Hz) cannot carry them")
            checked = True
        return list(zip(out.filters, out.stores))

    def sink_for(seg: int, k: int, store: ProcessedStore):
        def sink(d) -> None:
            if (seg, k) not in rows:
                store.segment_starts.append(store.n_samples)
                rows[seg, k] = [store.n_samples, store.n_samples]
                if k == 0:
                    seg_origin[seg] = (store.n_samples, origins[seg])
            store.append(d)
            rows[seg, k][1] = store.n_samples
        return sink

    def take(pieces) -> None:
        for seg, piece in pieces:
            for done in [e for e in feed.ended if e < seg]:     # a segment ends before the next one's rows
                finish(done)
                feed.ended.remove(done)
            rec = acts.apply(piece.reorder(out.joints))
            if observer is not None:
                observer.piece(seg, rec)
            fs = filters.get(seg)
            if fs is None:
                fs = filters[seg] = [SegmentFilter(o, feed.rate, sink_for(seg, k, st), min_needed())
                                     for k, (o, st) in enumerate(pipelines())]
                origins[seg] = int(rec.meta.get("stamp_origin_ns", 0))
                lengths[seg] = (float(rec.t[0]), float(rec.t[-1]), 0, origins[seg])
            t0, _, n, origin = lengths[seg]
            lengths[seg] = (t0, float(rec.t[-1]), n + rec.n_samples, origin)
            if fs is _DROPPED:
                continue
            try:
                run_all(pool, [partial(f.add, rec) for f in fs])
            except SignalError as exc:
                skipped.append(f"segment {t0:.3f}-... s skipped: {exc}")
                filters[seg] = _DROPPED
                take_back(seg)
        for seg in list(feed.ended):
            finish(seg)
        feed.ended.clear()

    def take_back(seg: int) -> None:
        """The samples of a segment that failed part-way are removed (it is skipped whole);
        they are the stores' last rows, else the recording is read at once."""
        seg_origin.pop(seg, None)
        for k, st in enumerate(out.stores):
            a, b = rows.pop((seg, k), (st.n_samples, st.n_samples))
            if b != st.n_samples:
                raise NeedsWholeRecording("a segment failed part-way after a later segment's samples were stored")
            st.truncate(a)

    def finish(seg: int) -> None:
        fs = filters.pop(seg, None)
        if fs is None:
            return
        t0, t1, n, origin = lengths.pop(seg)
        long_enough = sync_kept or n >= min_needed()
        if observer is not None:
            observer.segment_end(seg, long_enough)
        if fs is _DROPPED:
            return
        if not long_enough:
            dropped["segments"] += 1
            dropped["samples"] += n
            return
        kept["segments"] += 1
        sync_starts.append((origin, t0))
        kept["samples"] += n
        try:
            run_all(pool, [f.end for f in fs])
        except SignalError as exc:
            skipped.append(f"segment {t0:.3f}-{t1:.3f} s skipped: {exc}")
            take_back(seg)

    try:
        with thread_pool(MAX_THREADS) as pool:        # the filters of a piece side by side
            for pieces in feed.batches():
                take(pieces)
            for seg in list(filters):
                finish(seg)
        rep = feed.report
        if not sync_kept:
            rep.segments, rep.samples = kept["segments"], kept["samples"]
            rep.short_segments, rep.short_segment_samples = dropped["segments"], dropped["samples"]
        if kept["segments"] == 0 and not skipped:
            raise SignalError(f"{label}: the topics have no common stretch of data without gaps:\n{rep.summary()}")
        if out.n_samples == first_store_rows:
            raise SignalError(f"{label}: no usable segment after synchronisation ({rep.summary()}; "
                              + "; ".join(skipped) + ")")
        if any(st.n_samples != out.stores[0].n_samples or st.segment_starts != out.stores[0].segment_starts
               for st in out.stores):
            raise NeedsWholeRecording("a segment failed part-way in one filter pipeline and not in another")
    except BaseException:           # nothing of this input stays; stores it created are closed
        if created:
            out.close()
            out.stores.clear()
            out.filters.clear()
        for st in out.stores:
            st.truncate(first_store_rows)
        del out.segments[n_segments_before:]
        raise
    # times from the input's first synchronised sample (the stamps' origins may differ between passes)
    o_min = min(origin for origin, _ in sync_starts)
    base = min((origin - o_min) * 1e-9 + t0 for origin, t0 in sync_starts)
    out.segments += [Segment(row, len(out.inputs), (origin - o_min) * 1e-9 - base)
                     for row, origin in sorted(seg_origin.values())]
    out.inputs.append(InputRead(label, rep, skipped, feed.messages, whole))
    return out


class _Dropped:
    """A segment whose processing failed part-way (its later pieces are ignored)."""


_DROPPED = _Dropped()
