"""Synchronisation of joint streams chunk by chunk, with the rules of `sync.synchronise`.

`ChunkedSync` receives the two streams in pieces (bag order) and calls
`sync.synchronise` on one stretch at a time, so memory holds a few seconds of
messages instead of the recording. Every stretch is synchronised on the grid of the
whole recording (`grid_origin_ns`: phase-locked to the first valid sample of the
faster stream, at the rate, gap limit and jump limit found on the first stretch), and
reaches `overlap` further back than the samples it emits, so that every emitted grid
point sees the same neighbouring messages -- and gets the same interpolated values --
as in one call on the whole recording. Pieces of consecutive grid points are stitched
into segments; segments shorter than the options' minimum are dropped as
`synchronise` drops them.

Limits (the caller falls back to the whole-recording path, see `NeedsWholeRecording`):
a backward time jump (a looped bag: several passes), and a first stretch without any
common data. Messages logged more than ``LATE_S`` after newer-stamped ones are placed
by their stamp in the stretch they arrive in. The lag between the topics (data/lag.py)
is measured once, on the first stretch, and applied to every stretch (the whole-recording
path measures it on the longest pass: the two differ by far less than the 0.5 ms search
step, and corrections move stamps in 10 us steps, so both usually shift alike). While the
positions of the first stretch do not determine the lag (`LagEstimate.determined`: the arm
at rest), the first stretch grows, up to ``LAG_PROBE_MAX_S``; past that the lag is not
corrected and a note says so. The report's ``other_joints`` ranges span all stretches. The report's ``unused``
count is not kept (0), ``isolated`` may count a sample of an overlap twice; the other
counts are exact.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np

from ..errors import RobotIdentError, SignalError
from .bag_stream import concat_streams
from .joint_stream import NS_PER_S, JointStream
from .lag import LagEstimate
from .signals import Recording
from .sync import StreamReport, SyncOptions, SyncReport, synchronise

CHUNK_S = 10.0      # stamp time synchronised per call
LATE_S = 1.0        # a message may carry a stamp this much older than messages before it in the bag
LAG_PROBE_MAX_S = 60.0   # the first stretch grows up to this while the lag is not determined (at rest)


class NeedsWholeRecording(RobotIdentError):
    """The recording has a feature the chunked path does not reproduce exactly."""


def _cut(s: JointStream, before_ns: float) -> tuple[JointStream | None, JointStream | None]:
    """(messages stamped before `before_ns`, the others), each None when empty."""
    m = s.stamps < before_ns
    if m.all():
        return s, None
    if not m.any():
        return None, s
    return s.select(m), s.select(~m)


class ChunkedSync:
    """Feed pieces of the two streams with `feed`, then call `finish`; both return
    ``(segment_index, Recording)`` pieces (effort = the effort stream's values) in time
    order; `ended` lists segments that are complete. `report` sums the stretches'."""

    def __init__(self, joints: Sequence[str], options: SyncOptions | None = None, *,
                 position_field: str = "position", velocity_field: str = "velocity",
                 effort_field: str = "effort", chunk_s: float = CHUNK_S, meta: dict | None = None):
        self.joints = tuple(joints)
        self.options = options or SyncOptions()
        self.fields = {"states": position_field, "velocity": velocity_field, "efforts": effort_field}
        self.chunk_ns = int(chunk_s * NS_PER_S)
        self.meta = dict(meta or {})
        self._pending: dict[str, list[JointStream]] = {"states": [], "efforts": []}
        self._carry: dict[str, JointStream | None] = {"states": None, "efforts": None}
        self._first_ns: dict[str, int | None] = {"states": None, "efforts": None}
        self._max_ns: dict[str, int | None] = {"states": None, "efforts": None}
        self._boundary: float | None = None      # stamp up to which stretches were synchronised
        self._next_probe: float | None = None    # no start before this stamp (waiting for motion)
        self._k_done = -math.inf                 # grid index from which points are still to be emitted
        self.fixed: SyncOptions | None = None
        self.origin_ns: int | None = None
        self.rate = self.max_gap = self.jump_ns = self.overlap_ns = None
        self.report: SyncReport | None = None
        self._gaps: set = set()
        self._seg = -1
        self._last_k: int | None = None
        self.ended: list[int] = []
        self.topics = {"states": None, "efforts": None}

    # ------------------------------------------------------------------ input
    def feed(self, states: JointStream | None, efforts: JointStream | None) -> list[tuple[int, Recording]]:
        for role, s in (("states", states), ("efforts", efforts)):
            if s is None or len(s) == 0:
                continue
            self.topics[role] = s.topic
            if self.jump_ns is not None:
                prev = self._max_ns[role]
                st = s.stamps
                back = np.diff(np.concatenate([[prev if prev is not None else st[0]], st]))
                if (back < -self.jump_ns).any():
                    raise NeedsWholeRecording(f"topic {s.topic!r} jumps back in time (several passes)")
            self._pending[role].append(s)
            mx = int(s.stamps.max())
            self._max_ns[role] = mx if self._max_ns[role] is None else max(self._max_ns[role], mx)
            if self._first_ns[role] is None:
                self._first_ns[role] = int(s.stamps.min())
        if None in self._max_ns.values():
            return []
        newest = min(self._max_ns.values()) - LATE_S * NS_PER_S
        out = []
        if self.fixed is None:
            span = newest - min(self._first_ns.values())
            if span < 2 * self.chunk_ns or (self._next_probe is not None and newest < self._next_probe):
                return out
            if not self._start("cap" if span >= LAG_PROBE_MAX_S * NS_PER_S else "probe"):
                self._next_probe = newest + self.chunk_ns      # the arm at rest so far: wait for motion
                return out
        while newest - self._boundary >= self.chunk_ns:
            out += self._round(self._boundary + self.chunk_ns)
        return out

    def finish(self) -> list[tuple[int, Recording]]:
        if self.fixed is None:
            if None in self._max_ns.values():
                role = "states" if self._max_ns["states"] is None else "efforts"
                raise SignalError(f"topic {self.topics[role] or role!r} has no messages")
            self._start("whole")
        out = self._round(math.inf)
        self._close_segment()
        return out

    # ------------------------------------------------------------- internals
    def _start(self, mode: str) -> bool:
        """Rates, limits, the grid origin and the lag between the topics from the data
        received so far (the first stretch). `mode` 'probe': False (nothing fixed) when the
        lag is measured but not determined by these data (the arm at rest: any shift fits
        the noise; then more data are awaited); 'cap': start anyway, such a lag is not
        applied and a note says so; 'whole' (the whole recording): as `synchronise` does."""
        s = concat_streams(self._pending["states"])
        e = concat_streams(self._pending["efforts"])
        self._pending = {"states": [s], "efforts": [e]}
        def probe_sync(lag=None):
            try:
                return synchronise(s, e, self.joints, options=self.options, position_field=self.fields["states"],
                                   velocity_field=self.fields["velocity"], effort_field=self.fields["efforts"],
                                   lag=lag)
            except SignalError as exc:
                if "no common stretch" in str(exc) or "jumps back" in str(exc):
                    raise NeedsWholeRecording(str(exc)) from exc
                raise

        unmeasured = LagEstimate(float("nan"), 0.0, False, float("nan"), float("nan"))
        try:
            probe = probe_sync()
            lag = probe.report.lag
            undetermined = lag is not None and math.isfinite(lag.lag_s) and not lag.determined
        except SignalError as exc:
            if mode == "whole" or "sync.max_lag_s" not in str(exc):
                raise
            undetermined, lag = True, None      # at the search bound: maybe noise at rest
        if undetermined and mode == "probe":
            return False                         # decided with more data
        if undetermined:                         # 'cap': synchronised without a lag correction
            probe = probe_sync(unmeasured)
        if probe.report.time_jumps:
            raise NeedsWholeRecording("the recording jumps back in time (several passes)")
        rep = probe.report
        self.rate, self.max_gap = rep.rate_hz, rep.max_gap_s
        self.origin_ns = int(probe.segments[0].meta["stamp_origin_ns"])
        self._velocity = probe.segments[0].qd is not None
        jump_s = self.options.jump_back_s if self.options.jump_back_s is not None else max(self.max_gap, 0.5)
        self.jump_ns = jump_s * NS_PER_S
        slow = max(1.0 / r.rate_hz for r in rep.streams.values())
        self.overlap_ns = int(max(1.0, 2.5 * (self.max_gap + 2 * slow)) * NS_PER_S)
        self.fixed = replace(self.options, rate_hz=self.rate, max_gap_s=self.max_gap, jump_back_s=jump_s,
                             min_segment_s=0.0, min_samples=2)
        self.report = SyncReport(self.rate, self.max_gap,
                                 {role: StreamReport(r.topic, role, rate_hz=r.rate_hz)
                                  for role, r in rep.streams.items()},
                                 notes=["read in chunks: samples unused outside the segments are not counted"],
                                 lag=rep.lag, lag_corrected=rep.lag_corrected)
        # one lag for every stretch: the first stretch's (a stretch measuring its own would shift
        # its samples differently); none measured there -> none measured later either
        self._lag = rep.lag if rep.lag is not None else unmeasured
        if undetermined:
            self.report.lag, self.report.lag_corrected = None, False
            self.report.notes.append(
                f"the lag between the topics is not determined by the first {LAG_PROBE_MAX_S:g} s (the joints "
                "hardly move: the positions only show their noise); not corrected -- record a stretch of motion "
                "near the start to have it measured")
        self._boundary = min(self._first_ns.values()) - 1
        return True

    def _take(self, role: str, before: float) -> JointStream | None:
        parts = [p for p in self._pending[role] if len(p)]
        now, later = [], []
        for p in parts:
            a, b = _cut(p, before)
            if a is not None:
                now.append(a)
            if b is not None:
                later.append(b)
        self._pending[role] = later
        carry = self._carry[role]
        if carry is not None and len(carry):
            now.insert(0, carry)
        for p in now:
            self.report.streams[role].messages += len(p) if p is not carry else 0
        return concat_streams(now) if now else None

    def _clean_tail(self, s: JointStream, role: str, since: float, velocity: bool) -> JointStream | None:
        """Valid samples (finite used fields, sorted, first of equal stamps) stamped >= since,
        in the stream's own form (so that they join the next piece without conversion)."""
        keep = np.flatnonzero(s.stamps >= since)
        if not keep.size:
            return None
        tail = s.select(keep)
        used = [self.fields["states"]] + ([self.fields["velocity"]] if velocity else []) \
            if role == "states" else [self.fields["efforts"]]
        ok = np.all([np.isfinite(tail.matrix(f, self.joints)).all(axis=1) for f in used], axis=0)
        idx = np.flatnonzero(ok)
        idx = idx[np.argsort(tail.stamps[idx], kind="stable")]
        st = tail.stamps[idx]
        first = np.ones(st.size, bool)
        first[1:] = st[1:] != st[:-1]
        idx = idx[first]
        return tail.select(idx) if idx.size else None

    def _round(self, boundary: float) -> list[tuple[int, Recording]]:
        S, E = self._take("states", boundary), self._take("efforts", boundary)
        k_hi = math.inf if math.isinf(boundary) else \
            math.ceil((boundary - self.overlap_ns / 2 - self.origin_ns) / NS_PER_S * self.rate)
        out = []
        res = None
        if S is not None and E is not None and len(S) >= 2 and len(E) >= 2:
            try:
                res = synchronise(S, E, self.joints, options=self.fixed, position_field=self.fields["states"],
                                  velocity_field=self.fields["velocity"], effort_field=self.fields["efforts"],
                                  meta=self.meta, grid_origin_ns=self.origin_ns, lag=self._lag)
            except SignalError as exc:
                note = f"{(self._boundary - self.origin_ns) / NS_PER_S:.3f} s on: {exc}".splitlines()[0]
                if note not in self.report.notes:
                    self.report.notes.append(note)
        if res is not None:
            self._add_report(res.report)
            if res.report.time_jumps:
                raise NeedsWholeRecording("the recording jumps back in time (several passes)")
            for seg in res.segments:
                k = np.rint(seg.t * self.rate).astype(np.int64)
                sel = (k >= self._k_done) & (k < k_hi)
                if not sel.any():
                    continue
                ks = k[sel]
                piece = Recording(seg.t[sel], seg.joint_names, seg.q[sel], seg.effort[sel],
                                  qd=None if seg.qd is None else seg.qd[sel], meta=seg.meta)
                if self._last_k is None or ks[0] != self._last_k + 1:
                    self._close_segment()
                    self._seg += 1
                self._last_k = int(ks[-1])
                out.append((self._seg, piece))
        if not math.isinf(boundary):
            velocity = self._velocity
            since = boundary - self.overlap_ns
            self._carry = {"states": None if S is None else self._clean_tail(S, "states", since, velocity),
                           "efforts": None if E is None else self._clean_tail(E, "efforts", since, velocity)}
        self._k_done = k_hi
        self._boundary = boundary
        return out

    def _close_segment(self) -> None:
        if self._seg >= 0 and (not self.ended or self.ended[-1] != self._seg):
            self.ended.append(self._seg)

    def _add_report(self, rep: SyncReport) -> None:
        for role, r in rep.streams.items():
            t = self.report.streams[role]
            for name in ("foreign", "out_of_order", "duplicates", "nan_samples", "isolated"):
                setattr(t, name, getattr(t, name) + getattr(r, name))
            for j, c in r.nan_by_joint.items():
                t.nan_by_joint[j] = t.nan_by_joint.get(j, 0) + c
            t.absent_fields.update(r.absent_fields)
        for j, (lo, hi) in rep.other_joints.items():
            a, b = self.report.other_joints.get(j, (lo, hi))
            self.report.other_joints[j] = (min(a, lo), max(b, hi))
        for g in rep.gaps:
            key = (g.topic, round(g.start_s, 9), round(g.end_s, 9))
            if key not in self._gaps:
                self._gaps.add(key)
                self.report.gaps.append(g)
        for n in rep.notes:
            if n not in self.report.notes:
                self.report.notes.append(n)
