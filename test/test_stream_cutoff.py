"""The filter cutoff chosen from the data (estimation/auto_cutoff.py) by the one pipeline
(estimation/flow.py), on real rosbag2 bags of the simulated demo arm: a bag read in
chunks and the same bag synchronised in one call (the road of a bag played in a loop)
give the same candidates, choice, scores, per-joint RMS and parameters, with one segment
and with gaps, with and without a hold-out; the held-out samples and a validation
recording take no part in the choice; when the data cannot decide, the default cutoff
and the note; ``robot-ident identify`` records the choice."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rosbags")

from robot_ident.cli import main  # noqa: E402
from robot_ident.data import stream_sync  # noqa: E402
from robot_ident.data.bag import read_recordings_from_config, write_bag_from_config  # noqa: E402
from robot_ident.data.stream_sync import NeedsWholeRecording  # noqa: E402
from robot_ident.errors import SignalError  # noqa: E402
from robot_ident.estimation import auto_cutoff  # noqa: E402
from robot_ident.io.config import load_config  # noqa: E402
from robot_ident.model.robot import RobotModel  # noqa: E402
from robot_ident.offline.inputs import identify_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "demo_arm.yaml"


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.abs(b)))


def auto_config(path: Path) -> Path:
    """The demo config without a filter cutoff (chosen from the data), method wls."""
    doc = yaml.safe_load(CONFIG.read_text())
    ident = doc["robot_ident"]["ros__parameters"]["identification"]
    ident["method"] = "wls"
    del ident["filter"]["cutoff_hz"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def bags(tmp_path_factory, demo_urdf):
    """A 30 s simulated bag (sqlite3), and the same motion in mcap with two gaps that
    cut it into three segments, the first too short to process."""
    from dataclasses import replace

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
    write_bag_from_config(d / "gaps", replace(rec, t=t), cfg, storage="mcap")
    assert len(read_recordings_from_config(d / "gaps", cfg).segments) == 3
    return {"dir": d, "config": cfg_path, "one": d / "one", "gaps": d / "gaps"}


@pytest.fixture
def choices(monkeypatch):
    """Every cross-validated choice made, with the samples allowed to take part."""
    seen = []
    real = auto_cutoff.cross_validate_cutoff

    def spy(model, stores, cands, settings, base, allowed, *args, **kwargs):
        choice = real(model, stores, cands, settings, base, allowed, *args, **kwargs)
        seen.append((choice, np.array(allowed, bool)))
        return choice
    monkeypatch.setattr(auto_cutoff, "cross_validate_cutoff", spy)
    return seen


def identify(bag, urdf, config, **kw):
    return identify_inputs([bag], urdf, config, None, plots=False, warn=lambda _: None, **kw)


@pytest.mark.parametrize("which,holdout", [("one", 0.2), ("one", 0.0), ("gaps", 0.2)])
def test_the_choice_is_the_same_read_in_chunks_or_whole(bags, demo_urdf, which, holdout, choices, monkeypatch):
    a = identify(bags[which], demo_urdf, bags["config"], holdout=holdout)
    with monkeypatch.context() as m:
        def feed(self, states, efforts):
            raise NeedsWholeRecording("forced by the test")
        m.setattr(stream_sync.ChunkedSync, "feed", feed)
        b = identify(bags[which], demo_urdf, bags["config"], holdout=holdout)
    (got, allowed), (ref, allowed_b) = choices
    assert got.candidates == ref.candidates == auto_cutoff.CANDIDATES_HZ
    assert got.cutoff_hz == ref.cutoff_hz == a.settings.filter.cutoff_hz == b.settings.filter.cutoff_hz
    assert rel(got.scores, ref.scores) < 1e-9
    assert max(rel(x, y) for x, y in zip(got.rms, ref.rms)) < 1e-9
    assert got.summary() == ref.summary() and got.summary() in a.summary and "chosen from the data" in a.summary
    assert rel(a.result.values, b.result.values) < 1e-9
    # the held-out tail takes no part in the choice
    assert np.array_equal(allowed, allowed_b)
    cut = int(round((1.0 - holdout) * allowed.size))
    assert allowed[:cut].all() and not allowed[cut:].any()
    assert (a.validation is None) == (holdout == 0.0)
    if which == "gaps":     # the first segment is skipped, on both roads
        for o in (a, b):
            assert o.summary.count("skipped") == 1, o.summary


def test_a_validation_recording_takes_no_part_in_the_choice(bags, demo_urdf, choices):
    """With a validation recording nothing is held out of the identification input: every
    one of its samples takes part in the choice; the recording is validated with the
    cutoff chosen."""
    o = identify(bags["one"], demo_urdf, bags["config"], validate_inputs=[bags["gaps"]])
    ((choice, allowed),) = choices
    assert allowed.all() and allowed.size == o.result.n_samples
    assert o.validation is not None and o.validation.n_samples.min() > 0
    assert choice.summary() in o.summary and f"validate {bags['gaps']}" in o.summary


def test_data_that_cannot_decide_keep_the_default_cutoff(bags, demo_urdf, monkeypatch):
    """The cross-validation fails (e.g. too few moving samples): the note says why, and the
    identification is that of the default cutoff set in the config (its samples kept from
    the same read)."""
    def cannot(*args, **kwargs):
        raise SignalError("too few moving samples to cross-validate the filter cutoff")
    monkeypatch.setattr(auto_cutoff, "cross_validate_cutoff", cannot)
    a = identify(bags["one"], demo_urdf, bags["config"])
    assert a.settings.filter.cutoff_hz == 20.0
    assert ("filter cutoff 20 Hz (default): it could not be chosen from the data: too few moving samples"
            in a.summary)
    b = identify(bags["one"], demo_urdf, CONFIG, method="wls")          # 20 Hz set in the config
    assert "chosen" not in b.summary
    assert rel(a.result.values, b.result.values) < 1e-12
    assert np.allclose(a.validation.rms, b.validation.rms, rtol=1e-12)


def test_identify_records_the_cutoff_chosen(bags, demo_urdf, tmp_path):
    """`robot-ident identify` with no cutoff in the config chooses it and records it with its
    note in result.yaml; ``--cutoff auto`` overrides a configured cutoff the same way."""
    common = ["--bag", str(bags["one"]), "--urdf", str(demo_urdf), "--no-plots", "--quiet"]
    assert main(["identify", *common, "--config", str(bags["config"]), "--output", str(tmp_path / "a")]) == 0
    a = yaml.safe_load((tmp_path / "a" / "result.yaml").read_text())["source"]
    assert a["filter_cutoff_chosen_from_data"] is True and a["filter_cutoff_hz"] in auto_cutoff.CANDIDATES_HZ
    assert a["filter_cutoff_note"].startswith(f"filter cutoff {a['filter_cutoff_hz']:g} Hz chosen from the data")
    assert main(["identify", *common, "--config", str(CONFIG), "--method", "wls", "--cutoff", "auto",
                 "--output", str(tmp_path / "c")]) == 0
    c = yaml.safe_load((tmp_path / "c" / "result.yaml").read_text())["source"]
    assert c["filter_cutoff_chosen_from_data"] is True
    assert c["filter_cutoff_hz"] == a["filter_cutoff_hz"] and c["filter_cutoff_note"] == a["filter_cutoff_note"]


def test_candidates_scored_in_forked_workers_give_the_same_choice(bags, demo_urdf, monkeypatch):
    """The candidates scored side by side in forked processes (one and two workers beside
    this one) give the very scores of one process scoring them in turn."""
    from robot_ident.util import parallel
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 3)      # forked even beside pytest-xdist's threads
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    got = []
    real = auto_cutoff.cross_validate_cutoff

    def three_ways(*args, **kwargs):
        kwargs.pop("workers", None)
        runs = [real(*args, workers=w, **kwargs) for w in (0, 1, 2)]
        got.append(runs)
        return runs[0]
    monkeypatch.setattr(auto_cutoff, "cross_validate_cutoff", three_ways)
    identify(bags["one"], demo_urdf, bags["config"], holdout=0.2)
    (serial, one, two), = got
    for other in (one, two):
        assert other.cutoff_hz == serial.cutoff_hz and other.summary() == serial.summary()
        assert np.array_equal(other.scores, serial.scores) and np.array_equal(np.array(other.rms), np.array(serial.rms))


def test_the_bag_read_in_a_forked_process_and_filtered_in_threads_gives_the_same_result(bags, demo_urdf,
                                                                                       monkeypatch, tmp_path):
    """Reading the bag in a forked process and running the nine candidates' filters side by
    side (util/parallel.py) changes no digit of the choice or the estimate."""
    from robot_ident.data import processing
    from robot_ident.util import parallel
    readers = tmp_path / "readers"          # the process ids that read batches
    real = processing._counted_chunks

    def spy(*args):
        for item in real(*args):
            with open(readers, "a") as f:
                f.write(f"{os.getpid()}\n")
            yield item
    monkeypatch.setattr(processing, "_counted_chunks", spy)
    with monkeypatch.context() as m:
        m.setattr(parallel, "usable_cpus", lambda: 1)
        serial = identify(bags["one"], demo_urdf, bags["config"], holdout=0.2)
    assert set(readers.read_text().split()) == {str(os.getpid())}
    readers.unlink()
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    side = identify(bags["one"], demo_urdf, bags["config"], holdout=0.2)
    assert str(os.getpid()) not in readers.read_text().split()
    assert serial.summary == side.summary and "chosen from the data" in side.summary
    assert np.array_equal(serial.result.values, side.result.values)
    assert np.array_equal(serial.validation.rms, side.validation.rms)


def test_a_worker_s_error_reaches_the_caller_and_no_fork_beside_threads_or_ros(monkeypatch):
    """An error in a forked worker is raised here, a worker that dies is named; no worker is
    forked in a process that runs another thread or has ROS loaded (the identification
    node), where a fork is unsafe; with no process to be had, every candidate is scored here."""
    import multiprocessing
    import os
    import sys
    import threading

    from robot_ident.util import parallel
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 3)      # forked even beside pytest-xdist's threads
    monkeypatch.setattr(parallel, "can_fork", lambda: True)

    def score(k, report):
        if k == 1:
            raise ValueError("candidate 1 fails")
        return k, None
    with pytest.raises(ValueError, match="candidate 1 fails"):
        auto_cutoff._score_candidates(score, 3, 1)

    def dies(k, report):
        if k == 1:
            os._exit(3)
        return k, None
    with pytest.raises(RuntimeError, match=r"candidates 1 ended without an answer \(exit code 3\)"):
        auto_cutoff._score_candidates(dies, 3, 1)

    def no_process(self):
        raise OSError("fork: out of memory")
    with monkeypatch.context() as m:       # no process to be had: every candidate scored here
        m.setattr(multiprocessing.get_context("fork").Process, "start", no_process)
        assert auto_cutoff._score_candidates(lambda k, r: (k, None), 4, 2) == [(k, None) for k in range(4)]
    assert auto_cutoff._score_candidates(lambda k, r: (k, None), 4, 1) == [(k, None) for k in range(4)]
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert auto_cutoff.candidate_workers(9) == 0
    finally:
        stop.set()
        other.join()
    monkeypatch.setitem(sys.modules, "rclpy", object())
    assert auto_cutoff.candidate_workers(9) == 0
