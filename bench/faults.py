"""What the fault handling of issues 13 and 31 buys, in parameter error.

One 20 s simulated bag of the demo arm (two 10 s periods of a random Fourier
excitation); each fault is injected into its arrays, and the identification pipeline
(estimation/flow.py on the streams in memory: synchronise, currents -> efforts,
plausibility checks, WLS or robust, 20 % held out) runs with and without the protection
("checks off": the checks run but do not refuse, as with --force). Printed: the median
relative error of the well-determined base parameters (relative std < 5 %) against the
simulator's truth, and what the checks said.

    python bench/faults.py
"""
from __future__ import annotations

import copy
import re
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from robot_ident.cli import main  # noqa: E402
from robot_ident.data.bag import read_streams  # noqa: E402
from robot_ident.data.joint_stream import JointStream  # noqa: E402
from robot_ident.data.processing import StreamsInput  # noqa: E402
from robot_ident.data.sync import SyncOptions  # noqa: E402
from robot_ident.errors import RobotIdentError  # noqa: E402
from robot_ident.estimation.flow import identify_sources  # noqa: E402
from robot_ident.estimation.pipeline import base_parameters, identification_config  # noqa: E402
from robot_ident.excitation import FourierTrajectory  # noqa: E402
from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory  # noqa: E402
from robot_ident.io.config import load_config  # noqa: E402
from robot_ident.io.model_loading import load_model  # noqa: E402
from robot_ident.model.robot import RobotModel  # noqa: E402

CONFIG = ROOT / "config" / "demo_arm.yaml"
URDF = ROOT / "urdf" / "demo_arm.urdf"
JS, DJS = "/joint_states", "/dynamic_joint_states"


def restamp(s, fn):
    return JointStream(s.topic, fn(s.stamps.copy()), s.names, s.fields, s.received)


