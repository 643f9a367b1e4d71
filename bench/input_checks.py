"""What the input checks cost on the streamed path (estimation/recording_checks.py, input_checks.py).

Simulated demo-arm bags (MuJoCo, /joint_states 500 Hz + /dynamic_joint_states 1 kHz) of
increasing length are read with `process_bag` twice: without and with the
`InputChecks` observer. Printed per length: wall and CPU time of both runs, the
peak of Python-tracked memory (tracemalloc: numpy arrays included) of both runs, the
velocity ratios the checks hold, and whether the findings equal the in-memory
`check_input`'s (run only on the shorter bags: it holds the recording).

    python bench/input_checks.py [seconds ...]     (default: 30 120 480)
"""
from __future__ import annotations

import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from robot_ident.cli import main  # noqa: E402
from robot_ident.data.bag import read_recordings_from_config  # noqa: E402
from robot_ident.data.bag_processed import process_bag  # noqa: E402
from robot_ident.estimation.pipeline import identification_config  # noqa: E402
from robot_ident.estimation.input_checks import InputChecks, check_input  # noqa: E402
from robot_ident.excitation import FourierTrajectory  # noqa: E402
from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory  # noqa: E402
from robot_ident.io.config import load_config  # noqa: E402
from robot_ident.io.model_loading import load_model  # noqa: E402
from robot_ident.model.robot import RobotModel  # noqa: E402

CONFIG = ROOT / "config" / "demo_arm.yaml"
URDF = ROOT / "urdf" / "demo_arm.urdf"


def run(bag, cfg, icfg, model, observe: bool):
    obs = InputChecks(model, icfg.settings.method, cfg.effort_field) if observe else None
    tracemalloc.start()
    w, c = time.perf_counter(), time.process_time()
    pb = process_bag(bag, cfg, icfg.settings.filter, observer=obs)
    found = obs.findings(pb.report, cfg.joint_states_topic, cfg.current_topic) if observe else None
    w, c = time.perf_counter() - w, time.process_time() - c
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    pb.store.close()
    return w, c, peak, obs, found


def main_bench(lengths):
    tmp = Path(tempfile.mkdtemp(prefix="bench_input_checks_"))
    m = RobotModel(URDF)
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=3)
    save_trajectory(tmp / "traj.yaml", TrajectoryFile(traj))
    cfg = load_config(CONFIG)
    icfg = identification_config(dict(cfg.section("identification"), method="wls"))
    model = load_model(URDF, cfg, icfg)
    print(f"{'length':>7} {'without checks':>22} {'with checks':>22} {'peak traced MiB':>18} {'ratios':>7}  same as "
          "check_input")
    for secs in lengths:
        bag = tmp / f"bag_{secs}"
        reps = max(1, int(round(secs / 10.0)))       # the trajectory's period is 10 s
        assert main(["simulate", "--urdf", str(URDF), "--config", str(CONFIG), "--trajectory", str(tmp / "traj.yaml"),
                     "--output", str(bag), "--repetitions", str(reps), "--quiet"]) == 0
        w0, c0, p0, _, _ = run(bag, cfg, icfg, model, False)
        w1, c1, p1, obs, found = run(bag, cfg, icfg, model, True)
        same = "-"
        if secs <= 120:
            sync = read_recordings_from_config(bag, cfg)
            ref = check_input(model, sync, icfg.settings, cfg.joint_states_topic, cfg.current_topic,
                              cfg.effort_field).findings
            same = "yes" if ref == found else f"NO ({len(ref)} vs {len(found)} findings)"
        print(f"{10 * reps:>6}s {w0:>9.2f} s (CPU {c0:5.2f}) {w1:>9.2f} s (CPU {c1:5.2f}) "
              f"{p0 / 2**20:>8.1f} / {p1 / 2**20:<7.1f} {obs.recordings.kept_ratio_count():>7}  {same}")


if __name__ == "__main__":
    main_bench([float(a) for a in sys.argv[1:]] or [30.0, 120.0, 480.0])
