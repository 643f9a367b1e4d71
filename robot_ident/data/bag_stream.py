"""Chunked reading of the joint topics of a rosbag2 folder (sqlite3 or mcap).

rosbags' reader yields (connection, log time, serialised bytes) per message; they are
taken in batches of `batch` messages, split by topic and decoded by `data.cdr` into
`JointStream` arrays, so memory holds one batch of messages, never the whole bag.

For an uncompressed single-file sqlite3 bag the rows are fetched with the standard
library's sqlite3 (``fetchmany`` of the rosbag2 ``messages`` table in the order the
recorder wrote it, which is the order of arrival): rosbags goes through apsw one row at a
time in log-time order (an index walk), which capped reading at ~140 k messages/s here.
The synchroniser orders samples by header stamp anyway. rosbags
still opens the bag (metadata, connections, types) and reads every other storage.
"""
from __future__ import annotations

import sqlite3
from itertools import islice
from typing import Callable, Iterator, Mapping

import numpy as np

from ..errors import RobotIdentError
from .bag import _MSGTYPE, BagError, _open
from .cdr import decode
from .joint_stream import JointStream

DEFAULT_BATCH = 20_000


def _select(reader, path, topics: Mapping[str, tuple[str, str | None]]):
    by_topic: dict[str, list] = {}
    for c in reader.connections:
        by_topic.setdefault(c.topic, []).append(c)
    conns = []
    for topic, (kind, _) in topics.items():
        want = _MSGTYPE[kind]
        if topic not in by_topic:
            have = ", ".join(f"{t} ({cs[0].msgtype})" for t, cs in sorted(by_topic.items())) or "none"
            raise BagError(f"bag {path} has no topic {topic!r} ({want}); its topics: {have}")
        for c in by_topic[topic]:
            if c.msgtype != want:
                raise BagError(f"topic {topic!r} in bag {path} has type {c.msgtype}, expected {want}")
        conns += by_topic[topic]
    return conns


def bag_chunks(path, topics: Mapping[str, tuple[str, str | None]], batch: int = DEFAULT_BATCH,
               progress: Callable[[int, int], None] | None = None) -> Iterator[dict[str, JointStream]]:
    """Yield, per batch of messages in bag order, topic -> `JointStream` of that batch's
    messages (topics without a message in the batch are absent). ``topics`` maps topic ->
    (kind, interface) as in `bag.read_streams`. `progress(done, total)` is called per batch."""
    reader = _open(path)
    try:
        conns = _select(reader, path, topics)
        total = int(sum(c.msgcount for c in conns))
        deser = reader.deserialize
        names = sorted({c.topic for c in conns})
        done = 0
        for which, logs, data in _sqlite_batches(reader, names, batch) or _rosbags_batches(reader, conns, names,
                                                                                           batch):
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
    except RobotIdentError:
        raise
    except Exception as exc:
        raise BagError(f"cannot read bag {path}: {exc}") from exc
    finally:
        reader.close()


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


def _sqlite_batches(reader, names, batch):
    """The same from an uncompressed single-file sqlite3 bag with the standard library's
    sqlite3, or None when the bag is not one."""
    readers = getattr(reader, "readers", [])
    if len(readers) != 1:
        return None
    r = readers[0]
    r = r if hasattr(r, "storages") else getattr(r, "storage", None)   # rosbags >= 0.10 wraps the reader
    storages = getattr(r, "storages", [])
    if (not hasattr(r, "metadata") or getattr(r.metadata, "compression_mode", None) or len(storages) != 1
            or type(storages[0]).__name__ != "Sqlite3Reader" or not hasattr(storages[0], "path")):
        return None
    path = storages[0].path

    def gen():
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            ids = {}
            for tid, name in con.execute("SELECT id, name FROM topics"):
                if name in names:
                    ids[int(tid)] = names.index(name)
            if not ids:
                return
            lut = np.full(max(ids) + 1, -1, dtype=np.int32)
            for tid, k in ids.items():
                lut[tid] = k
            marks = ",".join("?" * len(ids))
            cur = con.execute(f"SELECT topic_id, timestamp, data FROM messages WHERE topic_id IN ({marks}) "
                              "ORDER BY id", tuple(ids))
            while True:
                rows = cur.fetchmany(batch)
                if not rows:
                    return
                tid, logs, data = zip(*rows)
                del rows
                yield lut[np.asarray(tid, dtype=np.int64)], np.asarray(logs, dtype=np.int64), data
        finally:
            con.close()
    return gen()


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
