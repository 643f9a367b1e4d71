"""Synchronisation of a joint-state stream and an effort stream, one test per fault."""
import numpy as np
import pytest

from robot_ident.errors import SignalError
from robot_ident.data.sync import JointStream, SyncOptions, synchronise

JOINTS = ("a", "b", "c")
W = np.array([2.0, 3.0, 5.0])          # rad/s
PHI = np.array([0.1, 0.7, 1.3])
T0_NS = 1_700_000_000 * 10**9          # an absolute epoch, as in real bags


def q_true(t):
    return np.sin(np.outer(t, W) + PHI)


def qd_true(t):
    return W * np.cos(np.outer(t, W) + PHI)


def e_true(t):
    return 10.0 * np.cos(np.outer(t, 0.5 * W) - PHI) + np.arange(3)


def make_states(duration=2.0, rate=500.0, phase_s=0.0003, order=("c", "a", "b")):
    t = np.arange(0.0, duration, 1.0 / rate) + phase_s
    idx = [JOINTS.index(j) for j in order]
    stamps = T0_NS + np.round(t * 1e9).astype(np.int64)
    return t, JointStream.from_arrays("/joint_states", stamps, order,
                                      position=q_true(t)[:, idx], velocity=qd_true(t)[:, idx])


def make_efforts(duration=2.0, rate=1000.0, phase_s=0.0, per_message_order=True):
    t = np.arange(0.0, duration, 1.0 / rate) + phase_s
    stamps = T0_NS + np.round(t * 1e9).astype(np.int64)
    e = e_true(t)
    if not per_message_order:
        return t, JointStream.from_arrays("/dynamic_joint_states", stamps, JOINTS, current=e)
    # every other message lists the joints in another order (by name, not position)
    names, values = [], []
    for k in range(t.size):
        order = ("b", "c", "a") if k % 2 else JOINTS
        names.append(order)
        values.append(e[k, [JOINTS.index(j) for j in order]])
    return t, JointStream("/dynamic_joint_states", stamps, names, {"current": values})


def sync(states, efforts, **opts):
    return synchronise(states, efforts, JOINTS, effort_field="current", options=SyncOptions(**opts))


def _check_against_truth(rec, origin_s):
    t_abs = rec.t + origin_s
    assert np.allclose(rec.q, q_true(t_abs), atol=5e-5)
    if rec.qd is not None:
        assert np.allclose(rec.qd, qd_true(t_abs), atol=5e-4)
    assert np.allclose(rec.effort, e_true(t_abs), atol=1e-3)


def _origin_s(rec):
    return (rec.meta["stamp_origin_ns"] - T0_NS) * 1e-9


def test_clean_streams_at_different_rates_and_phases():
    _, st = make_states()
    te, ef = make_efforts(phase_s=0.0001)
    res = sync(st, ef)
    assert len(res.segments) == 1
    rec = res.segments[0]
    assert rec.joint_names == JOINTS
    assert res.report.rate_hz == pytest.approx(1000.0)
    # the grid is phase-locked to the faster (effort) stream: its samples are grid points
    assert rec.meta["stamp_origin_ns"] == T0_NS + 100_000
    assert np.allclose(np.diff(rec.t), 1e-3)
    _check_against_truth(rec, _origin_s(rec))
    # efforts sit on grid points: exactly the samples that were sent, no interpolation
    k0 = int(np.searchsorted(te, rec.t[0] + _origin_s(rec) - 1e-9))
    assert np.allclose(rec.effort, e_true(te[k0:k0 + rec.n_samples]), atol=1e-9)
    r = res.report
    assert (r.gaps, r.time_jumps, r.short_segments) == ([], 0, 0)
    for s in r.streams.values():
        assert (s.duplicates, s.out_of_order, s.nan_samples) == (0, 0, 0)
    # the common span: states start 0.3 ms and end 1.7 ms later than the efforts
    assert rec.t[0] + _origin_s(rec) == pytest.approx(0.0011, abs=1e-9)
    assert rec.t[-1] + _origin_s(rec) == pytest.approx(1.9981, abs=1e-9)


