"""Reading recordings through the one pipeline (data/processing.py, estimation/flow.py):
batch CDR decoding against rosbags' deserialiser; a bag read in chunks against the same
bag synchronised in one call (the fallback for a bag played in a loop) and against
`synchronise` + `process`; a segment that fails part-way; the compressed problem against
the full one; `identify` end to end -- a bag read in chunks, read whole and as a table of
the same data give the same parameters, hold-outs, the row-based methods' limit, the
input checks; `validate` against the RMS of the samples in memory; progress reporting."""
import io
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")

from robot_ident.data import stream_sync  # noqa: E402
from robot_ident.data.bag import make_typestore, read_recordings_from_config, write_bag_from_config  # noqa: E402
from robot_ident.data.cdr import DYNAMIC_JOINT_STATE, JOINT_STATE, decode  # noqa: E402
from robot_ident.data.holdout import Holdout  # noqa: E402
from robot_ident.data.msgs import JointStreamCollector, dynamic_joint_state_message, joint_state_message  # noqa: E402
from robot_ident.data.processing import process_input, segments_in_memory  # noqa: E402
from robot_ident.data.signals import FilterOptions, Recording, concatenate, process  # noqa: E402
from robot_ident.data.stream_filter import SegmentFilter  # noqa: E402
from robot_ident.data.stream_sync import NeedsWholeRecording  # noqa: E402
from robot_ident.errors import IdentificationError  # noqa: E402
from robot_ident.estimation import build_problem, ols, physically_consistent, wls  # noqa: E402
from robot_ident.estimation.compressed import CompressedAccumulator  # noqa: E402
from robot_ident.estimation.pipeline import base_parameters, identification_config  # noqa: E402
from robot_ident.estimation.robust import irls  # noqa: E402
from robot_ident.io.config import load_config  # noqa: E402
from robot_ident.model.robot import RobotModel  # noqa: E402
from robot_ident.offline.inputs import identify_inputs  # noqa: E402
from robot_ident.util.blas import single_threaded_blas  # noqa: E402
from robot_ident.util.progress import Progress, format_progress  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "demo_arm.yaml"


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


def read_whole(monkeypatch):
    """Make every bag take the whole-recording road (as a bag played in a loop does)."""
    def feed(self, states, efforts):
        raise NeedsWholeRecording("forced by the test")
    monkeypatch.setattr(stream_sync.ChunkedSync, "feed", feed)


# ------------------------------------------------------------------------ CDR
def test_batch_decoder_matches_rosbags_on_mixed_layouts():
    ts = make_typestore()
    T = ts.types
    JS, H, Tm = T[JOINT_STATE], T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
    DJS, IV = T[DYNAMIC_JOINT_STATE], T["control_msgs/msg/InterfaceValue"]
    rng = np.random.default_rng(1)
    js, djs = [], []
    for k in range(300):
        s = 1_700_000_000_000_000_000 + k * 2_000_000 - (5 if k == 7 else 0)
        if k % 50 == 3:    # another publisher: other joints, positions only, a longer frame id
            js.append(joint_state_message(JS, H, Tm, s, ["gripper"], position=[0.01 * k], frame_id="hand"))
        elif k % 70 == 5:  # arrays shorter than the name list
            js.append(joint_state_message(JS, H, Tm, s, ["a", "b", "c"], position=rng.normal(size=3),
                                          velocity=rng.normal(size=2)))
        else:
            js.append(joint_state_message(JS, H, Tm, s, ["a", "b", "c"], position=rng.normal(size=3),
                                          velocity=rng.normal(size=3), effort=[np.nan, 1.0, 2.0]))
        inter = {"position": rng.normal(size=3), "current": rng.normal(size=3)}
        if k % 40 == 9:    # one joint without the interface
            msg = dynamic_joint_state_message(DJS, IV, H, Tm, s, ["c", "b", "a"], {"position": rng.normal(size=3)})
        else:
            msg = dynamic_joint_state_message(DJS, IV, H, Tm, s, ["c", "b", "a"], inter)
        djs.append(msg)
    for msgs, mtype, interface in ((js, JOINT_STATE, None), (djs, DYNAMIC_JOINT_STATE, "current")):
        raws = [bytes(ts.serialize_cdr(m, mtype)) for m in msgs]
        got = decode(raws, mtype, "/t", interface, received=np.arange(len(raws)))
        col = JointStreamCollector("/t", "joint_state" if mtype == JOINT_STATE else "dynamic_joint_state",
                                   interface)
        for i, r in enumerate(raws):
            col.add(ts.deserialize_cdr(r, mtype), i)
        ref = col.stream()
        assert np.array_equal(got.stamps, ref.stamps) and np.array_equal(got.received, ref.received)
        assert got.joint_set() == ref.joint_set()
        names = sorted(ref.joint_set())
        # the decoder reads the fields identification uses (the message collector also keeps a
        # DynamicJointState's positions)
        assert set(got.fields) <= set(ref.fields) and "effort" in got.fields or "current" in got.fields
        for f in got.fields:
            assert np.array_equal(got.matrix(f, names), ref.matrix(f, names), equal_nan=True), f
    # one layout -> the matrix form, no per-message lists
    raws = [bytes(ts.serialize_cdr(m, JOINT_STATE)) for m in js[10:40]]
    one = decode(raws, JOINT_STATE, "/t")
    assert isinstance(one.names, tuple) and one.fields["position"].shape == (30, 3)


