"""The streaming path against the in-memory one: batch CDR decoding against rosbags'
deserialiser, chunked synchronisation + filtering against synchronise + process, the
compressed problem against the full one, and `identify` end to end (same parameters to
1e-9 relative), plus progress reporting."""
import io
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")

from robot_ident.data.bag import make_typestore, read_recordings_from_config, write_bag_from_config  # noqa: E402
from robot_ident.data.bag_processed import process_bag  # noqa: E402
from robot_ident.data.cdr import DYNAMIC_JOINT_STATE, JOINT_STATE, decode  # noqa: E402
from robot_ident.data.joint_stream import JointStream  # noqa: E402
from robot_ident.data.msgs import JointStreamCollector, dynamic_joint_state_message, joint_state_message  # noqa: E402
from robot_ident.data.signals import FilterOptions, Recording, concatenate, process  # noqa: E402
from robot_ident.data.stream_filter import SegmentFilter  # noqa: E402
from robot_ident.data.stream_sync import ChunkedSync, NeedsWholeRecording  # noqa: E402
from robot_ident.errors import IdentificationError  # noqa: E402
from robot_ident.estimation import build_problem, ols, physically_consistent, wls  # noqa: E402
from robot_ident.estimation.compressed import CompressedAccumulator  # noqa: E402
from robot_ident.estimation.pipeline import base_parameters, identification_config, process_segments  # noqa: E402
from robot_ident.estimation.robust import irls  # noqa: E402
from robot_ident.io.config import load_config  # noqa: E402
from robot_ident.model.robot import RobotModel  # noqa: E402
from robot_ident.util.blas import single_threaded_blas  # noqa: E402
from robot_ident.util.progress import Progress, format_progress  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "demo_arm.yaml"


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


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
        # DynamicJointState's positions, for the inter-topic lag check of the in-memory path)
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