def test_given_grid_rate():
    _, st = make_states()
    _, ef = make_efforts()
    res = sync(st, ef, rate_hz=250.0)
    rec = res.segments[0]
    assert np.allclose(np.diff(rec.t), 4e-3)
    _check_against_truth(rec, _origin_s(rec))


def test_nan_samples_are_dropped_and_counted_per_joint():
    _, st = make_states()
    te, ef = make_efforts()
    bad = [100, 400, 401, 1500]
    for k in bad:
        v = ef.fields["current"][k].copy()
        v[list(ef.names[k]).index("b")] = np.nan
        ef.fields["current"][k] = v
    res = sync(st, ef)
    r = res.report.streams["efforts"]
    assert r.nan_samples == 4
    assert r.nan_by_joint == {"b": 4}
    assert len(res.segments) == 1      # a missing millisecond is not a gap
    _check_against_truth(res.segments[0], _origin_s(res.segments[0]))


def test_velocity_published_as_nan_means_no_velocity():
    # joint_state_broadcaster publishes NaN for an interface the joint does not have
    t, st = make_states()
    st.fields["velocity"][:, 1] = np.nan
    _, ef = make_efforts()
    res = sync(st, ef)
    rec = res.segments[0]
    assert rec.qd is None
    assert res.report.streams["states"].absent_fields == {"velocity": ["a"]}
    assert any("velocity" in n and "'/joint_states'" in n for n in res.report.notes)
    assert res.report.streams["states"].nan_samples == 0
    _check_against_truth(rec, _origin_s(rec))


def test_empty_velocity_arrays_mean_no_velocity():
    t, st = make_states()
    per_msg = JointStream("/joint_states", st.stamps, [st.names] * len(st),
                          {"position": list(st.fields["position"]), "velocity": [np.array([])] * len(st)})
    _, ef = make_efforts()
    res = sync(per_msg, ef)
    assert res.segments[0].qd is None
    _check_against_truth(res.segments[0], _origin_s(res.segments[0]))


def test_duplicated_stamps_keep_the_first_and_are_counted():
    _, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    clean = sync(st, ef).segments[0]
    dup = [5, 50, 500, 900]
    idx = np.sort(np.concatenate([np.arange(len(st)), dup]))
    st2 = JointStream.from_arrays(st.topic, st.stamps[idx], st.names,
                                  position=st.fields["position"][idx] + (np.diff(idx, prepend=-1) == 0)[:, None],
                                  velocity=st.fields["velocity"][idx])
    res = sync(st2, ef)
    assert res.report.streams["states"].duplicates == 4
    assert res.report.streams["states"].out_of_order == 0
    rec = res.segments[0]
    # the repeated samples were altered by +1 rad: keeping the first arrival leaves the result unchanged
    assert np.array_equal(rec.q, clean.q)
    assert np.array_equal(rec.effort, clean.effort)


def test_out_of_order_stamps_are_sorted_and_counted():
    _, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    clean = sync(st, ef).segments[0]
    idx = np.arange(len(ef))
    swaps = [10, 200, 201 + 50, 1200, 1990]
    for k in swaps:
        idx[k], idx[k + 1] = idx[k + 1], idx[k]
    ef2 = JointStream.from_arrays(ef.topic, ef.stamps[idx], ef.names, current=ef.fields["current"][idx])
    res = sync(st, ef2)
    assert res.report.streams["efforts"].out_of_order == len(swaps)
    assert res.report.streams["efforts"].duplicates == 0
    assert len(res.segments) == 1
    assert np.array_equal(res.segments[0].effort, clean.effort)


