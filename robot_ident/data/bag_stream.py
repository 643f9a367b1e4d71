"""Chunked reading of the joint topics of a rosbag2 folder (sqlite3 or mcap).

rosbags' reader yields (connection, log time, serialised bytes) per message; they are
taken in batches of `batch` messages, split by topic and decoded by `data.cdr` into
`JointStream` arrays, so memory holds one batch of messages, never the whole bag.

For an uncompressed single-file sqlite3 bag the rows are fetched with the standard
library's sqlite3 (``fetchmany`` of the rosbag2 ``messages`` table in the order the
recorder wrote it, which is the order of arrival): rosbags goes through apsw one row at a
time in log-time order (an index walk), which capped reading at ~140 k messages/s here,
and counts every topic's messages on opening (a scan of the table); the counts are in
metadata.yaml. The synchroniser orders samples by header stamp anyway.

An mcap bag (one file or split into several, chunks uncompressed, zstd or lz4, or no
chunks) is read by `mcap_read`, a reader written on numpy: rosbags' MCAP reader parses
each record through BytesIO and merges chunks by log time with a heap, ~80 % of the
read time (~350 k messages/s here against ~1.3 M/s; Foxglove's ``mcap`` package was
slower still, ~250 k/s without decoding). Messages come in file order (order of arrival),
as from sqlite3. A file it does not handle (no summary section, a truncated file, an
unknown chunk compression, a non-CDR channel) and bags compressed by rosbag2 itself
(file or message compression) are read by rosbags; when rosbags then fails, the error
also names the MCAP file and why the fast reader left it. Every other bag (split or
compressed sqlite3) is read by rosbags.
"""
from __future__ import annotations

import sqlite3
from itertools import islice
from pathlib import Path
from typing import Callable, Iterator, Mapping

import numpy as np
import yaml

from ..errors import RobotIdentError
from .bag_files import _MSGTYPE, BagError, _check_bag_path, _open, make_typestore
from .bag_files import select_connections as _select
from .cdr import decode
from .joint_stream import JointStream
from .mcap_read import McapUnusual, open_summary
from .mcap_read import messages as mcap_messages

DEFAULT_BATCH = 20_000


class _Topic:
    """What the batch loop needs of a connection."""

    def __init__(self, topic: str, msgtype: str, count: int):
        self.topic, self.msgtype, self.msgcount = topic, msgtype, count


def _metadata(p: Path) -> tuple[dict, dict]:
    """(rosbag2 bag information, topic -> message count) of metadata.yaml."""
    meta = yaml.safe_load((p / "metadata.yaml").read_text(encoding="utf-8"))["rosbag2_bagfile_information"]
    counts: dict[str, int] = {}
    for t in meta.get("topics_with_message_count") or []:
        name = t["topic_metadata"]["name"]
        counts[name] = counts.get(name, 0) + int(t["message_count"])
    return meta, counts


def _plain_mcap(p: Path) -> tuple[list, dict] | str | None:
    """(MCAP summaries of the files in order, topic -> message count) of an mcap bag without
    rosbag2 file or message compression whose files `mcap_read` handles; else why not
    (a file `mcap_read` leaves to rosbags) or None (not such a bag)."""
    try:
        meta, counts = _metadata(p)
        files = meta.get("relative_file_paths") or []
        if (meta.get("storage_identifier") != "mcap" or not files
                or str(meta.get("compression_mode") or "").lower() not in ("", "none")):
            return None
        summaries = []
        for f in files:
            try:
                summaries.append(open_summary(p / f))
            except McapUnusual as exc:
                return f"MCAP file {f}: {exc}"
    except Exception:   # anything unusual: rosbags reads it (and reports what is wrong)
        return None
    return summaries, counts


