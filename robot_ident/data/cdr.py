"""Batch decoding of serialised sensor_msgs/JointState and control_msgs/DynamicJointState
(ROS 2 CDR, as stored in rosbag2) into `JointStream` arrays.

Why hand-written: rosbags' deserialiser builds one Python object per message, per
nested InterfaceValue and per array -- about 20 k messages/s here, which made reading
the bag 2/3 of the identification time. A ros2_control arm publishes the same joints
in the same order in every message, so the serialised messages of a topic share one
byte layout except for the stamp and the float64 payload. This module parses the
first message of a batch in Python to find that layout (where each float array
lives), checks with one vectorised comparison that every other message has the same
bytes outside stamp and payload, and reads stamps and values of the whole batch as
numpy views. Messages with another layout (a second publisher, a changing joint list)
are parsed one by one by the same parser; anything the parser does not understand
(big-endian CDR, a truncated message) goes to rosbags' deserialiser.

CDR (XCDR1, little endian) as written by rosbag2: a 4-byte encapsulation header, then
fields aligned to their size relative to the end of that header; strings are a uint32
length (with the terminating NUL) and the bytes; sequences a uint32 count and the
elements.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .joint_stream import JointStream

JOINT_STATE = "sensor_msgs/msg/JointState"
DYNAMIC_JOINT_STATE = "control_msgs/msg/DynamicJointState"
_LE_HEADERS = (b"\x00\x01\x00\x00", b"\x00\x01\x00\x02")   # CDR_LE, and with options
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_NS = 1_000_000_000


class CdrFormatError(ValueError):
    """The parser does not understand this message (rosbags' deserialiser takes over)."""


class _Cursor:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes):
        if len(buf) < 12 or buf[:4] not in _LE_HEADERS:
            raise CdrFormatError("not little-endian CDR")
        self.buf, self.pos = buf, 4

    def align(self, n: int) -> None:
        self.pos += (-(self.pos - 4)) % n

    def u32(self) -> int:
        self.align(4)
        if self.pos + 4 > len(self.buf):
            raise CdrFormatError("truncated message")
        v = _U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def string(self) -> str:
        n = self.u32()
        if n == 0 or self.pos + n > len(self.buf):
            raise CdrFormatError("bad string")
        s = self.buf[self.pos:self.pos + n - 1].decode()
        self.pos += n
        return s

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.u32()))

    def doubles(self) -> tuple[int, int]:
        """(byte offset, count) of a float64 sequence; moves past it."""
        n = self.u32()
        if n:
            self.align(8)
        off = self.pos
        self.pos += 8 * n
        if self.pos > len(self.buf):
            raise CdrFormatError("truncated message")
        return off, n


@dataclass(frozen=True)
class _Layout:
    """Where the values of one message layout live."""

    size: int
    names: tuple[str, ...]
    arrays: dict          # field -> (offset, count); DynamicJointState: interface -> per-joint offsets
    fixed: tuple          # byte ranges (a, b) that must equal the template's (all but stamp + payload)


def _stamp(buf: bytes) -> int:
    return _I32.unpack_from(buf, 4)[0] * _NS + _U32.unpack_from(buf, 8)[0]


def header_stamp_ns(buf: bytes) -> int | None:
    """The header stamp of a serialised message that starts with a std_msgs/Header
    (JointState, DynamicJointState), None if it is not little-endian CDR or too short."""
    if len(buf) < 12 or bytes(buf[:4]) not in _LE_HEADERS:
        return None
    return _stamp(buf)


def _skip_header(c: _Cursor) -> None:
    c.pos = 12
    c.string()                       # frame_id


def _joint_state_layout(buf: bytes) -> _Layout:
    c = _Cursor(buf)
    _skip_header(c)
    names = c.strings()
    arrays = {f: c.doubles() for f in ("position", "velocity", "effort")}
    if c.pos != len(buf) and any(buf[c.pos:]):   # CDR pads to 4 or 8 bytes with zeros
        raise CdrFormatError("trailing bytes")
    return _Layout(len(buf), names, arrays, _structure(len(buf), arrays.values()))


def _dynamic_layout(buf: bytes) -> _Layout:
    """DynamicJointState: every interface of every joint -> value offset (None: absent)."""
    c = _Cursor(buf)
    _skip_header(c)
    names = c.strings()
    n_iv = c.u32()
    if n_iv != len(names):
        raise CdrFormatError("joint_names and interface_values differ in length")
    per_joint = []
    spans = []
    for _ in range(n_iv):
        inames = c.strings()
        off, n = c.doubles()
        spans.append((off, n))
        per_joint.append({i: off + 8 * k for k, i in enumerate(inames) if k < n})
    interfaces = sorted({i for d in per_joint for i in d})
    arrays = {i: tuple(d.get(i) for d in per_joint) for i in interfaces}
    return _Layout(len(buf), names, arrays, _structure(len(buf), spans))


def _structure(size: int, spans) -> tuple:
    keep = np.ones(size + 2, dtype=bool)
    keep[0] = keep[-1] = False
    keep[5:13] = False               # the stamp (the encapsulation header must match)
    for off, n in spans:
        keep[1 + off:1 + off + 8 * n] = False
    edges = np.flatnonzero(np.diff(keep.astype(np.int8)))
    return tuple(zip(edges[0::2].tolist(), edges[1::2].tolist()))


def _gather(mat: np.ndarray, offsets: Sequence[int | None]) -> np.ndarray:
    """(M, len(offsets)) float64 read at byte `offsets` of every row of a (M, size) uint8 matrix."""
    out = np.full((mat.shape[0], len(offsets)), np.nan)
    for k, off in enumerate(offsets):
        if off is not None:
            out[:, k] = np.ascontiguousarray(mat[:, off:off + 8]).view("<f8")[:, 0]
    return out