def test_gap_splits_into_segments_without_interpolating_across():
    t, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    hole = (t > 0.8) & (t < 0.9)       # 100 ms of joint states lost
    keep = ~hole
    st2 = JointStream.from_arrays(st.topic, st.stamps[keep], st.names,
                                  position=st.fields["position"][keep], velocity=st.fields["velocity"][keep])
    res = sync(st2, ef)
    assert len(res.segments) == 2
    (gap,) = res.report.gaps
    assert gap.topic == "/joint_states"
    t_before, t_after = t[keep][t[keep] <= 0.8][-1], t[keep][t[keep] >= 0.9][0]
    assert gap.start_s == pytest.approx(t_before, abs=1e-9)
    assert gap.end_s == pytest.approx(t_after, abs=1e-9)
    first, second = res.segments
    assert first.t[-1] <= gap.start_s + 1e-12 and second.t[0] >= gap.end_s - 1e-12
    for rec in res.segments:
        _check_against_truth(rec, _origin_s(rec))
    assert res.report.samples == first.n_samples + second.n_samples


def test_short_piece_between_gaps_is_dropped_and_counted():
    t, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    # leaves the samples at 0.6003 and 0.6023 s alone between two gaps
    keep = ~(((t > 0.5) & (t < 0.6)) | ((t > 0.604) & (t < 0.7)))
    st2 = JointStream.from_arrays(st.topic, st.stamps[keep], st.names,
                                  position=st.fields["position"][keep], velocity=st.fields["velocity"][keep])
    res = sync(st2, ef, min_segment_s=0.05)
    assert len(res.segments) == 2
    assert res.report.short_segments == 1
    assert res.report.short_segment_samples == 2      # grid points 0.601 and 0.602 s
    assert len(res.report.gaps) == 2


def test_backward_time_jump_gives_one_segment_per_pass():
    # a bag played twice in a loop: the stamps start over
    t, st = make_states(duration=1.0)
    te, ef = make_efforts(duration=1.0, per_message_order=False)
    st2 = JointStream.from_arrays(st.topic, np.concatenate([st.stamps, st.stamps]), st.names,
                                  position=np.vstack([st.fields["position"]] * 2),
                                  velocity=np.vstack([st.fields["velocity"]] * 2))
    ef2 = JointStream.from_arrays(ef.topic, np.concatenate([ef.stamps, ef.stamps]), ef.names,
                                  current=np.vstack([ef.fields["current"]] * 2))
    res = sync(st2, ef2)
    assert res.report.time_jumps == 1
    assert [r.meta["pass"] for r in res.segments] == [0, 1]
    # no duplicates or re-sorting were reported: the second pass is new data, not a repeat
    assert res.report.streams["states"].duplicates == 0
    assert res.report.streams["states"].out_of_order == 0
    for rec in res.segments:
        assert rec.duration == pytest.approx(te[-1] - t[0] - 0.0, abs=2e-3)
        _check_against_truth(rec, _origin_s(rec))
    assert np.array_equal(res.segments[0].q, res.segments[1].q)


def test_unpaired_time_jumps_are_an_error():
    _, st = make_states(duration=1.0)
    _, ef = make_efforts(duration=1.0, per_message_order=False)
    ef2 = JointStream.from_arrays(ef.topic, np.concatenate([ef.stamps, ef.stamps]), ef.names,
                                  current=np.vstack([ef.fields["current"]] * 2))
    with pytest.raises(SignalError, match="'/joint_states' jumps back in time 0 time.*'/dynamic_joint_states' 1"):
        sync(st, ef2)


def test_missing_joint_names_joint_and_topic():
    _, st = make_states(order=("a", "b"))
    _, ef = make_efforts()
    with pytest.raises(SignalError, match="joint 'c' is missing from topic '/joint_states'.*has joints: a, b"):
        sync(st, ef)
    _, st = make_states()
    ef2 = JointStream.from_arrays("/dynamic_joint_states", ef.stamps, ("a", "c"),
                                  current=np.zeros((len(ef), 2)))
    with pytest.raises(SignalError, match="joint 'b' is missing from topic '/dynamic_joint_states'"):
        sync(st, ef2)


def test_effort_field_without_any_value_is_an_error():
    _, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    ef.fields["current"][:, 2] = np.nan
    with pytest.raises(SignalError, match="joint 'c' has no finite 'current' value.*'/dynamic_joint_states'"):
        sync(st, ef)