def _plain_sqlite(p: Path) -> tuple[Path, dict] | None:
    """(database, topic -> message count) of an uncompressed single-file sqlite3 bag, else None."""
    try:
        meta = yaml.safe_load((p / "metadata.yaml").read_text(encoding="utf-8"))["rosbag2_bagfile_information"]
        files = meta.get("relative_file_paths") or []
        if (meta.get("storage_identifier") != "sqlite3" or len(files) != 1
                or str(meta.get("compression_mode") or "").lower() not in ("", "none")):
            return None
        counts: dict[str, int] = {}
        for t in meta.get("topics_with_message_count") or []:
            name = t["topic_metadata"]["name"]
            counts[name] = counts.get(name, 0) + int(t["message_count"])
        db = p / files[0]
        return (db, counts) if db.is_file() else None
    except Exception:           # anything unusual: rosbags reads it (and reports what is wrong)
        return None


def bag_chunks(path, topics: Mapping[str, tuple[str, str | None]], batch: int = DEFAULT_BATCH,
               progress: Callable[[int, int], None] | None = None) -> Iterator[dict[str, JointStream]]:
    """Yield, per batch of messages in bag order, topic -> `JointStream` of that batch's
    messages (topics without a message in the batch are absent). ``topics`` maps topic ->
    (kind, interface) as in `bag.read_streams`. `progress(done, total)` is called per batch."""
    p = _check_bag_path(path)
    plain = _plain_sqlite(p)
    note = ""
    try:
        if plain is not None:
            yield from _sqlite_chunks(p, plain[0], plain[1], topics, batch, progress)
            return
        mcap = _plain_mcap(p)
        if isinstance(mcap, tuple):
            yield from _mcap_chunks(p, mcap[0], mcap[1], topics, batch, progress)
            return
        note = f" [{mcap}]" if mcap else ""        # why the MCAP reader left it to rosbags
        try:
            reader = _open(path)
        except BagError as exc:
            raise BagError(f"{exc}{note}") from exc
        try:
            conns = _select(reader.connections, path, topics)
            yield from _decode_batches(_rosbags_batches(reader, conns, sorted({c.topic for c in conns}), batch),
                                       conns, topics, reader.deserialize, progress)
        finally:
            reader.close()
    except RobotIdentError:
        raise
    except Exception as exc:
        raise BagError(f"cannot read bag {path}: {exc}{note}") from exc


def _decode_batches(batches, conns, topics, deser, progress):
    names = sorted({c.topic for c in conns})
    total = int(sum(c.msgcount for c in conns))
    done = 0
    for which, logs, data in batches:
        done += len(data)
        out: dict[str, JointStream] = {}
        for k, topic in enumerate(names):
            rows = np.flatnonzero(which == k)
            if not rows.size:
                continue
            kind, interface = topics[topic]
            msgtype = _MSGTYPE[kind]
            raws = [data[i] for i in rows]
            out[topic] = decode(raws, msgtype, topic, interface if kind == "dynamic_joint_state" else None,
                                received=logs[rows], fallback=lambda raw, m=msgtype: deser(raw, m))
        del data
        if progress is not None:
            progress(done, total)
        yield out


def _rosbags_batches(reader, conns, names, batch):
    """(topic index per message, log times, serialised messages) per batch, via rosbags."""
    index = {id(c): names.index(c.topic) for c in conns}
    it = reader.messages(connections=conns)
    while True:
        chunk = list(islice(it, batch))
        if not chunk:
            return
        conn, logs, data = zip(*chunk)
        del chunk
        yield (np.fromiter((index[id(c)] for c in conn), dtype=np.int32, count=len(conn)),
               np.asarray(logs, dtype=np.int64), data)