def _stamps(mat: np.ndarray) -> np.ndarray:
    sec = np.ascontiguousarray(mat[:, 4:8]).view("<i4")[:, 0].astype(np.int64)
    nsec = np.ascontiguousarray(mat[:, 8:12]).view("<u4")[:, 0].astype(np.int64)
    return sec * _NS + nsec


def decode(raws: Sequence[bytes], msgtype: str, topic: str, interface: str | None = None,
           received=None, fallback: Callable | None = None) -> JointStream:
    """A `JointStream` of serialised messages of one topic, in the given order.

    JointState: fields ``position``, ``velocity``, ``effort`` (NaN rows where a message
    leaves a field empty, as `msgs.JointStreamCollector` makes of an empty array).
    DynamicJointState: a field named `interface` and ``position`` (NaN for a joint
    without the interface), as `msgs.JointStreamCollector` keeps them: the positions let
    `sync.synchronise` measure the lag between the topics.
    `fallback(raw)` deserialises a message the parser does not understand (rosbags)."""
    M = len(raws)
    if msgtype == JOINT_STATE:
        layout_of, fields = _joint_state_layout, ("position", "velocity", "effort")
    elif msgtype == DYNAMIC_JOINT_STATE:
        if not interface:
            raise ValueError("a DynamicJointState stream needs the interface name")
        layout_of, fields = _dynamic_layout, (interface,) + (("position",) if interface != "position" else ())
    else:
        raise ValueError(f"no batch decoder for {msgtype}")
    recv = None if received is None else np.asarray(received, dtype=np.int64)
    if M == 0:
        return JointStream(topic, np.zeros(0, np.int64), (), {f: [] for f in fields}, recv)

    def values(layout: _Layout, mat: np.ndarray) -> dict:
        n = len(layout.names)
        if msgtype == JOINT_STATE:
            out = {}
            for f in fields:
                off, cnt = layout.arrays[f]
                out[f] = _gather(mat, [off + 8 * k for k in range(n)] if cnt == n else [None] * n)
            return out
        return {f: _gather(mat, layout.arrays.get(f, (None,) * n)) for f in fields}

    pending = np.arange(M)
    groups = []
    sizes = np.fromiter((len(r) for r in raws), dtype=np.int64, count=M)
    singles: list[int] = []
    while pending.size:
        first = int(pending[0])
        try:
            layout = layout_of(raws[first])
        except CdrFormatError:
            singles.append(first)
            pending = pending[1:]
            continue
        cand = pending[sizes[pending] == layout.size]
        mat = np.frombuffer(b"".join([raws[i] for i in cand]), dtype=np.uint8).reshape(cand.size, layout.size)
        same = np.ones(cand.size, dtype=bool)
        for a, b in layout.fixed:
            same &= (mat[:, a:b] == mat[0, a:b]).all(axis=1)
        rows = cand[same]
        if msgtype == JOINT_STATE and any(cnt not in (0, len(layout.names)) for _, cnt in layout.arrays.values()):
            # arrays of another length than the name list: the generic collector's rules apply
            singles.extend(int(i) for i in rows)
        else:
            groups.append((rows, layout.names, _stamps(mat[same]), values(layout, mat[same])))
        pending = np.setdiff1d(pending, rows, assume_unique=True)
    if len(groups) == 1 and not singles:
        rows, names, stamps, vals = groups[0]
        return JointStream(topic, stamps, names, vals, recv)

    # Several layouts: per-message form (like JointStreamCollector.stream()).
    stamps = np.zeros(M, dtype=np.int64)
    names_of: list = [None] * M
    per = {f: [None] * M for f in fields}
    for rows, names, st, vals in groups:
        stamps[rows] = st
        for k, i in enumerate(rows):
            names_of[i] = names
            for f in fields:
                per[f][i] = vals[f][k]
    for i in singles:
        s, names, vals = _single(raws[i], msgtype, interface, fallback)
        stamps[i], names_of[i] = s, names
        for f in fields:
            per[f][i] = vals[f]
    return JointStream(topic, stamps, names_of, per, recv)


def _single(raw: bytes, msgtype: str, interface: str | None, fallback: Callable | None):
    """(stamp, names, field -> values) of one message of any layout."""
    from .msgs import dynamic_joint_state_values, joint_state_arrays
    try:
        if msgtype == JOINT_STATE:
            lay = _joint_state_layout(raw)
            vals = {f: np.frombuffer(raw, "<f8", cnt, off).copy() if cnt else np.zeros(0)
                    for f, (off, cnt) in lay.arrays.items()}
            return _stamp(raw), lay.names, vals
        lay = _dynamic_layout(raw)
        out = {}
        for f in (interface, "position"):
            offs = lay.arrays.get(f, (None,) * len(lay.names))
            out[f] = np.array([np.nan if o is None else struct.unpack_from("<d", raw, o)[0] for o in offs])
        return _stamp(raw), lay.names, out
    except CdrFormatError:
        if fallback is None:
            raise
    msg = fallback(raw)
    if msgtype == JOINT_STATE:
        a = joint_state_arrays(msg)
        return a.stamp_ns, a.names, {"position": a.position, "velocity": a.velocity, "effort": a.effort}
    s, names, v = dynamic_joint_state_values(msg, interface)
    return s, names, {interface: v, "position": dynamic_joint_state_values(msg, "position")[2]}