def test_no_overlap_is_an_error_with_the_report():
    _, st = make_states(duration=1.0)
    te, ef = make_efforts(duration=1.0, per_message_order=False)
    ef2 = JointStream.from_arrays(ef.topic, ef.stamps + 5 * 10**9, ef.names, current=ef.fields["current"])
    with pytest.raises(SignalError, match="no common stretch"):
        sync(st, ef2)


def test_float_second_stamps_are_accepted():
    t = np.arange(0, 1, 0.002)
    st = JointStream.from_arrays("/js", t, JOINTS, position=q_true(t))
    te = np.arange(0, 1, 0.001)
    ef = JointStream.from_arrays("/cur", te, JOINTS, effort=e_true(te))
    res = synchronise(st, ef, JOINTS)
    assert res.segments[0].qd is None      # no velocity field at all
    _check_against_truth(res.segments[0], res.segments[0].meta["stamp_origin_ns"] * 1e-9)


def test_other_publishers_on_the_topic_are_ignored_and_counted():
    # a gripper's joint_state_publisher shares /joint_states with the arm's broadcaster at 50 Hz
    t, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    clean = sync(st, ef).segments[0]
    tg = np.arange(0.0, 2.0, 0.02) + 0.0071
    names = [tuple(st.names)] * len(st) + [("finger",)] * tg.size
    stamps = np.concatenate([st.stamps, T0_NS + np.round(tg * 1e9).astype(np.int64)])
    pos = list(st.fields["position"]) + [np.array([0.01])] * tg.size
    vel = list(st.fields["velocity"]) + [np.array([0.0])] * tg.size
    arrival = np.argsort(stamps, kind="stable")           # interleaved as they would arrive
    mixed = JointStream("/joint_states", stamps[arrival], [names[i] for i in arrival],
                        {"position": [pos[i] for i in arrival], "velocity": [vel[i] for i in arrival]})
    res = sync(mixed, ef)
    r = res.report.streams["states"]
    assert r.foreign == tg.size
    assert r.nan_samples == 0 and r.out_of_order == 0
    assert r.rate_hz == pytest.approx(500.0)
    assert len(res.segments) == 1
    assert np.allclose(res.segments[0].q, clean.q, rtol=0, atol=1e-12)


def test_joints_split_across_publishers_is_an_error():
    t, st = make_states()
    _, ef = make_efforts()
    names, pos = [], []
    for k in range(len(st)):
        names += [("c", "a"), ("b",)]
        pos += [st.fields["position"][k, :2], st.fields["position"][k, 2:]]
    split = JointStream("/joint_states", np.repeat(st.stamps, 2), names, {"position": pos})
    with pytest.raises(SignalError, match="no message on topic '/joint_states' carries finite position values "
                                          "for all of a, b, c at once"):
        sync(split, ef)


def test_message_delivered_late_is_resorted_not_a_time_jump():
    _, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    clean = sync(st, ef).segments[0]
    idx = list(range(len(st)))
    late = idx.pop(300)
    idx.insert(325, late)            # arrives 25 messages (50 ms) late
    idx = np.array(idx)
    st2 = JointStream.from_arrays(st.topic, st.stamps[idx], st.names,
                                  position=st.fields["position"][idx], velocity=st.fields["velocity"][idx])
    res = sync(st2, ef)
    assert res.report.time_jumps == 0
    assert res.report.streams["states"].out_of_order == 1
    assert len(res.segments) == 1
    assert np.allclose(res.segments[0].q, clean.q, rtol=0, atol=1e-12)


def test_unset_header_stamps_fall_back_on_receive_times():
    _, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    clean = sync(st, ef).segments[0]
    zero = JointStream.from_arrays(st.topic, np.zeros(len(st), dtype=np.int64), st.names,
                                   position=st.fields["position"], velocity=st.fields["velocity"])
    with pytest.raises(SignalError, match="'/joint_states': all 1000 header stamps are equal .*does not fill"):
        sync(zero, ef)
    zero.received = st.stamps.copy()
    res = sync(zero, ef)
    assert any("header.stamp unset" in n for n in res.report.notes)
    assert np.allclose(res.segments[0].q, clean.q, rtol=0, atol=1e-12)