def _sqlite_chunks(p: Path, db: Path, counts: dict, topics, batch, progress):
    """The same from the database with the standard library's sqlite3; message
    definitions are those of the ROS 2 type store (`bag.make_typestore`)."""
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        rows = con.execute("SELECT id, name, type FROM topics").fetchall()
        conns = _select([_Topic(name, mtype, counts.get(name, 0)) for _, name, mtype in rows], p, topics)
        names = sorted({c.topic for c in conns})
        ids = {int(tid): names.index(name) for tid, name, _ in rows if name in names}
        lut = np.full(max(ids) + 1, -1, dtype=np.int32)
        for tid, k in ids.items():
            lut[tid] = k
        marks = ",".join("?" * len(ids))
        cur = con.execute(f"SELECT topic_id, timestamp, data FROM messages WHERE topic_id IN ({marks}) "
                          "ORDER BY id", tuple(ids))

        def batches():
            while True:
                got = cur.fetchmany(batch)
                if not got:
                    return
                tid, logs, data = zip(*got)
                del got
                yield lut[np.asarray(tid, dtype=np.int64)], np.asarray(logs, dtype=np.int64), data
        deser = make_typestore().deserialize_cdr
        yield from _decode_batches(batches(), conns, topics, deser, progress)
    finally:
        con.close()


def _mcap_chunks(p: Path, summaries: list, counts: dict, topics, batch, progress):
    """The same from the MCAP files with `mcap_read` (in file order); message definitions
    are those of the ROS 2 type store (`bag.make_typestore`)."""
    kinds = sorted({(c.topic, c.msgtype) for s in summaries for c in s.channels.values()})
    conns = _select([_Topic(t, m, counts.get(t, 0)) for t, m in kinds], p, topics)
    names = sorted({c.topic for c in conns})
    plan = []
    for s in summaries:
        ids = {cid: names.index(c.topic) for cid, c in s.channels.items() if c.topic in names}
        if any(s.channels[cid].encoding != "cdr" for cid in ids):
            raise BagError(f"bag {p}: file {s.path.name} stores topic(s) "
                           f"{sorted({s.channels[c].topic for c in ids if s.channels[c].encoding != 'cdr'})} "
                           "in another encoding than CDR")
        lut = np.full(max(s.channels) + 1, -1, dtype=np.int32)
        for cid, k in ids.items():
            lut[cid] = k
        plan.append((s, set(ids), lut))

    def batches():
        which, logs, data, n = [], [], [], 0
        for s, wanted, lut in plan:
            for chan, lg, raws in mcap_messages(s, wanted):
                which.append(lut[chan])
                logs.append(lg)
                data += raws
                n += len(raws)
                if n >= batch:
                    yield np.concatenate(which), np.concatenate(logs), data
                    which, logs, data, n = [], [], [], 0
        if n:
            yield np.concatenate(which), np.concatenate(logs), data
    yield from _decode_batches(batches(), conns, topics, make_typestore().deserialize_cdr, progress)


def concat_streams(parts: list[JointStream]) -> JointStream:
    """One stream of consecutive pieces of the same topic (matrix form when every piece
    shares the same joint names and has matrix fields)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        raise ValueError("no stream pieces")
    if len(parts) == 1:
        return parts[0]
    topic = parts[0].topic
    fields = list(parts[0].fields)
    stamps = np.concatenate([p.stamps for p in parts])
    rec = None
    if all(p.received is not None for p in parts):
        rec = np.concatenate([p.received for p in parts])
    shared = all(p._shared and tuple(p.names) == tuple(parts[0].names) and
                 all(isinstance(p.fields.get(f), np.ndarray) and p.fields[f].ndim == 2 for f in fields)
                 and set(p.fields) == set(fields) for p in parts)
    if shared:
        return JointStream(topic, stamps, parts[0].names, {f: np.vstack([p.fields[f] for p in parts])
                                                            for f in fields}, rec)
    names: list = []
    per = {f: [] for f in fields}
    for p in parts:
        M = len(p)
        names += [tuple(p.names)] * M if p._shared else [tuple(n) for n in p.names]
        for f in fields:
            v = p.fields.get(f)
            if v is None:
                per[f] += [np.zeros(0)] * M
            elif isinstance(v, np.ndarray) and v.ndim == 2:
                per[f] += list(v)
            else:
                per[f] += list(v)
    return JointStream(topic, stamps, names, per, rec)