# --------------------------------------------------------------- sync + filter
def synthetic_recording(duration=24.0, gap_at=None, rate=1000.0, seed=0):
    """Smooth motion of the demo arm's joints with noisy efforts (no simulator: fast)."""
    joints = load_config(CONFIG).joints
    t = np.arange(0.0, duration, 1.0 / rate)
    if gap_at is not None:
        t = np.where(t < gap_at, t, t + 0.4)       # a 0.4 s hole in both topics
    n = len(joints)
    w = np.linspace(0.7, 1.9, n)
    q = 0.6 * np.sin(np.outer(t, w) + np.arange(n))
    qd = 0.6 * w * np.cos(np.outer(t, w) + np.arange(n))
    rng = np.random.default_rng(seed)
    eff = 5 * np.sin(np.outer(t, 1.3 * w)) + 0.05 * rng.normal(size=q.shape)
    return Recording(t, joints, q, eff, qd=qd)


def loop_bag(src: Path, dst: Path, passes: int = 2) -> Path:
    """`src` played `passes` times into a new bag: the header stamps start over, the bag's
    log times go on (what recording a looped ``ros2 bag play`` gives)."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer
    ts = make_typestore()
    with Reader(src) as r, Writer(dst, version=8, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {c.id: w.add_connection(c.topic, c.msgtype, typestore=ts) for c in r.connections}
        msgs = list(r.messages())
        span = msgs[-1][1] - msgs[0][1] + 1_000_000
        for k in range(passes):
            for c, log, raw in msgs:
                w.write(conns[c.id], log + k * span, raw)
    return dst


@pytest.fixture(scope="module")
def gap_bags(tmp_path_factory):
    """24 s of motion with a 0.4 s hole (two segments) in sqlite3 and mcap; the mcap one
    played twice in a loop."""
    d = tmp_path_factory.mktemp("stream")
    cfg = load_config(CONFIG)
    rec = synthetic_recording(gap_at=11.0)
    out = {}
    for storage in ("sqlite3", "mcap"):
        out[storage] = d / f"gap_{storage}"
        write_bag_from_config(out[storage], rec, cfg, storage=storage, current_noise_std=0.01)
    out["loop"] = loop_bag(out["mcap"], d / "gap_loop")
    return out


def filter_rule(cfg):
    f = identification_config(cfg.section("identification")).settings.filter
    return f, (lambda _rate: [f])


def assert_processed_as_synchronise_then_process(p, bag, cfg, f):
    """The stored segments of `p` (its last input) are `synchronise` + `process` of the bag."""
    ref = [process(s.reorder(cfg.joints), f) for s in read_recordings_from_config(bag, cfg).segments]
    got = segments_in_memory(p)[-len(ref):]
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.n_samples == r.n_samples
        assert np.array_equal(g.t, r.t) and np.array_equal(g.effort_raw, r.effort_raw)
        for a in ("q", "qd", "qdd", "effort"):
            assert rel(getattr(g, a), getattr(r, a)) < 1e-10, a


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_chunked_read_equals_the_whole_recording_read(gap_bags, storage, monkeypatch):
    """Small batches and stretches (many chunk boundaries, one near the gap) give the samples
    the whole-recording road gives, and those of `synchronise` + `process`."""
    cfg = load_config(CONFIG)
    f, rule = filter_rule(cfg)
    bag = gap_bags[storage]
    chunked = process_input(bag, cfg, rule, batch=3000, chunk_s=2.0)
    with monkeypatch.context() as m:
        read_whole(m)
        whole = process_input(bag, cfg, rule)
    try:
        a, b = chunked.inputs[0], whole.inputs[0]
        assert a.whole == "" and b.whole == "read at once: forced by the test"
        assert a.report.segments == b.report.segments == 2 and len(chunked.segments) == 2
        assert a.report.samples == b.report.samples and len(a.report.gaps) == len(b.report.gaps) == 2
        assert chunked.segment_rows() == whole.segment_rows()
        assert [s.offset_s for s in chunked.segments] == [s.offset_s for s in whole.segments]
        for p in (chunked, whole):
            assert_processed_as_synchronise_then_process(p, bag, cfg, f)
    finally:
        chunked.close()
        whole.close()


def test_a_bag_played_in_a_loop_is_read_whole(gap_bags):
    """The stamps start over part-way: the chunked synchroniser gives up
    (`NeedsWholeRecording`) after it has stored samples; what it stored is taken back and
    the bag is synchronised in one call -- after another input (its rows kept) and as the
    first input."""
    cfg = load_config(CONFIG)
    f, rule = filter_rule(cfg)
    p = process_input(gap_bags["mcap"], cfg, rule)
    try:
        first = segments_in_memory(p)
        p = process_input(gap_bags["loop"], cfg, rule, into=p, batch=3000, chunk_s=2.0)
        assert p.inputs[1].whole.startswith("read at once") and "jumps back in time" in p.inputs[1].whole
        assert len(p.segments) == 2 + 4 and [s.input for s in p.segments] == [0, 0, 1, 1, 1, 1]
        for a, b in zip(first, segments_in_memory(p)):
            assert np.array_equal(a.t, b.t) and np.array_equal(a.qdd, b.qdd)
        assert_processed_as_synchronise_then_process(p, gap_bags["loop"], cfg, f)
    finally:
        p.close()
    p = process_input(gap_bags["loop"], cfg, rule, batch=3000, chunk_s=2.0)
    try:
        assert p.inputs[0].whole.startswith("read at once") and len(p.segments) == 4
        assert_processed_as_synchronise_then_process(p, gap_bags["loop"], cfg, f)
    finally:
        p.close()


def test_a_segment_that_fails_part_way_is_taken_out_whole(gap_bags, monkeypatch):
    """A segment whose processing fails after some of its samples were stored is skipped
    whole (its samples taken back) and named in the summary; the other segment stays."""
    from robot_ident.errors import SignalError
    cfg = load_config(CONFIG)
    _, rule = filter_rule(cfg)
    p = process_input(gap_bags["mcap"], cfg, rule, batch=3000, chunk_s=2.0)
    try:
        whole, rows = p.store.read(0, p.n_samples), p.segment_rows()
    finally:
        p.close()
    assert len(rows) == 2
    real_add = SegmentFilter.add

    def add(self, piece):                 # the second segment fails after a few of its pieces
        if piece.t[0] > 11.0 and getattr(self, "_pieces", 0) >= 3:
            raise SignalError("injected failure")
        self._pieces = getattr(self, "_pieces", 0) + 1
        real_add(self, piece)
    monkeypatch.setattr(SegmentFilter, "add", add)
    p = process_input(gap_bags["mcap"], cfg, rule, batch=3000, chunk_s=2.0)
    try:
        assert p.segment_rows() == rows[:1] and p.store.segment_starts == [0]
        assert np.array_equal(p.store.read(0, p.n_samples).t, whole.t[:rows[1][0]])
        assert any("injected failure" in s for s in p.inputs[0].skipped) and "injected failure" in p.summary
    finally:
        p.close()


def test_segment_filter_in_windows_equals_process():
    rec = synthetic_recording(duration=12.0)
    opt = FilterOptions(cutoff_hz=15.0, target_rate_hz=250.0, trim_s=0.1, use_measured_velocity=False)
    out = []
    f = SegmentFilter(opt, 1000.0, out.append, block=700)
    for a in range(0, rec.n_samples, 333):
        sl = slice(a, a + 333)
        f.add(Recording(rec.t[sl], rec.joint_names, rec.q[sl], rec.effort[sl]))
    f.end()
    assert len(out) > 5
    got, ref = concatenate(out), process(Recording(rec.t, rec.joint_names, rec.q, rec.effort), opt)
    assert np.array_equal(got.t, ref.t)
    for a in ("q", "effort"):
        assert rel(getattr(got, a), getattr(ref, a)) < 1e-12, a
    # differentiating positions (once, twice) at 1 kHz scales round-off by ~1/h, 1/h^2
    assert rel(got.qd, ref.qd) < 1e-10 and rel(got.qdd, ref.qdd) < 1e-8


def test_store_times_and_decimated_rows_do_not_depend_on_the_read_size(demo_urdf, tmp_path):
    """The store's times and `decimated`'s rows are read a chunk at a time (their memory does
    not grow with the recording): the same as one read of all rows, whatever the chunk."""
    from robot_ident.data.signals import ProcessedData
    from robot_ident.data.stream_filter import ProcessedStore
    from robot_ident.estimation.compressed import decimated
    model = RobotModel(demo_urdf)
    rng = np.random.default_rng(7)
    N, n = 9001, model.n
    t = np.cumsum(rng.uniform(0.004, 0.006, N))
    q = np.cumsum(rng.normal(0, 0.01, (N, n)), axis=0)
    qd = np.gradient(q, t, axis=0)
    eff = rng.normal(size=(N, n))
    with ProcessedStore(model.joint_names, tmp_path) as store:
        for a in range(0, N, 1234):
            sl = slice(a, a + 1234)
            store.append(ProcessedData(t[sl], model.joint_names, q[sl], qd[sl], 0 * qd[sl], eff[sl], eff[sl]))
        whole = store.read(0, N)
        assert np.array_equal(whole.t, t)
        for a, b, chunk in [(0, N, 4000), (17, 8000, 333), (5, 6, 1), (-3, N + 9, 1000), (50, 50, 7)]:
            assert np.array_equal(store.times(a, b, chunk), t[max(a, 0):min(b, N)])
        runs = [(store, 0, 4001), (store, 4001, N)]
        ref, ref_moving = decimated(runs, model, 0.05, 0.05, max_samples=700, block=N)
        got, moving = decimated(runs, model, 0.05, 0.05, max_samples=700, block=250)
        assert got.n_samples == ref.n_samples > 600 and np.array_equal(moving, ref_moving)
        for a in ("t", "q", "qd", "effort"):
            assert np.array_equal(getattr(got, a), getattr(ref, a)), a


# --------------------------------------------------------------- compressed problem
@pytest.fixture(scope="module")
def demo_problem(demo_urdf):
    model = RobotModel(demo_urdf)
    from robot_ident.estimation.pipeline import IdentificationSettings
    base = base_parameters(model, IdentificationSettings())
    rng = np.random.default_rng(4)
    N = 1500
    t = np.arange(N) * 0.005
    w = np.linspace(0.5, 1.6, model.n)
    q = 0.8 * np.sin(np.outer(t, w) + np.arange(model.n))
    qd = 0.8 * w * np.cos(np.outer(t, w) + np.arange(model.n))
    qdd = -0.8 * w ** 2 * np.sin(np.outer(t, w) + np.arange(model.n))
    tau = model.efforts(q, qd, qdd)
    sig = np.linspace(0.02, 0.2, model.n)
    from robot_ident.data.signals import ProcessedData
    raw = tau + sig * rng.normal(size=tau.shape)
    data = ProcessedData(t, model.joint_names, q, qd, qdd, raw + 0.001 * rng.normal(size=tau.shape), raw)
    full = build_problem(model, base, data, 0.05, 0.05)
    acc = CompressedAccumulator(model, base)
    mask = data.moving_mask(0.05, 0.05)
    for a in range(0, N, 400):
        acc.add(data.subset(np.arange(a, min(a + 400, N))), mask[a:a + 400])
    return model, full, acc, data


def test_compressed_problem_gives_the_full_problems_estimates(demo_problem):
    model, full, acc, data = demo_problem
    comp = acc.problem()
    assert comp.n_rows == full.n_rows and comp.W.shape[0] <= model.n * (model.layout.size + 2)
    assert np.array_equal(acc.counts, np.bincount(full.joint_of_row, minlength=model.n))
    for est in (ols, wls):
        a, b = est(comp), est(full)
        assert rel(a.values, b.values) < 1e-9
        # no residual time series in a compressed problem: white-noise std, flagged as such
        assert "white residuals" in a.extra["std_model"] and "std_model" not in b.extra
        if est is ols:
            r = full.y - full.W @ b.values
            s2 = float(r @ r) / (full.n_rows - full.W.shape[1])
            white = np.sqrt(np.diag(s2 * np.linalg.inv(full.W.T @ full.W)))
            assert rel(a.std, white) < 1e-6
        assert a.condition_number == pytest.approx(b.condition_number, rel=1e-9)
        assert np.allclose(a.residual_rms, b.residual_rms, rtol=1e-9)
        assert np.allclose(a.joint_sigma, b.joint_sigma, rtol=1e-9)
    with single_threaded_blas():
        a, b = physically_consistent(comp), physically_consistent(full)
    # its data term is weighted by the WLS covariance: white on the compressed problem, HAC
    # on the rows, so the two estimates differ a little (the fit to the data does not)
    assert rel(a.values, b.values) < 1e-2
    assert np.allclose(a.residual_rms, b.residual_rms, rtol=1e-3)
    x = a.values
    raw = data.effort_raw[full.sample_of_row, full.joint_of_row]
    direct = np.sqrt(np.bincount(full.joint_of_row, weights=(raw - full.W @ x) ** 2, minlength=model.n)
                     / acc.counts)
    assert np.allclose(acc.raw_residual_rms(x), direct, rtol=1e-9)
    with pytest.raises(IdentificationError, match="needs every regressor row"):
        irls(comp)


# ------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def sim_bag(tmp_path_factory, demo_urdf):
    from robot_ident.excitation import FourierTrajectory
    from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory
    from robot_ident.offline.bag_workflow import simulate_to_bag
    d = tmp_path_factory.mktemp("stream_sim")
    m = RobotModel(demo_urdf)
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=3)
    save_trajectory(d / "ident.yaml", TrajectoryFile(traj))
    simulate_to_bag(demo_urdf, CONFIG, d / "ident.yaml", d / "bag", storage="mcap", repetitions=2)
    return d


@pytest.fixture(scope="module")
def identified(sim_bag, demo_urdf):
    """wls on the simulated bag (read in chunks), its result folder written."""
    return identify_inputs([sim_bag / "bag"], demo_urdf, CONFIG, sim_bag / "wls", method="wls", plots=False,
                           warn=lambda _: None)


def test_chunked_whole_and_table_reads_give_the_same_identification(sim_bag, demo_urdf, identified, monkeypatch):
    """The bag read in chunks, the bag synchronised in one call, and a table of its
    synchronised data (currents, converted by the same actuators): the same parameters,
    HAC standard deviations (from the residual series re-read from the stores) and
    validation on the held-out tail."""
    from dataclasses import replace

    from robot_ident.data.table import write_table
    a = identified
    assert (a.output / "result.yaml").is_file() and a.result.extra.get("raw_residual_rms")
    assert "std_model" not in a.result.extra and a.result.extra["hac_lag_samples"] > 0
    cfg = load_config(CONFIG)
    (seg,) = read_recordings_from_config(sim_bag / "bag", cfg).segments
    table = write_table(sim_bag / "same.npz", replace(seg, effort=cfg.drive.currents(seg.effort, seg.joint_names)),
                        value_field="current")
    c = identify_inputs([table], demo_urdf, CONFIG, None, method="wls", plots=False, warn=lambda _: None)
    with monkeypatch.context() as m:
        read_whole(m)
        b = identify_inputs([sim_bag / "bag"], demo_urdf, CONFIG, None, method="wls", plots=False,
                            warn=lambda _: None)
    for o in (b, c):
        assert rel(o.result.values, a.result.values) < 1e-9
        assert o.result.n_rows == a.result.n_rows and o.result.n_samples == a.result.n_samples
        assert o.result.condition_number == pytest.approx(a.result.condition_number, rel=1e-9)
        assert o.result.extra["hac_lag_samples"] == a.result.extra["hac_lag_samples"]
        assert rel(o.result.std, a.result.std) < 1e-8
        for j in a.model.joint_names:
            assert o.result.extra["raw_residual_rms"][j] == pytest.approx(a.result.extra["raw_residual_rms"][j],
                                                                          rel=1e-9)
        assert np.array_equal(o.validation.n_samples, a.validation.n_samples)
        assert np.allclose(o.validation.rms, a.validation.rms, rtol=1e-9)
        assert np.allclose(o.validation.nrms, a.validation.nrms, rtol=1e-9)
        assert o.validation.nrms_reference == a.validation.nrms_reference
    assert a.warnings == b.warnings


def test_row_based_methods_read_the_rows_back_up_to_a_limit(sim_bag, demo_urdf, identified, monkeypatch):
    """robust needs every row: read back from the stores (the compressed methods' samples);
    above MAX_ROWS_IN_MEMORY it is refused before anything is written."""
    from robot_ident.estimation import flow
    r = identify_inputs([sim_bag / "bag"], demo_urdf, CONFIG, None, method="robust", plots=False,
                        warn=lambda _: None)
    assert r.result.method.startswith("robust") and r.result.n_samples == identified.result.n_samples
    w = identified.result                 # the same samples, weighted otherwise: within the uncertainty
    assert np.median(np.abs(r.result.values - w.values) / w.std) < 2
    assert np.allclose(r.validation.rms, identified.validation.rms, rtol=0.02)
    monkeypatch.setattr(flow, "MAX_ROWS_IN_MEMORY", 1000)
    with pytest.raises(IdentificationError, match="needs every regressor row in memory: .* exceed the limit"):
        identify_inputs([sim_bag / "bag"], demo_urdf, CONFIG, sim_bag / "robust", method="robust", plots=False,
                        warn=lambda _: None)
    assert not (sim_bag / "robust").exists()


@pytest.mark.parametrize("holdout", [Holdout(fraction=0.2), Holdout(every=3, block_s=2.0)])
def test_held_out_samples_validate_and_are_kept_in_samples_npz(sim_bag, demo_urdf, tmp_path, holdout):
    from robot_ident.io.samples import read_samples
    o = identify_inputs([sim_bag / "bag"], demo_urdf, CONFIG, tmp_path / "res", method="wls", holdout=holdout,
                        plots=False, warn=lambda _: None)
    sets = read_samples(tmp_path / "res").sets
    ident, valid = sets["identification"].t, sets["validation"].t
    assert np.array_equal(valid, o.valid_data.t) and o.validation.n_samples.max() > 0
    total = o.result.n_samples + valid.size
    if holdout.every:
        t0 = min(ident.min(), valid.min())                  # the segment's first processed sample
        assert np.all(np.floor((valid - t0) / 2.0) % 3 == 2) and np.all(np.floor((ident - t0) / 2.0) % 3 != 2)
        assert abs(valid.size / total - 1 / 3) < 0.05
    else:
        assert valid.min() > ident.max() and valid.size == total - int(round(0.8 * total))


def test_holdout_window_counts_from_the_start_of_the_recording(sim_bag, demo_urdf):
    """``--holdout-window 4:6`` holds out the samples 4-6 s after the recording's first
    synchronised sample (the bag's first stamp: its stored time 0), whatever the filter
    trims from the segment's start."""
    o = identify_inputs([sim_bag / "bag"], demo_urdf, CONFIG, None, method="wls", holdout=Holdout(window=(4.0, 6.0)),
                        plots=False, warn=lambda _: None)
    t = o.valid_data.t
    step = 1 / 200.0                                        # the processed rate
    assert 4.0 <= t.min() < 4.0 + step and 6.0 - step < t.max() <= 6.0, (t.min(), t.max())


def test_validate_equals_the_rms_of_the_samples_in_memory(sim_bag, identified, tmp_path):
    """`validate` (chunk by chunk over the stores) gives `rms_report` of the processed
    samples in memory with the result's prediction, and writes validation_samples.npz."""
    from dataclasses import replace

    from robot_ident.data.processing import process_one
    from robot_ident.estimation.validation import rms_report
    from robot_ident.io.results import load_result
    from robot_ident.offline.bag_workflow import validate_bag
    out = identified.output
    got = validate_bag(sim_bag / "bag", out, progress=Progress(quiet=True), output=tmp_path / "v.yaml",
                       warn=lambda _: None).report
    assert (tmp_path / "validation_samples.npz").is_file()
    d, base, values, _ = load_result(out)
    cfg = load_config(out / "config.yaml")
    model = RobotModel((out / "model.urdf").read_text(), cfg.joints)
    src, s = d["source"], d["settings"]
    f = replace(identification_config(cfg.section("identification")).settings.filter,
                cutoff_hz=src["filter_cutoff_hz"], use_measured_velocity=src["use_measured_velocity"])
    p = process_one(sim_bag / "bag", cfg, f)
    try:
        data = concatenate(segments_in_memory(p))
    finally:
        p.close()
    pred = (base.regressor(model.regressor(data.q, data.qd, data.qdd)) @ values).reshape(-1, model.n)
    ref = rms_report(data.t, data.effort_raw, pred, model.joint_names,
                     data.moving_mask(s["moving_threshold"], s["reversal_guard_s"]))
    assert np.array_equal(got.n_samples, ref.n_samples) and got.n_samples.min() > 1000
    assert np.allclose(got.rms, ref.rms, rtol=1e-9) and np.allclose(got.max_abs_error, ref.max_abs_error, rtol=1e-9)


def test_validate_with_the_config_joints_in_another_order(sim_bag, identified, tmp_path):
    """The bag is read in the result's joint order whatever order the config lists them in
    (read in the config's order, the ratios were 100-2000, silently)."""
    import yaml

    from robot_ident.offline.bag_workflow import validate_bag
    out = identified.output
    doc = yaml.safe_load((out / "config.yaml").read_text())
    sec = next(v["ros__parameters"] for v in doc.values() if "joints" in v.get("ros__parameters", {}))
    sec["joints"] = list(reversed(sec["joints"]))
    shuffled = tmp_path / "reversed.yaml"
    shuffled.write_text(yaml.safe_dump(doc))
    ref = validate_bag(sim_bag / "bag", out, progress=Progress(quiet=True), warn=lambda _: None,
                       output=tmp_path / "v0.yaml").report
    got = validate_bag(sim_bag / "bag", out, config_path=shuffled, progress=Progress(quiet=True), warn=lambda _: None,
                       output=tmp_path / "v1.yaml").report
    assert list(got.joint_names) == list(ref.joint_names)
    assert np.allclose(got.rms, ref.rms, rtol=1e-9), (got.rms, ref.rms)


def test_identify_refuses_implausible_input(sim_bag, demo_urdf, tmp_path, capsys):
    """`identify` runs the input checks while reading: a flipped motor direction in the
    config is refused naming the joint, nothing is written; --force identifies and keeps
    the warning in result.yaml (with the --cutoff given); --holdout-block alone is refused."""
    import yaml

    from robot_ident.cli import main
    doc = yaml.safe_load(CONFIG.read_text())
    doc["robot_ident"]["ros__parameters"]["actuators"]["shoulder_lift"]["direction"] = -1
    bad = tmp_path / "flipped.yaml"
    bad.write_text(yaml.safe_dump(doc))
    argv = ["identify", "--bag", str(sim_bag / "bag"), "--urdf", str(demo_urdf), "--config", str(bad),
            "--method", "wls", "--no-plots", "--quiet"]
    capsys.readouterr()
    assert main(argv + ["--output", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "implausible input: joint 'shoulder_lift'" in err and "flipped direction" in err
    assert not (tmp_path / "r").exists()
    assert main(argv + ["--output", str(tmp_path / "f"), "--force", "--cutoff", "15"]) == 0
    res = yaml.safe_load((tmp_path / "f" / "result.yaml").read_text())
    assert res["input_checks"]["forced"] is True and res["source"]["filter_cutoff_hz"] == 15.0
    assert any("shoulder_lift" in w and "flipped direction" in w for w in res["input_checks"]["warnings"])
    assert main(argv + ["--output", str(tmp_path / "b"), "--holdout-block", "2"]) == 2
    assert "--holdout-block needs --holdout-every" in capsys.readouterr().err


# ---------------------------------------------------------------------- progress
class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_rate_and_eta():
    assert format_progress("read bag", 0.5, 1.5e5, "msg", 12.0) == \
        "[read bag] [############............]  50.0 %  150.0 kmsg/s  ETA 12 s"
    seen = []
    out = _Tty()
    p = Progress(out, on_update=lambda *a: seen.append(a))
    with p.stage("read bag"):
        tick = p.counter("msg")
        tick(100, 400)
        tick(400, 400)
    text = out.getvalue()
    assert "25.0 %" in text and "msg/s" in text and "ETA" in text and "[read bag] done in" in text
    assert seen[0][0] == "read bag" and seen[0][1] == pytest.approx(0.25) and seen[-1][1] == 1.0
    log = io.StringIO()                      # not a terminal: no bars, the mean rate at the end
    p = Progress(log)
    with p.stage("read bag"):
        p.counter("msg")(10, 10)
    assert "%" not in log.getvalue() and "msg/s)" in log.getvalue()


def test_a_segment_ends_before_the_next_ones_rows_in_one_batch(tmp_path):
    """A batch that carries the end of one segment and more than a filter window of the next
    (2 kHz, a gap at 5 s, the default batch): the first segment's tail is stored before the
    second's rows, so each stored segment is one stretch in time order, as read at once
    (before: 2649 / 5191 rows with time going back at row 2648 instead of 920 / 6920)."""
    from robot_ident.data.bag import read_recordings_from_config, write_bag_from_config
    from robot_ident.data.processing import process_input, segments_in_memory
    from robot_ident.data.signals import process
    from robot_ident.io.config import load_config
    cfg = load_config(CONFIG)
    rec = synthetic_recording(duration=40.0, gap_at=5.0, rate=2000.0)
    write_bag_from_config(tmp_path / "b", rec, cfg, storage="mcap", current_noise_std=0.01)
    f, rule = filter_rule(cfg)
    p = process_input(tmp_path / "b", cfg, rule)
    try:
        ref = [process(s.reorder(cfg.joints), f) for s in read_recordings_from_config(tmp_path / "b", cfg).segments]
        got = segments_in_memory(p)
        assert [g.n_samples for g in got] == [r.n_samples for r in ref] == [920, 6920]
        assert np.all(np.diff(p.store.times(0, p.n_samples)) > 0)
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g.t, r.t)
    finally:
        p.close()


def test_hold_out_runs_never_span_two_segments_or_inputs():
    """Review: with two inputs and a tail hold-out, the identification run crossed the input
    boundary, so the dead band was judged across it (132 rows near reversals kept that
    each input alone masks). Runs are cut at every segment boundary."""
    from robot_ident.estimation.flow import _runs
    held = np.zeros(7840, bool)
    held[6272:] = True
    ident, valid = _runs("store", [(0, 3920), (3920, 7840)], held)
    assert [(a, b) for _, a, b in ident] == [(0, 3920), (3920, 6272)]
    assert [(a, b) for _, a, b in valid] == [(6272, 7840)]