def _with_receive(stream, latency_ns=200_000, step_at=None, step_ns=0):
    """The stream with receive times (stamps + latency) and, from message `step_at` on,
    header stamps moved back by `step_ns` (a clock step on this topic only)."""
    stamps = stream.stamps.copy()
    rx = stamps + latency_ns
    if step_at is not None:
        stamps[step_at:] -= step_ns
    return JointStream(stream.topic, stamps, stream.names, stream.fields, rx)


@pytest.mark.parametrize("step_ms", [3.0, 30.0, 300.0])
def test_clock_step_on_one_topic_cuts_and_drops_the_misaligned_part(step_ms):
    # an NTP step of 3-300 ms on /joint_states only: the stamps after it no longer line up
    # with the current topic's; that part is dropped, never interleaved or re-sorted
    t, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    k = int(np.searchsorted(t, 1.2))
    res = sync(_with_receive(st, step_at=k, step_ns=int(step_ms * 1e6)), _with_receive(ef))
    assert res.report.time_jumps == 1 and res.report.streams["states"].out_of_order == 0
    assert res.report.dropped_pairs == 1
    assert any("clocks of topics" in n for n in res.report.notes)
    for rec in res.segments:
        _check_against_truth(rec, _origin_s(rec))
    assert max(rec.t[-1] + _origin_s(rec) for rec in res.segments) < 1.2 + 1e-9


def test_clock_step_on_both_topics_keeps_both_sides():
    t, st = make_states()
    te, ef = make_efforts(per_message_order=False)
    step = int(0.3e9)
    res = sync(_with_receive(st, step_at=int(np.searchsorted(t, 1.0)), step_ns=step),
               _with_receive(ef, step_at=int(np.searchsorted(te, 1.0)), step_ns=step))
    assert res.report.time_jumps == 1 and res.report.dropped_pairs == 0
    assert len(res.segments) == 2
    first, second = res.segments
    _check_against_truth(first, _origin_s(first))
    # the second pass is stamped 0.3 s early: its signals are those of t + 0.3 s
    _check_against_truth(second, _origin_s(second) + 0.3)
    assert first.duration + second.duration == pytest.approx(2.0, abs=0.01)


def test_small_clock_step_without_receive_times_is_cut_not_resorted():
    t, st = make_states()
    te, ef = make_efforts(per_message_order=False)
    step = int(0.1e9)
    st2 = JointStream(st.topic, np.where(t >= 1.0, st.stamps - step, st.stamps), st.names, st.fields)
    ef2 = JointStream(ef.topic, np.where(te >= 1.0, ef.stamps - step, ef.stamps), ef.names, ef.fields)
    res = sync(st2, ef2)
    assert res.report.time_jumps == 1 and res.report.streams["states"].out_of_order == 0
    assert len(res.segments) == 2
    with pytest.raises(SignalError, match="jumps back in time 1 time.*cannot be paired"):
        sync(st2, ef)


def test_absurd_grid_rate_is_an_error_not_a_memory_error():
    _, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    with pytest.raises(SignalError, match="rate_hz 1e\\+09 Hz is more than 20 times"):
        sync(st, ef, rate_hz=1e9)


