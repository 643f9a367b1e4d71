"""A validation recording that retraces the identification's motion is named (issue 28).

FloBaRoID's KUKA runs 1 and 2 are one trajectory twice: validated on run 2, the unconstrained
fit looked 1.66x better than the physically consistent one; on run 3, another trajectory, it
is 2-5x worse. A repeat measures repeatability, not the model on new motion: `identify
--validate-bag` and `validate` say so in a note; another trajectory gets no note."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_ident.cli import main
from robot_ident.estimation.retrace import NEAR, retrace_note, retraced_fraction
from robot_ident.excitation import FourierTrajectory
from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory
from robot_ident.model.robot import RobotModel

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "demo_arm.yaml"


def _path(t, phase=0.0):
    w = np.array([1.0, 1.7, 2.3])
    q = np.sin(np.outer(t, w) + phase + np.array([0.0, 1.0, 2.0]))
    return q, np.cos(np.outer(t, w) + phase + np.array([0.0, 1.0, 2.0])) * w


def test_a_repeat_retraces_at_any_stride_and_another_path_does_not():
    rng = np.random.default_rng(0)
    t = np.arange(0.0, 20.0, 0.001)
    q, qd = _path(t)
    tv = np.arange(0.0003, 20.0, 0.005)              # another sampling phase and rate
    vq, vqd = _path(tv)
    vq, vqd = vq + rng.normal(0, 1e-3, vq.shape), vqd + rng.normal(0, 1e-3, vqd.shape)
    for stride in (1, 10, 100):                       # 0.1 s between stored samples: the polyline holds
        assert retraced_fraction(t[::stride], q[::stride], qd[::stride], vq, vqd) > 0.95, stride
    oq, oqd = _path(tv, phase=0.7)
    assert retraced_fraction(t[::10], q[::10], qd[::10], oq, oqd) < 0.05
    # half of it new: the fraction says so; a gap in the identification is not a segment
    half = tv < 10.0
    mixed = retraced_fraction(t, q, qd, np.where(half[:, None], vq, oq), np.where(half[:, None], vqd, oqd))
    assert 0.45 < mixed < 0.55
    gap = (t < 5.0) | (t > 15.0)
    assert retraced_fraction(t[gap], q[gap], qd[gap], vq[(tv > 6) & (tv < 14)], vqd[(tv > 6) & (tv < 14)]) < 0.05
    # parked: at rest at a pose the identification passed is no repeat of its motion
    assert retraced_fraction(t, q, qd, np.repeat(q[5000:5001], 200, axis=0), np.zeros((200, 3))) == 0.0
    # not finite rows are left out; one moving joint alone (a 2-D state) is never called a repeat
    bad = vq.copy()
    bad[::7] = np.nan
    assert retraced_fraction(t, q, qd, bad, vqd) > 0.95
    assert retraced_fraction(t, q[:, :1], qd[:, :1], vq[:, :1], vqd[:, :1]) == 0.0
    assert retrace_note("b", 0.4) == [] and f"{100 * NEAR:g} %" in retrace_note("b", 0.97)[0]


def cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args] + ["--quiet"])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def bags(tmp_path_factory, demo_urdf):
    """The demo arm: trajectory A twice (other noise), and trajectory B."""
    d = tmp_path_factory.mktemp("retrace")
    m = RobotModel(demo_urdf)
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["robot_ident"]["ros__parameters"]["simulation"]["seed"] = 7
    other_noise = d / "seed7.yaml"
    other_noise.write_text(yaml.safe_dump(cfg))
    out = {}
    for name, seed, config in (("a", 3, CONFIG), ("a_again", 3, other_noise), ("b", 5, CONFIG)):
        traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper,
                                                      m.limits.velocity, np.array([6.0, 6, 8, 10, 10, 10]), seed=seed)
        save_trajectory(d / f"{name}.yaml", TrajectoryFile(traj))
        out[name] = d / name
        code, _, err = cli("simulate", "--urdf", demo_urdf, "--config", config, "--trajectory", d / f"{name}.yaml",
                           "--output", out[name])
        assert code == 0, err
    out["dir"] = d
    return out


def test_identify_and_validate_name_a_repeat_and_not_another_trajectory(bags, demo_urdf):
    d = bags["dir"]
    notes = {}
    for v in ("a_again", "b"):
        plots = ["--no-plots"] if v == "a_again" else []   # r_b's samples.npz: 3000 samples (16 without plots)
        code, _, err = cli("identify", "--bag", bags["a"], "--urdf", demo_urdf, "--config", CONFIG, "--output",
                           d / f"r_{v}", "--method", "wls", "--validate-bag", bags[v], *plots)
        assert code == 0, err
        notes[v] = [ln for ln in err.splitlines() if "retraces the identification's motion" in ln]
        stored = yaml.safe_load((d / f"r_{v}" / "result.yaml").read_text())["input_checks"]["warnings"]
        assert [w for w in stored if "retraces" in w] == notes[v]
    assert len(notes["a_again"]) == 1 and str(bags["a_again"]) in notes["a_again"][0], notes
    assert notes["b"] == [], notes
    for v, expected in (("a_again", 1), ("b", 0)):
        code, _, err = cli("validate", "--bag", bags[v], "--result", d / "r_b", "--output", d / f"v_{v}.yaml")
        assert code == 0, err
        doc = yaml.safe_load((d / f"v_{v}.yaml").read_text())
        assert len([w for w in doc["warnings"] if "retraces the identification's motion" in w]) == expected, doc
