"""Join separately time-stamped joint streams onto one uniform time grid.

On a robot, positions (and maybe velocities) arrive on one topic and motor currents
or efforts on another, at different rates and phases. `synchronise` turns the two
streams -- plain arrays, see `JointStream` -- into `signals.Recording` segments on a
common uniform grid, and a `SyncReport` that says what was dropped and why.

Rules, in the order they are applied to each stream:

1. Columns are matched by joint name, never by position in the message. A joint
   that appears in no message of a stream is an error naming the joint and topic.
2. Time steps back: wherever the header stamps step *back* in arrival order and the
   stream stays below its previous latest stamp for more than ``LATE_MAX``
   messages, the clock stepped (an NTP correction, a restart, a bag played in a
   loop) -- whatever the size of the step. The stream is cut into *passes* there,
   never re-sorted across the step. Passes are paired by receive time when both
   streams have receive times (the bag's log times): each pair covers the time both
   passes were being received, and a pair whose clock offset between the two topics
   (median stamp minus receive time) differs from that of the reference pair (among
   the pairs at least half as long as the longest, the one whose clocks agree best) by more
   than ``max(1 ms, 10 x the latency spread)`` is dropped and reported (the clock of
   only one topic stepped: its stamps no longer line up with the other's). Without
   receive times pass k of one stream is joined with pass k of the other.
3. Non-finite values (joint_state_broadcaster publishes NaN for interfaces a joint
   lacks; an empty array means the field is not published): a sample with a NaN in
   a field that is used is dropped and counted per joint (a message that does not list
   the joint at all is counted as *missing*, not non-finite). A field that has no
   finite value at all for some joint is *absent*: positions or efforts absent is
   an error; velocities absent means the recording carries no velocities (they will
   be differentiated from positions), noted in the report.
4. A few messages (at most ``LATE_MAX`` in a row) stamped before their predecessor, each
   filling a hole in the stamps before it, are messages delivered late: they are sorted
   into place and counted; repeated stamps
   keep the first sample that arrived and count the rest.
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

The grid rate may be at most ``MAX_RATE_FACTOR`` times the faster stream's rate (a
typo of rate_hz would otherwise ask for more memory than the machine has).

Times in the output recordings are seconds from the pass's origin stamp (the first
sample of the faster stream in that pass); ``meta['stamp_origin_ns']`` holds it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..errors import SignalError
from .clock import (
    LATE_MAX,  # noqa: F401  (re-exported: the rules above refer to it)
    Pass,
    align_topics,
    interp,
    intersect,
    median_period_ns,
    pair_passes,
    runs,
    step_boundaries,
)
from .joint_stream import NS_PER_S, JointStream
from .signals import Recording

MAX_RATE_FACTOR = 20.0   # rate_hz at most this times the faster stream's rate


@dataclass(frozen=True)
class SyncOptions:
    rate_hz: float | None = None        # None: the faster stream's median rate
    max_gap_s: float | None = None      # None: max(5 T, min(20 T, 10 ms)), T the slower stream's median period
    jump_back_s: float | None = None    # steps back larger than this are reported as restarts, smaller ones
                                        # as clock steps; every step back cuts the stream (rule 2)
    min_segment_s: float = 0.0
    min_samples: int = 3
    use_velocity: bool = True
    max_lag_s: float | None = None      # lag search bound between the topics; None: lag.MAX_LAG_S (0.05 s)
    lag_threshold_s: float | None = None  # lags above this are corrected; None: lag.CORRECT_ABOVE_S (0.5 ms)

    def __post_init__(self):
        for name in ("rate_hz", "max_gap_s", "jump_back_s", "max_lag_s", "lag_threshold_s"):
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
    out_of_order: int = 0          # samples delivered late (<= LATE_MAX in a row), re-sorted
    duplicates: int = 0            # samples dropped because their stamp was seen already
    nan_samples: int = 0           # samples dropped for a non-finite value in a used field
    nan_by_joint: dict = field(default_factory=dict)
    missing_by_joint: dict = field(default_factory=dict)   # messages that do not list the joint
    absent_fields: dict = field(default_factory=dict)   # field -> joints with no finite value
    isolated: int = 0              # samples alone between two gaps (cannot be interpolated)
    unused: int = 0                # valid samples outside every kept segment
    passes: int = 1                # 1 + number of backward time steps
    steps_back: list = field(default_factory=list)   # (stamp before, size) of each step back, s


@dataclass(frozen=True)
class Gap:
    topic: str
    pass_index: int
    start_s: float                 # last sample before the gap (s from the pass origin)
    end_s: float                   # first sample after it


@dataclass
class SyncReport:
    rate_hz: float
    max_gap_s: float
    streams: dict                  # role -> StreamReport
    gaps: list = field(default_factory=list)
    time_jumps: int = 0            # backward time steps (the larger count of the two streams)
    dropped_pairs: int = 0         # pass pairs whose clock offset disagrees (see rule 2)
    lag: object = None             # data.lag.LagEstimate between the topics, if measurable
    lag_corrected: bool = False
    other_joints: dict = field(default_factory=dict)   # joint -> (min, max) position of the
                                                       # state topic's joints not synchronised
    segments: int = 0
    samples: int = 0               # grid samples in kept segments
    short_segments: int = 0        # segments dropped for being too short
    short_segment_samples: int = 0
    notes: list = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"synchronised at {self.rate_hz:.6g} Hz: {self.segments} segment(s), {self.samples} samples; "
                 f"{len(self.gaps)} gap(s) > {self.max_gap_s * 1e3:.3g} ms, {self.time_jumps} backward time "
                 f"step(s), {self.short_segments} short segment(s) dropped ({self.short_segment_samples} samples)"
                 + (f", {self.dropped_pairs} stretch(es) dropped for disagreeing clocks" if self.dropped_pairs
                    else "")]
        for r in self.streams.values():
            lines.append(f"  {r.role} {r.topic}: {r.messages} messages at {r.rate_hz:.6g} Hz; dropped "
                         f"{r.duplicates} duplicate, {r.nan_samples} incomplete ("
                         f"{sum(r.missing_by_joint.values())} joint values missing, "
                         f"{sum(r.nan_by_joint.values())} non-finite), {r.isolated} isolated; "
                         f"{r.foreign} other publishers' ignored; "
                         f"{r.out_of_order} re-sorted; {r.unused} unused")
        if self.lag is not None:
            lines.append("  " + self.lag.summary() + ("; corrected" if self.lag_corrected else "; not corrected"))
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
def default_max_gap_s(period_s: float) -> float:
    """The default gap limit for a stream whose median sample period is `period_s`."""
    return max(5.0 * period_s, min(20.0 * period_s, 0.010))


def _prepare(stream: JointStream, role: str, joints: Sequence[str], required: Sequence[str],
             optional: Sequence[str], report: StreamReport,
             notes: list, aux: Sequence[str] = ()) -> tuple[list[Pass], tuple[str, ...]]:
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

    # Samples without a value: a message that does not list a joint (counted as missing),
    # or a NaN in a used field (counted as non-finite). Auxiliary fields never drop a sample.
    listed = stream.lists(joints)
    missing = ~listed
    bad_rows = missing.any(axis=1)
    for k, j in enumerate(joints):
        c = int(missing[:, k].sum())
        if c:
            report.missing_by_joint[j] = c
    for f, m in mats.items():
        bad = ~np.isfinite(m) & listed
        bad_rows |= bad.any(axis=1)
        for k, j in enumerate(joints):
            c = int(bad[:, k].sum())
            if c:
                report.nan_by_joint[j] = report.nan_by_joint.get(j, 0) + c
    report.nan_samples = int(bad_rows.sum())
    if bad_rows.all():
        counts = [f"{j} missing from {report.missing_by_joint.get(j, 0)}, NaN in {report.nan_by_joint.get(j, 0)}"
                  for j in joints if report.missing_by_joint.get(j) or report.nan_by_joint.get(j)]
        raise SignalError(f"no message on topic {topic!r} carries finite {' and '.join(mats)} values for all of "
                          f"{', '.join(joints)} at once (are the joints split across several publishers, or "
                          f"is a value NaN in every message?); per joint: {'; '.join(counts)}")
    for f in aux:
        if f in stream.fields:
            mats[f] = stream.matrix(f, joints)

    # Passes: split where the clock steps back (rule 2); late messages are re-sorted (rule 4).
    stamps = stream.stamps
    rx = stream.received
    jumps = np.array(step_boundaries(stamps), dtype=int)
    report.passes = jumps.size + 1
    for b in jumps:
        before = int(np.max(stamps[:b]))
        report.steps_back.append(((before - int(stamps[0])) / NS_PER_S, (before - int(stamps[b])) / NS_PER_S))
    bounds = np.concatenate([[0], jumps, [M]]).astype(int)
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
        passes.append(Pass(ts, {f: m[order] for f, m in mats.items()}, rx[order] if rx is not None else None))
    return passes, tuple(used_optional)


# ----------------------------------------------------------------------------- API
def synchronise(states: JointStream, efforts: JointStream, joints: Sequence[str], *,
                options: SyncOptions | None = None, position_field: str = "position",
                velocity_field: str = "velocity", effort_field: str = "effort",
                meta: Mapping | None = None, grid_origin_ns: int | None = None, lag=None) -> SyncResult:
    """Join a joint-state stream (positions, optional velocities) and an effort stream
    (efforts or currents, in `effort_field`) onto a uniform grid.

    Returns the segments (each a `Recording` whose ``effort`` holds the effort
    stream's values, columns in `joints` order) and a `SyncReport`. Raises
    `SignalError` naming the joint and topic when a joint is missing, and when no
    segment survives. `grid_origin_ns`, when given, replaces the pass origin (the grid
    is phase-locked to it and times count from it): the chunked reader
    (`data.stream_sync`) synchronises every chunk on the grid of the whole recording;
    `lag` (a `data.lag.LagEstimate`), when given, is applied instead of measuring the lag
    between the topics (the chunked reader measures it once, on its first stretch)."""
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
        p = median_period_ns(s.stamps)
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
    if opt.rate_hz is not None and rate > MAX_RATE_FACTOR * NS_PER_S / min(per.values()):
        raise SignalError(f"sync rate_hz {rate:g} Hz is more than {MAX_RATE_FACTOR:g} times the faster "
                          f"stream's rate ({NS_PER_S / min(per.values()):.6g} Hz); interpolating that finely "
                          "adds no information")
    opt_fields = (velocity_field,) if opt.use_velocity else ()
    sp, s_opt = _prepare(states, "states", joints, (position_field,), opt_fields, rs, notes)
    e_pos = (position_field,) if position_field in efforts.fields and efforts is not states else ()
    ep, _ = _prepare(efforts, "efforts", joints, (effort_field,), (), re_, notes, aux=e_pos)
    restart_s = opt.jump_back_s if opt.jump_back_s is not None else max(max_gap, 0.5)
    for s_, r in ((states, rs), (efforts, re_)):
        for at, size in r.steps_back:
            kind = "restarts (a new run or a bag played in a loop)" if size > restart_s else "steps back (a clock step)"
            notes.append(f"topic {s_.topic!r}: time {kind} by {size:.4g} s at {at:.4g} s from its first stamp; "
                         "the data are cut there")
    pairs, dropped = pair_passes(sp, ep, states.topic, efforts.topic, notes)
    lag_applied = False
    if not (e_pos and pairs):
        lag = None
    else:
        pairs, lag, lag_applied = align_topics(pairs, position_field, opt, states.topic, efforts.topic, notes,
                                               given=lag)
    others = {}
    extra = sorted(states.joint_set() - set(joints))
    if extra and position_field in states.fields:
        m = states.matrix(position_field, extra)
        for k, j in enumerate(extra):
            col = m[:, k][np.isfinite(m[:, k])]
            if col.size:
                others[j] = (float(col.min()), float(col.max()))
    has_qd = velocity_field in s_opt
    report = SyncReport(rate, max_gap, {"states": rs, "efforts": re_}, time_jumps=max(len(sp), len(ep)) - 1,
                        notes=notes, dropped_pairs=dropped, other_joints=others, lag=lag,
                        lag_corrected=lag_applied)
    segments: list[Recording] = []

    for k, (ps, pe) in enumerate(pairs):
        ref = pe if fast_role == "efforts" else ps
        if ref.t_ns.size == 0 or ps.t_ns.size == 0 or pe.t_ns.size == 0:
            continue
        origin = int(ref.t_ns[0]) if grid_origin_ns is None else int(grid_origin_ns)
        ts = (ps.t_ns - origin) / NS_PER_S
        te = (pe.t_ns - origin) / NS_PER_S
        runs_s, gaps_s, iso_s = runs(ts, max_gap)
        runs_e, gaps_e, iso_e = runs(te, max_gap)
        rs.isolated += iso_s
        re_.isolated += iso_e
        report.gaps += [Gap(states.topic, k, a, b) for a, b in gaps_s]
        report.gaps += [Gap(efforts.topic, k, a, b) for a, b in gaps_e]
        common = intersect([(ts[a], ts[b]) for a, b in runs_s], [(te[a], te[b]) for a, b in runs_e])
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
            q = interp(ts, ps.values[position_field], tg)
            qd = interp(ts, ps.values[velocity_field], tg) if has_qd else None
            eff = interp(te, pe.values[effort_field], tg)
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
