"""One stream of joint samples as plain arrays: header stamps (ns), the joint names of
each message and the position, velocity and effort fields; built from messages by
data.msgs or directly from arrays."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import SignalError

NS_PER_S = 1_000_000_000
MAX_SECONDS = 9.2e9      # float seconds beyond this overflow int64 nanoseconds (and are no clock's seconds)


# ---------------------------------------------------------------------------- input
@dataclass
class JointStream:
    """The samples of one topic, in arrival order.

    ``stamps``: header stamps, int64 nanoseconds (float seconds are converted).
    ``names``: the joint names of each message -- a sequence of tuples, one per
    message -- or a single tuple of names shared by every message.
    ``fields``: field name (``position``, ``velocity``, ``effort``, ``current``, ...)
    -> either a list of 1-D arrays, one per message, aligned with that message's
    names (an empty array means "field not published"), or, when ``names`` is a
    single tuple, an (M, len(names)) array.
    ``received``: optional receive times (the bag's log times), int64 ns; used only
    when the publisher leaves every header stamp equal (often zero).
    """

    topic: str
    stamps: np.ndarray
    names: Sequence
    fields: dict
    received: np.ndarray | None = None

    def _ns(self, x, label: str) -> np.ndarray:
        s = np.asarray(x)
        if s.ndim != 1:
            raise SignalError(f"topic {self.topic!r}: {label} must be one-dimensional, got shape {s.shape}")
        if s.dtype.kind == "f":
            if not np.isfinite(s).all():
                raise SignalError(f"topic {self.topic!r}: {int((~np.isfinite(s)).sum())} {label} are not finite")
            big = float(np.max(np.abs(s))) if s.size else 0.0
            if big > MAX_SECONDS:        # int64 nanoseconds end in 2262
                unit = ("nanoseconds since 1970" if 1e17 < big < 1e19 else "microseconds since 1970"
                        if 1e14 < big < 1e16 else "milliseconds since 1970" if 1e11 < big < 1e13
                        else "nanoseconds, microseconds or milliseconds")
                raise SignalError(f"topic {self.topic!r}: {label} up to {big:.4g} s -- seconds are expected, these "
                                  f"look like {unit}: convert the time column to seconds")
            return np.round(s * NS_PER_S).astype(np.int64)
        return s.astype(np.int64)

    def __post_init__(self):
        s = self.stamps = self._ns(self.stamps, "stamps")
        M = s.size
        if self.received is not None:
            self.received = self._ns(self.received, "receive times")
            if self.received.size != M:
                raise SignalError(f"topic {self.topic!r}: {self.received.size} receive times for {M} stamps")
        if len(self.names) > 0 and isinstance(self.names[0], str):
            self.names = tuple(self.names)
            self._shared = True
        else:
            if len(self.names) != M:
                raise SignalError(f"topic {self.topic!r}: {len(self.names)} name lists for {M} stamps")
            self._shared = False if M else True
            if not M:
                self.names = ()
        for name, values in self.fields.items():
            if self._shared and isinstance(values, np.ndarray) and values.ndim == 2:
                if values.shape != (M, len(self.names)):
                    raise SignalError(f"topic {self.topic!r}: field {name!r} has shape {values.shape}, "
                                      f"expected {(M, len(self.names))}")
            elif len(values) != M:
                raise SignalError(f"topic {self.topic!r}: field {name!r} has {len(values)} entries for {M} stamps")

    @classmethod
    def from_arrays(cls, topic: str, stamps, joint_names: Sequence[str], **fields) -> "JointStream":
        """A stream whose messages all list `joint_names` in the same order."""
        return cls(topic, stamps, tuple(joint_names),
                   {k: np.asarray(v, dtype=float) for k, v in fields.items()})

    def __len__(self) -> int:
        return int(self.stamps.size)

    def joint_set(self) -> set[str]:
        if self._shared:
            return set(self.names)
        out: set[str] = set()
        for names in set(map(tuple, self.names)):
            out.update(names)
        return out

    def mentions(self, joints: Sequence[str]) -> np.ndarray:
        """(M,) True for messages that list at least one of `joints`."""
        want = set(joints)
        if self._shared:
            return np.full(len(self), bool(want & set(self.names)))
        out = np.empty(len(self), dtype=bool)
        verdict: dict[tuple, bool] = {}
        for i, names in enumerate(self.names):
            names = tuple(names)
            v = verdict.get(names)
            if v is None:
                v = verdict[names] = bool(want & set(names))
            out[i] = v
        return out

    def lists(self, joints: Sequence[str]) -> np.ndarray:
        """(M, len(joints)) True where a message lists the joint (whatever its values)."""
        if self._shared:
            return np.tile(np.array([j in self.names for j in joints]), (len(self), 1))
        out = np.empty((len(self), len(joints)), dtype=bool)
        rows: dict[tuple, np.ndarray] = {}
        for i, names in enumerate(self.names):
            names = tuple(names)
            r = rows.get(names)
            if r is None:
                r = rows[names] = np.array([j in names for j in joints])
            out[i] = r
        return out

    def select(self, rows: np.ndarray) -> "JointStream":
        """The messages at boolean mask or indices `rows`, in the same order."""
        idx = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows, dtype=np.intp)
        fields = {}
        for k, v in self.fields.items():
            if isinstance(v, np.ndarray) and v.ndim == 2:
                fields[k] = v[idx]
            else:
                fields[k] = [v[i] for i in idx]
        names = self.names if self._shared else [self.names[i] for i in idx]
        return JointStream(self.topic, self.stamps[idx], names, fields,
                           None if self.received is None else self.received[idx])

    def matrix(self, field_name: str, joints: Sequence[str]) -> np.ndarray:
        """(M, len(joints)) values of one field, NaN where a message lacks the joint or the field."""
        M, n = len(self), len(joints)
        if field_name not in self.fields:
            raise SignalError(f"topic {self.topic!r} has no field {field_name!r} "
                              f"(it has {', '.join(self.fields) or 'none'})")
        values = self.fields[field_name]
        out = np.full((M, n), np.nan)
        if self._shared:
            cols = [self.names.index(j) if j in self.names else -1 for j in joints]
            have = [k for k, c in enumerate(cols) if c >= 0]
            if isinstance(values, np.ndarray) and values.ndim == 2:
                out[:, have] = values[:, [cols[k] for k in have]]
                return out
            groups = {tuple(self.names): np.arange(M)}
        else:
            groups = {}
            for i, names in enumerate(self.names):
                groups.setdefault(tuple(names), []).append(i)
        for names, idx in groups.items():
            idx = np.asarray(idx, dtype=np.intp)
            cols = [names.index(j) if j in names else -1 for j in joints]
            have = [k for k, c in enumerate(cols) if c >= 0]
            if not have:
                continue
            width = len(names)
            rows = [i for i in idx if len(values[i]) == width]   # empty/short arrays -> NaN
            if not rows:
                continue
            block = np.asarray([values[i] for i in rows], dtype=float)
            out[np.ix_(np.asarray(rows, dtype=np.intp), have)] = block[:, [cols[k] for k in have]]
        return out


class AngleUnwrap:
    """Positions of continuous joints made continuous across messages, chunk after chunk:
    drivers often publish them modulo 2 pi (a wrap is a jump of about 2 pi between two
    messages), which the synchronisation would interpolate through, the filter ring on and
    the differentiation read as a huge velocity. A jump larger than pi between a joint's
    consecutive values (arrival order) is taken as a wrap. Messages that list their joints
    each in their own order are unwrapped message by message."""

    def __init__(self, joints: Sequence[str], field_name: str = "position"):
        self.joints, self.field = tuple(joints), field_name
        self.last: dict[str, tuple[float, float]] = {}     # joint -> (last raw, last unwrapped)
        self.wraps = 0

    def __call__(self, s: JointStream | None) -> JointStream | None:
        if s is None or not self.joints or self.field not in s.fields or len(s) == 0:
            return s
        values = s.fields[self.field]
        if s._shared and isinstance(values, np.ndarray) and values.ndim == 2:
            values = values.astype(float, copy=True)
            for j in self.joints:
                if j in s.names:
                    k = s.names.index(j)
                    values[:, k] = self._column(j, values[:, k])
        else:
            values = [np.asarray(v, float).copy() for v in values]
            for i, names in enumerate(s.names):
                for k, j in enumerate(names):
                    if j in self.joints and k < values[i].size:
                        values[i][k] = self._column(j, values[i][k:k + 1])[0]
        fields = dict(s.fields, **{self.field: values})
        return JointStream(s.topic, s.stamps, s.names, fields, s.received)

    def _column(self, joint: str, x: np.ndarray) -> np.ndarray:
        ok = np.isfinite(x)
        if not ok.any():
            return x
        raw = x[ok]
        prev = self.last.get(joint)
        seq = raw if prev is None else np.concatenate([[prev[0]], raw])
        un = np.unwrap(seq)
        self.wraps += int(np.count_nonzero(np.abs(np.diff(seq)) > np.pi))
        if prev is not None:
            un = un[1:] + (prev[1] - un[0])
        out = x.copy()
        out[ok] = un
        self.last[joint] = (float(raw[-1]), float(un[-1]))
        return out
