"""The filter cutoff chosen from a bag in bounded memory (estimation/stream_cutoff.py)
against the in-memory `choose_cutoff` on the same recordings (real rosbag2 bags of the
simulated demo arm): the same candidates, choice, scores and per-joint RMS to 1e-9
relative, with one segment and with gaps, with and without a hold-out; the fold
assignment matters (shifting it changes the scores, so the equality is not vacuous);
the same note and the default cutoff when the data cannot decide; `robot-ident
identify` streams with an auto cutoff and gives the parameters of ``--in-memory``;
the identification node's streamed window chooses it too."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rosbags")

from robot_ident.cli import main  # noqa: E402
from robot_ident.data.bag import read_recordings_from_config, write_bag_from_config  # noqa: E402
from robot_ident.data.bag_processed import process_bag  # noqa: E402
from robot_ident.data.holdout import Holdout, holdout_flags  # noqa: E402
from robot_ident.errors import SignalError  # noqa: E402
from robot_ident.estimation.auto_cutoff import choose_cutoff, settings_with_data_cutoff, strip_auto_cutoff  # noqa: E402
from robot_ident.estimation.pipeline import base_parameters, identification_config  # noqa: E402
from robot_ident.estimation.stream_cutoff import process_choosing_cutoff  # noqa: E402
from robot_ident.io.config import load_config  # noqa: E402
from robot_ident.io.model_loading import load_model  # noqa: E402
from robot_ident.model.robot import RobotModel  # noqa: E402
from robot_ident.offline.inputs import _process_all, load_input  # noqa: E402
from robot_ident.util.progress import Progress  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "demo_arm.yaml"


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.abs(b)))


def auto_config(path: Path, **dead_band) -> Path:
    """The demo config without a filter cutoff (chosen from the data), method wls."""
    doc = yaml.safe_load(CONFIG.read_text())
    ident = doc["robot_ident"]["ros__parameters"]["identification"]
    ident["method"] = "wls"
    del ident["filter"]["cutoff_hz"]
    ident["dead_band"].update(dead_band)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def bags(tmp_path_factory, demo_urdf):
    """A 30 s simulated bag (sqlite3), and the same motion in mcap with two gaps that
    cut it into three segments, the first too short to process."""
    from robot_ident.excitation import FourierTrajectory
    from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory
    from robot_ident.offline.bag_workflow import simulate_to_bag
    d = tmp_path_factory.mktemp("stream_cutoff")
    cfg_path = auto_config(d / "auto.yaml")
    m = RobotModel(demo_urdf)
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=3)
    save_trajectory(d / "ident.yaml", TrajectoryFile(traj))
    simulate_to_bag(demo_urdf, cfg_path, d / "ident.yaml", d / "one", storage="sqlite3", repetitions=3)
    cfg = load_config(cfg_path)
    rec = read_recordings_from_config(d / "one", cfg).segments[0].reorder(cfg.joints)
    rec = rec.slice_time(0.0, 24.0)
    t = rec.t + 0.5 * (rec.t >= 0.3) + 0.5 * (rec.t >= 12.0)
    from dataclasses import replace
    write_bag_from_config(d / "gaps", replace(rec, t=t), cfg, storage="mcap")
    return {"dir": d, "config": cfg_path, "one": d / "one", "gaps": d / "gaps"}


def in_memory_choice(bag, cfg_path, urdf, holdout: float):
    """What `identify_inputs` (``identify --in-memory``) chooses: the same steps."""
    cfg = load_config(cfg_path)
    section, auto = strip_auto_cutoff(cfg.section("identification"))
    icfg = identification_config(section)
    settings = icfg.settings
    model = load_model(urdf, cfg, icfg)
    base = base_parameters(model, settings)
    pairs, _ = _process_all([load_input(bag, cfg)], settings.filter)
    parts = [p for _, p in pairs if p is not None]
    flags = holdout_flags(parts, Holdout(fraction=holdout))
    recs = [s for s, p in pairs if p is not None]
    return cfg, settings, model, base, recs, [~f for f in flags]


def streamed_choice(bag, cfg, settings, holdout, model, base):
    pb, new, note, choice = process_choosing_cutoff(bag, cfg, settings, holdout, model, base, Progress(quiet=True))
    try:
        return pb.store.n_samples, pb.filters[0].cutoff_hz, new, note, choice
    finally:
        pb.close()


@pytest.mark.parametrize("which,holdout", [("one", 0.2), ("one", 0.0), ("gaps", 0.2)])
def test_streamed_choice_equals_choose_cutoff(bags, demo_urdf, which, holdout):
    cfg, settings, model, base, recs, allowed = in_memory_choice(bags[which], bags["config"], demo_urdf, holdout)
    if which == "gaps":
        assert len(recs) == 2 and len(read_recordings_from_config(bags[which], cfg).segments) == 3
    ref = choose_cutoff(model, recs, settings, base=base, allowed=allowed)
    _, used, new, note, got = streamed_choice(bags[which], cfg, settings, holdout, model, base)
    assert got.candidates == ref.candidates and len(ref.candidates) == 9
    assert got.cutoff_hz == ref.cutoff_hz == new.filter.cutoff_hz == used
    assert rel(got.scores, ref.scores) < 1e-9
    assert max(rel(a, b) for a, b in zip(got.rms, ref.rms)) < 1e-9
    assert note == ref.summary()


def test_a_shifted_fold_assignment_changes_the_scores(bags, demo_urdf, monkeypatch):
    """The equality above is not vacuous: scoring another fold gives other scores."""
    cfg, settings, model, base, recs, allowed = in_memory_choice(bags["one"], bags["config"], demo_urdf, 0.2)
    ref = choose_cutoff(model, recs, settings, base=base, allowed=allowed)
    from robot_ident.estimation import auto_cutoff
    of = auto_cutoff._Folds.of                    # both paths' fold assignment (one implementation)
    monkeypatch.setattr(auto_cutoff._Folds, "of",
                        lambda self, a, t: np.where((f := of(self, a, t)) >= 0, (f + 1) % self.folds, f))
    got = streamed_choice(bags["one"], cfg, settings, 0.2, model, base)[-1]
    assert rel(got.scores, ref.scores) > 1e-4


def test_data_that_cannot_decide_keep_the_default_cutoff(bags, demo_urdf, tmp_path):
    """A dead band no sample leaves: the in-memory note, the default cutoff, and the
    samples processed with it (no second read of the bag)."""
    cfg_path = auto_config(tmp_path / "still.yaml", velocity=100.0)
    cfg, settings, model, base, recs, allowed = in_memory_choice(bags["one"], cfg_path, demo_urdf, 0.2)
    with pytest.raises(SignalError, match="too few moving samples"):
        choose_cutoff(model, recs, settings, base=base, allowed=allowed)
    same, ref_note, none = settings_with_data_cutoff(model, recs, settings, allowed, base)
    pb, new, note, choice = process_choosing_cutoff(bags["one"], cfg, settings, 0.2, model, base,
                                                    Progress(quiet=True))
    try:
        assert choice is none is None and note == ref_note and "(default)" in note
        assert new == same and new.filter.cutoff_hz == 20.0 == pb.filters[0].cutoff_hz
        got = pb.store.read(0, pb.store.n_samples)
    finally:
        pb.close()
    ref = process_bag(bags["one"], cfg, settings.filter)
    try:
        want = ref.store.read(0, ref.store.n_samples)
    finally:
        ref.store.close()
    assert np.array_equal(got.t, want.t) and np.array_equal(got.qdd, want.qdd)


def test_identify_streams_with_an_auto_cutoff(bags, demo_urdf, tmp_path):
    """`robot-ident identify` with no cutoff in the config streams by default; the
    parameters, the cutoff, its note and the input checks are those of --in-memory."""
    common = ["--bag", str(bags["one"]), "--urdf", str(demo_urdf), "--config", str(bags["config"]),
              "--no-plots", "--quiet"]
    assert main(["identify", *common, "--output", str(tmp_path / "s")]) == 0
    assert main(["identify", *common, "--output", str(tmp_path / "m"), "--in-memory"]) == 0
    a = yaml.safe_load((tmp_path / "s" / "result.yaml").read_text())
    b = yaml.safe_load((tmp_path / "m" / "result.yaml").read_text())
    assert a["source"]["read"] == "streaming" and b["source"].get("read") is None
    assert a["source"]["filter_cutoff_chosen_from_data"] is b["source"]["filter_cutoff_chosen_from_data"] is True
    for k in ("filter_cutoff_hz", "filter_cutoff_note"):
        assert a["source"][k] == b["source"][k], k
    assert rel([p["value"] for p in a["base_parameters"]], [p["value"] for p in b["base_parameters"]]) < 1e-9
    assert a["input_checks"] == b["input_checks"]
    # --cutoff auto overrides a configured cutoff, streamed too
    argv = ["identify", "--bag", str(bags["one"]), "--urdf", str(demo_urdf), "--config", str(CONFIG),
            "--method", "wls", "--no-plots", "--quiet", "--stream", "--cutoff", "auto"]
    assert main(argv + ["--output", str(tmp_path / "c")]) == 0
    c = yaml.safe_load((tmp_path / "c" / "result.yaml").read_text())
    assert c["source"]["filter_cutoff_hz"] == a["source"]["filter_cutoff_hz"]


def test_node_streamed_window_chooses_the_cutoff(bags, demo_urdf, tmp_path):
    """The identification node's streamed window (above its message limit) chooses the
    cutoff as its in-memory window does, with the same parameters."""
    from robot_ident.data.bag import read_streams
    from robot_ident.online.identification_window import identify_recorded, identify_streams
    from robot_ident.online.recording_window import Recorded
    cfg = load_config(bags["config"])
    topics = {cfg.joint_states_topic: ("joint_state", None),
              cfg.current_topic: (cfg.current_kind, cfg.current_interface)}
    rec = Recorded(None, None, "manual", 1, bag=bags["one"])
    node = identify_recorded(rec, cfg, demo_urdf, stream_above_messages=0)
    s = read_streams(bags["one"], topics)
    mem = identify_streams(s[cfg.joint_states_topic], s[cfg.current_topic], cfg, demo_urdf)
    assert "chosen from the data" in node.sync_summary
    assert node.sync_summary.splitlines()[-1] == mem.sync_summary.splitlines()[-1]
    assert not any("cannot choose" in w for w in node.warnings)
    np.testing.assert_allclose(node.result.values, mem.result.values, rtol=1e-9, atol=1e-12)