def main_bench():
    tmp = Path(tempfile.mkdtemp(prefix="bench_faults_"))
    m = RobotModel(URDF)
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=3)
    save_trajectory(tmp / "traj.yaml", TrajectoryFile(traj))
    assert main(["simulate", "--urdf", str(URDF), "--config", str(CONFIG), "--trajectory", str(tmp / "traj.yaml"),
                 "--output", str(tmp / "bag"), "--repetitions", "2", "--quiet"]) == 0
    truth = yaml.safe_load((tmp / "bag" / "robot_ident_truth.yaml").read_text())["parameters"]
    streams = read_streams(tmp / "bag", {JS: ("joint_state", None), DJS: ("dynamic_joint_state", "current")})
    cfg = load_config(CONFIG)
    icfg = identification_config(dict(cfg.section("identification"), method="wls"))
    model = load_model(URDF, cfg, icfg)
    base = base_parameters(model, icfg.settings)

    def run(st, cu, method="wls", checks=True, options=None):
        """The one pipeline (estimation/flow.py) on the streams in memory, the config's 20 %
        held out; `checks` False: the input checks run but do not refuse (--force)."""
        icfg = identification_config(dict(cfg.section("identification"), method=method))
        c = cfg if options is None else replace(cfg, sync=options)
        t0 = time.perf_counter()
        try:
            o = identify_sources([StreamsInput(st, cu, "faults")], c, icfg, model, force=not checks, plots=False)
        except RobotIdentError as exc:
            return f"exit 2: {str(exc)[:110]}", time.perf_counter() - t0
        r = o.result
        true = base.project(np.array([truth[n] for n in base.standard_names]))
        good = r.relative_std < 5
        missed = [f["joint"] for f in r.quality.get("misses_structure") or []]
        ok = ("" if r.quality["good"] else "; NOT A GOOD MODEL") + (
            f" (misses structure on {', '.join(missed)})" if missed else "")
        if not good.any():
            return f"no well-determined base parameter{ok}", time.perf_counter() - t0
        err = float(np.median(np.abs(r.values - true)[good] / np.abs(true[good])))
        lag = re.search(r"lag between the topics: ([+-][0-9.]+) ms .*; corrected", o.summary)
        extra = f"; lag found {float(lag.group(1)):+.2f} ms" if lag else ""
        return f"median error {100 * err:.3g} %{extra}{ok}", time.perf_counter() - t0

    S = lambda: copy.deepcopy(streams)  # noqa: E731
    no_lag = SyncOptions(lag_threshold_s=10.0, max_lag_s=0.05)

    def cur(fn):
        s = S()
        return s[JS], fn(s[DJS])

    def ntp(s, frac=0.9, step=0.3):
        return restamp(s, lambda t: np.concatenate([t[:int(frac * t.size)], t[int(frac * t.size):] - int(step * 1e9)]))

    def spikes(s):
        rng = np.random.default_rng(1)
        vals = [np.asarray(v, float).copy() for v in s.fields["current"]]
        for k in rng.choice(len(s), int(0.005 * len(s)), replace=False):
            vals[k][rng.integers(len(vals[k]))] += 1e4
        return JointStream(s.topic, s.stamps, s.names, dict(s.fields, current=vals), s.received)

    def on_joints(s, fn):
        """The current stream with fn(values, names) applied to every message's values."""
        names = [s.names] * len(s) if isinstance(s.names[0], str) else s.names
        vals = [fn(np.asarray(v, float).copy(), list(n)) for v, n in zip(s.fields["current"], names)]
        return JointStream(s.topic, s.stamps, s.names, dict(s.fields, current=vals), s.received)

    def scale(joint, factor):
        def fn(v, names):
            v[names.index(joint)] *= factor
            return v
        return lambda s: on_joints(s, fn)

    def cross(a, b):
        def fn(v, names):
            i, k = names.index(a), names.index(b)
            v[i], v[k] = v[k], v[i]
            return v
        return lambda s: on_joints(s, fn)

    cases = [
        ("clean", lambda: (S()[JS], S()[DJS]), {}),
        ("20 ms offset, lag correction off", lambda: cur(lambda s: restamp(s, lambda t: t + int(0.02e9))),
         {"options": no_lag}),
        ("20 ms offset, corrected", lambda: cur(lambda s: restamp(s, lambda t: t + int(0.02e9))), {}),
        ("0.3 s clock step on /joint_states at 90 %", lambda: (ntp(S()[JS]), S()[DJS]), {}),
        ("0.3 s clock step on both topics at 50 %", lambda: (ntp(S()[JS], 0.5), ntp(S()[DJS], 0.5)), {}),
        ("current spikes 1e4 A in 0.5 %, wls, checks off", lambda: cur(spikes), {"checks": False}),
        ("current spikes, wls, checks on", lambda: cur(spikes), {}),
        ("current spikes, robust", lambda: cur(spikes), {"method": "robust"}),
        ("torque constant 1000 x, checks off", lambda: cur(lambda s: JointStream(
            s.topic, s.stamps, s.names, dict(s.fields, current=[np.asarray(v) * 1000 for v in s.fields["current"]]),
            s.received)), {"checks": False}),
        ("torque constant 1000 x, checks on", lambda: cur(lambda s: JointStream(
            s.topic, s.stamps, s.names, dict(s.fields, current=[np.asarray(v) * 1000 for v in s.fields["current"]]),
            s.received)), {}),
        # structure the input checks cannot see (estimation/structure_check.py)
        ("wrist_2 torque constant 1.3x", lambda: cur(scale("wrist_2", 1.3)), {}),
        ("shoulder_lift torque constant 1.3x", lambda: cur(scale("shoulder_lift", 1.3)), {}),
        ("current channels of wrist_1 and wrist_2 crossed", lambda: cur(cross("wrist_1", "wrist_2")),
         {"checks": False}),
    ]
    print(f"{'fault':<48} outcome")
    for name, make, kw in cases:
        st, cu = make()
        outcome, dt = run(st, cu, **kw)
        print(f"{name:<48} {outcome} ({dt:.1f} s)")


if __name__ == "__main__":
    main_bench()