@pytest.fixture(scope="module")
def gap_bags(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream")
    cfg = load_config(CONFIG)
    rec = synthetic_recording(gap_at=11.0)
    out = {}
    for storage in ("sqlite3", "mcap"):
        out[storage] = d / f"gap_{storage}"
        write_bag_from_config(out[storage], rec, cfg, storage=storage, current_noise_std=0.01)
    return out


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_chunked_read_sync_filter_equals_whole_recording(gap_bags, storage):
    cfg = load_config(CONFIG)
    settings = identification_config(cfg.section("identification")).settings
    ref_sync = read_recordings_from_config(gap_bags[storage], cfg)
    parts, _ = process_segments(ref_sync, cfg.joints, settings)
    ref = concatenate(parts)
    # small batches and stretches: many chunk boundaries, one inside the gap's neighbourhood
    pb = process_bag(gap_bags[storage], cfg, settings.filter, batch=3000, chunk_s=2.0)
    try:
        got = pb.store.read(0, pb.store.n_samples)
    finally:
        pb.store.close()
    assert len(ref_sync.segments) == 2 and pb.report.segments == 2
    assert pb.report.samples == ref_sync.report.samples
    assert len(pb.report.gaps) == len(ref_sync.report.gaps) == 2
    assert got.n_samples == ref.n_samples
    assert np.array_equal(got.t, ref.t) and np.array_equal(got.effort_raw, ref.effort_raw)
    for f in ("q", "qd", "qdd", "effort"):
        assert rel(getattr(got, f), getattr(ref, f)) < 1e-10, f


def test_a_segment_that_fails_part_way_is_taken_out_whole(gap_bags, monkeypatch):
    """As the whole-recording path skips a segment whose processing fails, the chunked path
    takes back the samples it had already stored (it used to keep them)."""
    from robot_ident.data import bag_processed
    from robot_ident.errors import SignalError
    cfg = load_config(CONFIG)
    settings = identification_config(cfg.section("identification")).settings
    pb = process_bag(gap_bags["mcap"], cfg, settings.filter, batch=3000, chunk_s=2.0)
    try:
        whole, starts = pb.store.read(0, pb.store.n_samples), list(pb.store.segment_starts)
    finally:
        pb.store.close()
    assert len(starts) == 2
    real_add = bag_processed.SegmentFilter.add

    def add(self, piece):                 # the second segment fails after a few of its pieces
        if piece.t[0] > 11.0 and getattr(self, "_pieces", 0) >= 3:
            raise SignalError("injected failure")
        self._pieces = getattr(self, "_pieces", 0) + 1
        real_add(self, piece)
    monkeypatch.setattr(bag_processed.SegmentFilter, "add", add)
    pb = process_bag(gap_bags["mcap"], cfg, settings.filter, batch=3000, chunk_s=2.0)
    try:
        got = pb.store.read(0, pb.store.n_samples)
        assert pb.store.segment_starts == starts[:1] and got.n_samples == starts[1]
        assert np.array_equal(got.t, whole.t[:starts[1]]) and any("injected failure" in s for s in pb.skipped)
    finally:
        pb.store.close()


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


def test_backward_time_jump_needs_the_whole_recording():
    t = np.arange(0, 30, 0.002)
    t = np.concatenate([t, t])                         # a bag played twice
    joints = ("a",)
    s = JointStream.from_arrays("/js", t, joints, position=np.sin(t)[:, None], velocity=np.cos(t)[:, None])
    e = JointStream.from_arrays("/cur", t, joints, effort=np.cos(t)[:, None])
    sync = ChunkedSync(joints, chunk_s=5.0)
    with pytest.raises(NeedsWholeRecording):
        for a in range(0, t.size, 2000):
            sync.feed(s.select(np.arange(a, min(a + 2000, t.size))), e.select(np.arange(a, min(a + 2000, t.size))))
        sync.finish()


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


@pytest.mark.parametrize("method", ["wls", "physical"])
def test_streaming_identify_gives_the_in_memory_parameters(sim_bag, demo_urdf, method):
    from robot_ident.offline.bag_workflow import identify_bag
    a = identify_bag(sim_bag / "bag", demo_urdf, CONFIG, sim_bag / f"s_{method}", method=method, plots=False,
                     streaming=True)
    b = identify_bag(sim_bag / "bag", demo_urdf, CONFIG, sim_bag / f"m_{method}", method=method, plots=False,
                     streaming=False)
    assert a.result.extra.get("raw_residual_rms") and (sim_bag / f"s_{method}" / "result.yaml").is_file()
    if method == "physical":    # an iterative solve: equal to its tolerance, not to rounding
        assert rel(a.result.values, b.result.values) < 1e-6
        assert np.allclose(a.validation.rms, b.validation.rms, rtol=1e-6)
        return
    assert rel(a.result.values, b.result.values) < 1e-9
    assert a.result.n_rows == b.result.n_rows and a.result.n_samples == b.result.n_samples
    assert a.result.condition_number == pytest.approx(b.result.condition_number, rel=1e-9)
    for j in a.model.joint_names:
        assert a.result.extra["raw_residual_rms"][j] == pytest.approx(b.result.extra["raw_residual_rms"][j],
                                                                      rel=1e-9)
    assert np.array_equal(a.validation.n_samples, b.validation.n_samples)
    assert np.allclose(a.validation.rms, b.validation.rms, rtol=1e-9)
    assert np.allclose(a.validation.max_abs_error, b.validation.max_abs_error, rtol=1e-9)
    assert np.allclose(a.validation.nrms, b.validation.nrms, rtol=1e-9)
    assert a.validation.nrms_reference == b.validation.nrms_reference


def test_row_based_methods_bound_their_rows(sim_bag, demo_urdf, monkeypatch):
    from robot_ident.estimation import streamed as streaming
    from robot_ident.offline.bag_workflow import identify_bag
    monkeypatch.setattr(streaming, "MAX_ROWS_IN_MEMORY", 1000)
    with pytest.raises(IdentificationError, match="needs every regressor row in memory: .* exceed the limit"):
        identify_bag(sim_bag / "bag", demo_urdf, CONFIG, sim_bag / "robust", method="robust", plots=False,
                     streaming=True)
    assert not (sim_bag / "robust" / "result.yaml").exists()


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


def test_streaming_validate_equals_the_whole_recording(sim_bag, demo_urdf, tmp_path):
    from robot_ident.data.signals import concatenate as cat
    from robot_ident.estimation.validation import rms_report
    from robot_ident.io.results import load_result
    from robot_ident.offline.bag_workflow import identify_bag, read_processed, validate_bag
    out = tmp_path / "res"
    identify_bag(sim_bag / "bag", demo_urdf, CONFIG, out, method="wls", plots=False)
    whole = validate_bag(sim_bag / "bag", out, progress=Progress(quiet=True), streaming=False).report
    got = validate_bag(sim_bag / "bag", out, progress=Progress(quiet=True), streaming=True, warn=lambda _: None).report
    assert (out / "validation_samples.npz").is_file()                  # the report's samples, decimated
    assert np.allclose(got.rms, whole.rms, rtol=1e-9)
    assert np.allclose(got.nrms, whole.nrms, rtol=1e-9) and got.nrms_reference == whole.nrms_reference
    d, base, values, _ = load_result(out)
    cfg = load_config(out / "config.yaml")
    icfg = identification_config(cfg.section("identification"))
    model = RobotModel((out / "model.urdf").read_text(), cfg.joints)
    data = cat(read_processed(sim_bag / "bag", cfg, icfg.settings, Progress(quiet=True))[0])
    s = d["settings"]
    pred = (base.regressor(model.regressor(data.q, data.qd, data.qdd)) @ values).reshape(-1, model.n)
    ref = rms_report(data.t, data.effort_raw, pred, model.joint_names,
                     data.moving_mask(s["moving_threshold"], s["reversal_guard_s"]))
    assert np.array_equal(got.n_samples, ref.n_samples)
    assert np.allclose(got.rms, ref.rms, rtol=1e-9) and np.allclose(got.max_abs_error, ref.max_abs_error, rtol=1e-9)


def test_streaming_validate_with_the_config_joints_in_another_order(sim_bag, demo_urdf, tmp_path):
    """The bag is read in the result's joint order whatever order the config lists them in (the
    streamed path used to read it in the config's order: ratios of 100-2000, silently)."""
    import yaml

    from robot_ident.offline.bag_workflow import identify_bag, validate_bag
    out = tmp_path / "res"
    identify_bag(sim_bag / "bag", demo_urdf, CONFIG, out, method="wls", plots=False)
    doc = yaml.safe_load((out / "config.yaml").read_text())
    sec = next(v["ros__parameters"] for v in doc.values() if "joints" in v.get("ros__parameters", {}))
    sec["joints"] = list(reversed(sec["joints"]))
    shuffled = tmp_path / "reversed.yaml"
    shuffled.write_text(yaml.safe_dump(doc))
    ref = validate_bag(sim_bag / "bag", out, progress=Progress(quiet=True), streaming=True, warn=lambda _: None,
                       output=tmp_path / "v0.yaml").report
    for streaming in (True, False):
        got = validate_bag(sim_bag / "bag", out, config_path=shuffled, progress=Progress(quiet=True),
                           streaming=streaming, warn=lambda _: None, output=tmp_path / f"v{streaming}.yaml").report
        assert list(got.joint_names) == list(ref.joint_names)
        assert np.allclose(got.rms, ref.rms, rtol=1e-9), (streaming, got.rms, ref.rms)


def test_identify_stream_from_the_command_line(sim_bag, demo_urdf, tmp_path):
    """`robot-ident identify --stream` runs the bounded-memory path: the in-memory path's
    parameters, standard deviations flagged as white-residual ones; other inputs refused."""
    import yaml

    from robot_ident.cli import main
    from robot_ident.offline.bag_workflow import identify_bag
    out = tmp_path / "cli_stream"
    argv = ["identify", "--stream", "--bag", str(sim_bag / "bag"), "--urdf", str(demo_urdf), "--config", str(CONFIG),
            "--output", str(out), "--method", "wls", "--no-plots", "--quiet"]
    assert main(argv) == 0
    doc = yaml.safe_load((out / "result.yaml").read_text())
    ref = identify_bag(sim_bag / "bag", demo_urdf, CONFIG, tmp_path / "mem", method="wls", plots=False,
                       streaming=False)
    assert rel([p["value"] for p in doc["base_parameters"]], ref.result.values) < 1e-9
    # the same input checks and model-quality lines as the in-memory path, in result.yaml too
    assert doc["input_checks"]["warnings"] == ref.warnings
    streamed = identify_bag(sim_bag / "bag", demo_urdf, CONFIG, tmp_path / "s", method="wls", plots=False,
                            streaming=True)
    # both: HAC from the residual time series (streamed: re-read from the processed store)
    assert "std_model" not in streamed.result.extra and "std_model" not in ref.result.extra
    assert streamed.result.extra["hac_lag_samples"] == ref.result.extra["hac_lag_samples"]
    assert rel(streamed.result.std, ref.result.std) < 1e-8
    assert main(argv[:-4] + ["--output", str(tmp_path / "x"), "--table", "t.csv", "--quiet"]) == 2


def test_identify_streams_by_default_when_it_can(sim_bag, demo_urdf, tmp_path):
    """Plain `identify` on one bag streams (a cutoff chosen from the data too:
    test/test_stream_cutoff.py); --in-memory or a hold-out of every k-th block read the
    recording at once; --stream says why it cannot."""
    import yaml

    from robot_ident.cli import main
    common = ["--urdf", str(demo_urdf), "--config", str(CONFIG), "--method", "wls", "--no-plots", "--quiet"]
    bag = ["--bag", str(sim_bag / "bag")]

    def read_mode(out):
        return yaml.safe_load((out / "result.yaml").read_text())["source"].get("read")

    assert main(["identify", *bag, "--output", str(tmp_path / "d"), *common]) == 0
    assert read_mode(tmp_path / "d") == "streaming"
    assert main(["identify", *bag, "--output", str(tmp_path / "m"), "--in-memory", *common]) == 0
    assert read_mode(tmp_path / "m") is None
    assert main(["identify", *bag, "--output", str(tmp_path / "h"), "--holdout-every", "3", "--holdout-block", "2",
                 *common]) == 0
    assert read_mode(tmp_path / "h") is None
    a = yaml.safe_load((tmp_path / "d" / "result.yaml").read_text())
    b = yaml.safe_load((tmp_path / "m" / "result.yaml").read_text())
    assert rel([p["value"] for p in a["base_parameters"]], [p["value"] for p in b["base_parameters"]]) < 1e-9
    # samples.npz keeps the held-out samples on both paths (the streamed one used to drop them)
    from robot_ident.io.samples import read_samples
    for out in ("d", "m"):
        sets = read_samples(tmp_path / out).sets
        assert set(sets) == {"identification", "validation"}, out
        assert sets["validation"].t.min() > sets["identification"].t.max()
    assert main(["identify", *bag, "--output", str(tmp_path / "x"), "--stream", "--holdout-every", "3", *common]) == 2
    assert main(["identify", *bag, "--output", str(tmp_path / "y"), "--stream", "--in-memory", *common]) == 2


def test_default_streamed_identify_refuses_implausible_input(sim_bag, demo_urdf, tmp_path, capsys):
    """The default (streamed) `identify` runs the input checks before identifying: a
    flipped motor direction in the config is refused naming the joint, nothing is written;
    --force identifies and keeps the warning in result.yaml, the same lines as in memory."""
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
    assert main(argv + ["--output", str(tmp_path / "f"), "--force"]) == 0
    res = yaml.safe_load((tmp_path / "f" / "result.yaml").read_text())
    assert res["source"]["read"] == "streaming" and res["input_checks"]["forced"] is True
    assert main(argv + ["--output", str(tmp_path / "m"), "--force", "--in-memory"]) == 0
    mem = yaml.safe_load((tmp_path / "m" / "result.yaml").read_text())
    assert res["input_checks"]["warnings"] == mem["input_checks"]["warnings"]
    assert any("shoulder_lift" in w and "flipped direction" in w for w in res["input_checks"]["warnings"])


def test_what_reads_at_once_and_what_validate_filters_with(sim_bag, demo_urdf, tmp_path):
    """Row-based methods and tables are not streamed by default (they would need every row or
    are no rosbag2); an explicit --cutoff is recorded for validate; --holdout-block alone is
    refused on any path."""
    import yaml

    from robot_ident.cli import main
    common = ["--urdf", str(demo_urdf), "--config", str(CONFIG), "--no-plots", "--quiet"]
    bag = ["--bag", str(sim_bag / "bag")]
    assert main(["identify", *bag, "--output", str(tmp_path / "r"), "--method", "robust", *common]) == 0
    assert yaml.safe_load((tmp_path / "r" / "result.yaml").read_text())["source"].get("read") is None
    assert main(["identify", *bag, "--output", str(tmp_path / "x"), "--method", "robust", "--stream", *common]) == 2
    assert main(["identify", *bag, "--output", str(tmp_path / "c"), "--method", "wls", "--cutoff", "15",
                 *common]) == 0
    src = yaml.safe_load((tmp_path / "c" / "result.yaml").read_text())["source"]
    assert src["read"] == "streaming" and src["filter_cutoff_hz"] == 15.0
    assert main(["identify", *bag, "--output", str(tmp_path / "b"), "--holdout-block", "2", *common]) == 2