def test_joint_missing_from_some_messages_is_counted_as_missing_not_non_finite():
    t, st = make_states()
    _, ef = make_efforts(per_message_order=False)
    names, pos = [], []
    for k in range(len(st)):
        if k % 2:
            names.append(("a", "b"))
            pos.append(q_true(t[k:k + 1])[0, :2])
        else:
            names.append(JOINTS)
            pos.append(q_true(t[k:k + 1])[0])
    half = JointStream("/joint_states", st.stamps, names, {"position": pos})
    res = sync(half, ef)
    r = res.report.streams["states"]
    assert r.missing_by_joint == {"c": len(st) // 2} and r.nan_by_joint == {}
    assert f"{len(st) // 2} joint values missing, 0 non-finite" in res.report.summary()


def test_current_topic_positions_with_nans_never_drop_effort_samples():
    _, st = make_states()
    te, ef = make_efforts(per_message_order=False)
    pos = q_true(te)
    pos[::3, 1] = np.nan                      # a joint without a position interface now and then
    ef2 = JointStream.from_arrays(ef.topic, ef.stamps, ef.names, current=ef.fields["current"], position=pos)
    res = sync(st, ef2)
    assert res.report.streams["efforts"].nan_samples == 0
    assert res.report.lag is not None and abs(res.report.lag.lag_s) < 1e-4 and not res.report.lag_corrected


def test_lag_of_the_current_topic_is_measured_on_positions_and_corrected():
    _, st = make_states()
    te, ef = make_efforts(per_message_order=False)
    late = JointStream.from_arrays(ef.topic, ef.stamps + int(0.02e9), ef.names, current=ef.fields["current"],
                                   position=q_true(te))
    res = sync(st, late)
    assert res.report.lag_corrected and abs(res.report.lag.lag_s - 0.02) < 2e-4
    for rec in res.segments:
        _check_against_truth(rec, _origin_s(rec))
    with pytest.raises(SignalError, match="offset from '/joint_states' by .* sync.max_lag_s = 0.01"):
        sync(st, late, max_lag_s=0.01)


def _full_grid_lag(ts, qs, te, qe, max_lag):
    """The lag search as it was: every 0.5 ms shift, sorted trimmed mean, parabola."""
    from robot_ident.data.lag import STEP_S
    n_steps = int(round(max_lag / STEP_S))
    lags = np.linspace(-n_steps * STEP_S, n_steps * STEP_S, 2 * n_steps + 1)
    inner = (te - lags[-1] >= ts[0]) & (te + lags[-1] <= ts[-1])
    te, qe = te[inner], qe[inner]
    cost = []
    for L in lags:
        pred = np.stack([np.interp(te - L, ts, qs[:, k]) for k in range(qs.shape[1])], axis=1)
        err = np.sort(((pred - qe) ** 2).mean(axis=1))
        cost.append(err[:int(0.98 * err.size)].mean())
    cost = np.array(cost)
    i = int(np.argmin(cost))
    lag = lags[i]
    if 0 < i < lags.size - 1:
        y0, y1, y2 = cost[i - 1:i + 2]
        lag += 0.5 * STEP_S * (y0 - y2) / (y0 - 2 * y1 + y2)
    return lag, i in (0, lags.size - 1)


@pytest.mark.parametrize("true_lag", [0.0, 0.0123, -0.0071, 0.0249, 0.0376, -0.05, 0.06])
def test_coarse_to_fine_lag_search_finds_the_full_grids_minimum(true_lag):
    """The search evaluates every 5th shift, then the neighbourhood of the best: same
    estimate as the whole 0.5 ms grid (lags between grid points, near coarse points, at
    and beyond the bound), with glitches in the positions."""
    from robot_ident.data.lag import estimate_lag_from_positions
    rng = np.random.default_rng(3)
    ts = np.arange(0.0, 20.0, 0.002)
    te = np.arange(0.0, 20.0, 0.001)
    w = np.array([0.7, 1.3, 2.1])

    def q(t):
        return np.sin(np.outer(t, w)) + 0.3 * np.cos(np.outer(t, 2.7 * w))
    qs = q(ts) + 1e-5 * rng.normal(size=(ts.size, 3))
    qe = q(te - true_lag) + 1e-5 * rng.normal(size=(te.size, 3))
    qe[rng.choice(te.size, 50, replace=False)] += 0.5            # glitches
    est = estimate_lag_from_positions(ts, qs, te, qe, 0.05)
    ref, at_bound = _full_grid_lag(ts, qs, te, qe, 0.05)
    assert est.at_bound == at_bound
    assert est.lag_s == pytest.approx(ref, abs=1e-9)
    if abs(true_lag) < 0.05:
        assert est.lag_s == pytest.approx(true_lag, abs=2e-4) and est.determined
