"""Join separately time-stamped joint streams onto one uniform time grid.

On a robot, positions (and maybe velocities) arrive on one topic and motor currents
or efforts on another, at different rates and phases. `synchronise` turns the two
streams -- plain arrays, see `JointStream` -- into `signals.Recording` segments on a
common uniform grid, and a `SyncReport` that says what was dropped and why.

Rules, in the order they are applied to each stream:

1. Columns are matched by joint name, never by position in the message. A joint
   that appears in no message of a stream is an error naming the joint and topic.
2. Time jumps: a step *back* in header stamp larger than ``jump_back_s`` (default:
   the larger of the gap limit and 0.5 s) in arrival order means the source restarted (a bag played in a
   loop, a simulator reset). The stream is cut into *passes* there; pass k of one
   stream is joined with pass k of the other, and each pass gives its own segments.
3. Non-finite values (joint_state_broadcaster publishes NaN for interfaces a joint
   lacks; an empty array means the field is not published): a sample with a NaN in
   a field that is used is dropped and counted per joint. A field that has no
   finite value at all for some joint is *absent*: positions or efforts absent is
   an error; velocities absent means the recording carries no velocities (they will
   be differentiated from positions), noted in the report.
4. Stamps that arrive out of order (a step back smaller than the jump limit) are
   sorted; repeated stamps keep the first sample that arrived and count the rest.
5. Gaps: consecutive samples of a stream further apart than ``max_gap_s``
   (default: relative to the slower stream's median period T, ``max(5 T, min(20 T,
   10 ms))`` -- 5 periods, but a fast log's hiccups of up to 10 ms (20 periods at
   most) are bridged: at 1 kHz a missed 8.5 ms is far shorter than the filter's
   time scale and costs less than a cut) are never interpolated across; the
   data is split into segments where either stream has a gap, and each gap is
   reported with its times and topic.
6. The grid: ``rate_hz`` (default: the faster stream's median rate, so the noisy
   efforts -- usually the faster stream -- keep all their samples; positions are
   smooth and linear interpolation of them costs little), phase-locked to the first
   sample of the faster stream so that its samples fall on grid points. Every
   field is linearly interpolated at the grid times within each segment.
   Segments shorter than ``min_segment_s`` or ``min_samples`` grid points are
   dropped and counted.

Times in the output recordings are seconds from the pass's origin stamp (the first
sample of the faster stream in that pass); ``meta['stamp_origin_ns']`` holds it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..errors import SignalError
from .joint_stream import NS_PER_S, JointStream
from .signals import Recording


@dataclass(frozen=True)
class SyncOptions:
    rate_hz: float | None = None        # None: the faster stream's median rate
    max_gap_s: float | None = None      # None: max(5 T, min(20 T, 10 ms)), T the slower stream's median period
    jump_back_s: float | None = None    # None: max(max_gap_s, 0.5 s)
    min_segment_s: float = 0.0
    min_samples: int = 3
    use_velocity: bool = True

    def __post_init__(self):
        for name in ("rate_hz", "max_gap_s", "jump_back_s"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise SignalError(f"synchronisation option {name} must be a positive number, got {v!r}")
        if not self.min_segment_s >= 0:
            raise SignalError(f"min_segment_s must be >= 0, got {self.min_segment_s!r}")
        if int(self.min_samples) < 2:
            raise SignalError(f"min_samples must be >= 2, got {self.min_samples!r}")


# --------------------------------------------------------------------------- report
@dataclass
class StreamReport:
    topic: str
    role: str                      # 'states' or 'efforts'
    messages: int = 0
    rate_hz: float = float("nan")  # median rate of the stamps
    foreign: int = 0               # messages about none of the joints (another publisher), ignored
    out_of_order: int = 0          # samples that arrived after a later-stamped one (re-sorted)
    duplicates: int = 0            # samples dropped because their stamp was seen already
    nan_samples: int = 0           # samples dropped for a non-finite value in a used field
    nan_by_joint: dict = field(default_factory=dict)
    absent_fields: dict = field(default_factory=dict)   # field -> joints with no finite value
    isolated: int = 0              # samples alone between two gaps (cannot be interpolated)
    unused: int = 0                # valid samples outside every kept segment
    passes: int = 1                # 1 + number of backward time jumps


@dataclass(frozen=True)
class Gap:
    topic: str
    pass_index: int
    start_s: float                 # last sample before the gap (s from the pass origin)
    end_s: float                   # first sample after it

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s


@dataclass
class SyncReport:
    rate_hz: float
    max_gap_s: float
    streams: dict                  # role -> StreamReport
    gaps: list = field(default_factory=list)
    time_jumps: int = 0            # backward jumps (per stream pair: passes - 1)
    segments: int = 0
    samples: int = 0               # grid samples in kept segments
    short_segments: int = 0        # segments dropped for being too short
    short_segment_samples: int = 0
    notes: list = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"synchronised at {self.rate_hz:.6g} Hz: {self.segments} segment(s), {self.samples} samples; "
                 f"{len(self.gaps)} gap(s) > {self.max_gap_s * 1e3:.3g} ms, {self.time_jumps} backward time "
                 f"jump(s), {self.short_segments} short segment(s) dropped ({self.short_segment_samples} samples)"]
        for r in self.streams.values():
            lines.append(f"  {r.role} {r.topic}: {r.messages} messages at {r.rate_hz:.6g} Hz; dropped "
                         f"{r.duplicates} duplicate, {r.nan_samples} non-finite, {r.isolated} isolated; "
                         f"{r.foreign} other publishers' ignored; "
                         f"{r.out_of_order} re-sorted; {r.unused} unused")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class SyncResult:
    segments: list                 # list[Recording]
    report: SyncReport

    @property
    def longest(self) -> Recording:
        return max(self.segments, key=lambda r: r.n_samples)


# ---------------------------------------------------------------------- internals
@dataclass
class _Pass:
    t_ns: np.ndarray               # sorted, unique, valid
    values: dict                   # field -> (m, n)


def default_max_gap_s(period_s: float) -> float:
    """The default gap limit for a stream whose median sample period is `period_s`."""
    return max(5.0 * period_s, min(20.0 * period_s, 0.010))


def _median_period_ns(stamps: np.ndarray) -> float:
    d = np.diff(stamps)
    d = d[d > 0]
    if d.size == 0:
        return float("nan")
    return float(np.median(d))


def _prepare(stream: JointStream, role: str, joints: Sequence[str], required: Sequence[str],
             optional: Sequence[str], jump_ns: float, report: StreamReport,
             notes: list) -> tuple[list[_Pass], tuple[str, ...]]:
    topic = stream.topic
    M = len(stream)
    if M == 0:
        raise SignalError(f"topic {topic!r} has no messages")
    present = stream.joint_set()
    missing = [j for j in joints if j not in present]
    if missing:
        raise SignalError(f"joint {missing[0]!r} is missing from topic {topic!r}"
                          + (f" (also missing: {', '.join(missing[1:])})" if len(missing) > 1 else "")
                          + f"; the topic has joints: {', '.join(sorted(present))}")
    mats = {}
    for f in required:
        m = stream.matrix(f, joints)
        finite = np.isfinite(m).any(axis=0)
        if not finite.all():
            bad = [j for j, ok in zip(joints, finite) if not ok]
            report.absent_fields[f] = bad
            raise SignalError(f"joint {bad[0]!r} has no finite {f!r} value in any of the {M} messages on "
                              f"topic {topic!r}" + (f" (nor do {', '.join(bad[1:])})" if len(bad) > 1 else ""))
        mats[f] = m
    used_optional = []
    for f in optional:
        if f not in stream.fields:
            continue
        m = stream.matrix(f, joints)
        finite = np.isfinite(m).any(axis=0)
        if not finite.all():
            bad = [j for j, ok in zip(joints, finite) if not ok]
            report.absent_fields[f] = bad
            notes.append(f"topic {topic!r} has no {f} for joint(s) {', '.join(bad)}; "
                         f"the recording carries no {f}")
            continue
        mats[f] = m
        used_optional.append(f)

    # Non-finite samples.
    bad_rows = np.zeros(M, dtype=bool)
    for f, m in mats.items():
        bad = ~np.isfinite(m)
        bad_rows |= bad.any(axis=1)
        for k, j in enumerate(joints):
            c = int(bad[:, k].sum())
            if c:
                report.nan_by_joint[j] = report.nan_by_joint.get(j, 0) + c
    report.nan_samples = int(bad_rows.sum())
    if bad_rows.all():
        raise SignalError(f"no message on topic {topic!r} carries finite {' and '.join(mats)} values for all of "
                          f"{', '.join(joints)} at once (are the joints split across several publishers, or "
                          f"is a value NaN in every message?); per joint non-finite counts: "
                          f"{', '.join(f'{j} {c}' for j, c in report.nan_by_joint.items())}")

    # Passes: split at big backward steps in arrival order.
    stamps = stream.stamps
    steps = np.diff(stamps)
    jumps = np.flatnonzero(steps < -jump_ns) + 1
    report.passes = jumps.size + 1
    bounds = np.concatenate([[0], jumps, [M]])
    passes = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        s = stamps[a:b]
        if s.size > 1:
            late = s[1:] < np.maximum.accumulate(s)[:-1]
            report.out_of_order += int(late.sum())
        keep = np.flatnonzero(~bad_rows[a:b]) + a
        order = keep[np.argsort(stamps[keep], kind="stable")]
        ts = stamps[order]
        first = np.ones(ts.size, dtype=bool)
        first[1:] = ts[1:] != ts[:-1]
        report.duplicates += int((~first).sum())
        order, ts = order[first], ts[first]
        passes.append(_Pass(ts, {f: m[order] for f, m in mats.items()}))
    return passes, tuple(used_optional)


def _runs(t: np.ndarray, max_gap: float) -> tuple[list[tuple[int, int]], list[tuple[float, float]], int]:
    """Index ranges [i0, i1] of runs without gaps (>= 2 samples), the gaps, isolated sample count."""
    if t.size == 0:
        return [], [], 0
    breaks = np.flatnonzero(np.diff(t) > max_gap)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [t.size - 1]])
    gaps = [(float(t[i]), float(t[i + 1])) for i in breaks]
    runs, isolated = [], 0
    for a, b in zip(starts, ends):
        if b > a:
            runs.append((int(a), int(b)))
        else:
            isolated += 1
    return runs, gaps, isolated


def _intersect(r1: list[tuple[float, float]], r2: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, k = [], 0, 0
    while i < len(r1) and k < len(r2):
        a = max(r1[i][0], r2[k][0])
        b = min(r1[i][1], r2[k][1])
        if b > a:
            out.append((a, b))
        if r1[i][1] < r2[k][1]:
            i += 1
        else:
            k += 1
    return out


def _interp(ts: np.ndarray, values: np.ndarray, tg: np.ndarray) -> np.ndarray:
    """Linear interpolation of all columns of `values` (m, n) at `tg` (inside [ts0, ts-1])."""
    idx = np.searchsorted(ts, tg, side="right") - 1
    idx = np.clip(idx, 0, ts.size - 2)
    t0, t1 = ts[idx], ts[idx + 1]
    w = ((tg - t0) / (t1 - t0))[:, None]
    return values[idx] * (1.0 - w) + values[idx + 1] * w


# ----------------------------------------------------------------------------- API
def synchronise(states: JointStream, efforts: JointStream, joints: Sequence[str], *,
                options: SyncOptions | None = None, position_field: str = "position",
                velocity_field: str = "velocity", effort_field: str = "effort",
                meta: Mapping | None = None, grid_origin_ns: int | None = None) -> SyncResult:
    """Join a joint-state stream (positions, optional velocities) and an effort stream
    (efforts or currents, in `effort_field`) onto a uniform grid.

    Returns the segments (each a `Recording` whose ``effort`` holds the effort
    stream's values, columns in `joints` order) and a `SyncReport`. Raises
    `SignalError` naming the joint and topic when a joint is missing, and when no
    segment survives. `grid_origin_ns`, when given, replaces the pass origin (the grid
    is phase-locked to it and times count from it): the chunked reader
    (`data.stream_sync`) synchronises every chunk on the grid of the whole recording."""
    opt = options or SyncOptions()
    joints = tuple(joints)
    if not joints:
        raise SignalError("no joints to synchronise")
    if len(set(joints)) != len(joints):
        raise SignalError(f"a joint is listed twice: {joints}")
    rs = StreamReport(states.topic, "states", messages=len(states))
    re_ = StreamReport(efforts.topic, "efforts", messages=len(efforts))
    notes: list[str] = []

    # Messages about none of our joints come from other publishers on the topic
    # (a gripper's joint_state_publisher next to the arm's broadcaster): ignore them.
    for role, r in (("states", rs), ("efforts", re_)):
        s = states if role == "states" else efforts
        if len(s) == 0:
            raise SignalError(f"topic {s.topic!r} has no messages")
        mine = s.mentions(joints)
        r.foreign = int((~mine).sum())
        if r.foreign == len(s):
            raise SignalError(f"joint {joints[0]!r} is missing from topic {s.topic!r}: none of its "
                              f"{len(s)} messages lists any of {', '.join(joints)}; the topic has joints: "
                              f"{', '.join(sorted(s.joint_set()))}")
        if r.foreign:
            s = s.select(mine)
            if role == "states":
                states = s
            else:
                efforts = s

    # Publishers that leave header.stamp unset: fall back on the receive times if known.
    for role in ("states", "efforts"):
        s = states if role == "states" else efforts
        if len(s) >= 2 and (s.stamps == s.stamps[0]).all():
            if s.received is None:
                raise SignalError(f"topic {s.topic!r}: all {len(s)} header stamps are equal "
                                  f"({s.stamps[0]} ns): the publisher does not fill header.stamp, and no "
                                  "receive times are known")
            notes.append(f"topic {s.topic!r} leaves header.stamp unset (all {s.stamps[0]} ns); "
                         "using the receive times, which carry the transport's latency jitter")
            s = JointStream(s.topic, s.received, s.names, s.fields, s.received)
            if role == "states":
                states = s
            else:
                efforts = s

    # Rates and limits from the raw stamps (robust to a few faults).
    per = {}
    for s, r in ((states, rs), (efforts, re_)):
        if len(s) < 2:
            raise SignalError(f"topic {s.topic!r} has {len(s)} message(s); at least 2 are needed")
        p = _median_period_ns(s.stamps)
        if not math.isfinite(p):
            raise SignalError(f"topic {s.topic!r}: all {len(s)} stamps are equal ({s.stamps[0]} ns)")
        per[r.role] = p
        r.rate_hz = NS_PER_S / p
    slow_ns = max(per.values())
    fast_role = "efforts" if per["efforts"] <= per["states"] else "states"
    max_gap = opt.max_gap_s if opt.max_gap_s is not None else default_max_gap_s(slow_ns / NS_PER_S)
    if opt.rate_hz is not None:
        rate = float(opt.rate_hz)
    else:
        rate = NS_PER_S / per[fast_role]
    h = 1.0 / rate
    if max_gap < 1.5 * slow_ns / NS_PER_S:
        notes.append(f"max_gap_s {max_gap:g} s is below 1.5 periods of the slower stream; most of it "
                     "will be treated as gaps")
    # A message delivered late steps back a little and is re-sorted; a restart steps back far.
    jump_ns = (opt.jump_back_s if opt.jump_back_s is not None else max(max_gap, 0.5)) * NS_PER_S

    opt_fields = (velocity_field,) if opt.use_velocity else ()
    sp, s_opt = _prepare(states, "states", joints, (position_field,), opt_fields, jump_ns, rs, notes)
    ep, _ = _prepare(efforts, "efforts", joints, (effort_field,), (), jump_ns, re_, notes)
    if len(sp) != len(ep):
        raise SignalError(f"topic {states.topic!r} jumps back in time {len(sp) - 1} time(s) but topic "
                          f"{efforts.topic!r} {len(ep) - 1} time(s); the passes cannot be paired")
    has_qd = velocity_field in s_opt
    report = SyncReport(rate, max_gap, {"states": rs, "efforts": re_}, time_jumps=len(sp) - 1, notes=notes)
    segments: list[Recording] = []

    for k, (ps, pe) in enumerate(zip(sp, ep)):
        ref = pe if fast_role == "efforts" else ps
        if ref.t_ns.size == 0 or ps.t_ns.size == 0 or pe.t_ns.size == 0:
            continue
        origin = int(ref.t_ns[0]) if grid_origin_ns is None else int(grid_origin_ns)
        ts = (ps.t_ns - origin) / NS_PER_S
        te = (pe.t_ns - origin) / NS_PER_S
        runs_s, gaps_s, iso_s = _runs(ts, max_gap)
        runs_e, gaps_e, iso_e = _runs(te, max_gap)
        rs.isolated += iso_s
        re_.isolated += iso_e
        report.gaps += [Gap(states.topic, k, a, b) for a, b in gaps_s]
        report.gaps += [Gap(efforts.topic, k, a, b) for a, b in gaps_e]
        common = _intersect([(ts[a], ts[b]) for a, b in runs_s], [(te[a], te[b]) for a, b in runs_e])
        used_s = np.zeros(ts.size, dtype=bool)
        used_e = np.zeros(te.size, dtype=bool)
        for a, b in common:
            k0 = math.ceil(a / h - 1e-6)
            k1 = math.floor(b / h + 1e-6)
            n_grid = k1 - k0 + 1
            if n_grid < max(opt.min_samples, 1) or (n_grid - 1) * h < opt.min_segment_s:
                report.short_segments += 1
                report.short_segment_samples += max(n_grid, 0)
                continue
            tg = np.arange(k0, k1 + 1) * h
            tg = np.clip(tg, a, b)     # guard round-off at the ends
            q = _interp(ts, ps.values[position_field], tg)
            qd = _interp(ts, ps.values[velocity_field], tg) if has_qd else None
            eff = _interp(te, pe.values[effort_field], tg)
            used_s |= (ts >= tg[0] - h) & (ts <= tg[-1] + h)
            used_e |= (te >= tg[0] - h) & (te <= tg[-1] + h)
            m = dict(meta or {})
            m.update({"stamp_origin_ns": origin, "pass": k, "rate_hz": rate,
                      "states_topic": states.topic, "efforts_topic": efforts.topic,
                      "effort_field": effort_field})
            segments.append(Recording(tg, joints, q, eff, qd=qd, meta=m))
        rs.unused += max(0, int((~used_s).sum()) - iso_s)
        re_.unused += max(0, int((~used_e).sum()) - iso_e)
    report.segments = len(segments)
    report.samples = int(sum(r.n_samples for r in segments))
    if not segments:
        raise SignalError(f"topics {states.topic!r} and {efforts.topic!r} have no common stretch of "
                          f"data without gaps:\n{report.summary()}")
    return SyncResult(segments, report)
