"""What the input checks cost on the one pipeline's read (estimation/input_checks.py,
recording_checks.py, data/processing.py).

Simulated demo-arm bags (MuJoCo, /joint_states 500 Hz + /dynamic_joint_states 1 kHz) of
increasing length are read with `process_input` twice: without and with the
`InputChecks` observer (and the gain check on the processed samples, as
estimation/flow.py runs it). Printed per length: wall and CPU time of both runs, the
peak of Python-tracked memory (tracemalloc: numpy arrays included) of both runs, the
velocity ratios the checks hold, and whether the findings equal those of the same
messages given in memory (`StreamsInput`: synchronised in one call, as the node's
window; run only on the shorter bags: it holds the recording).

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
from robot_ident.data.bag import read_streams  # noqa: E402
from robot_ident.data.processing import StreamsInput, input_label, process_input  # noqa: E402
from robot_ident.estimation.compressed import CHUNK_SAMPLES  # noqa: E402
from robot_ident.estimation.input_checks import InputChecks  # noqa: E402
from robot_ident.estimation.pipeline import identification_config  # noqa: E402
from robot_ident.excitation import FourierTrajectory  # noqa: E402
from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory  # noqa: E402
from robot_ident.io.config import load_config  # noqa: E402
from robot_ident.io.model_loading import load_model  # noqa: E402
from robot_ident.model.robot import RobotModel  # noqa: E402

CONFIG = ROOT / "config" / "demo_arm.yaml"
URDF = ROOT / "urdf" / "demo_arm.urdf"


def run(source, cfg, icfg, model, observe: bool):
    """(wall, CPU, peak traced bytes, InputChecks or None, findings or None) of reading
    `source` (a bag path or a `StreamsInput`) through the one pipeline."""
    checks = InputChecks(model, icfg.settings.method, cfg.effort_field,
                         velocity=icfg.settings.measured_velocity) if observe else None
    tracemalloc.start()
    w, c = time.perf_counter(), time.process_time()
    pb = process_input(source, cfg, lambda _rate: [icfg.settings.filter], joints=model.joint_names,
                       observer=checks.observer(input_label(source)) if observe else None)
    found = None
    if observe:
        for a in range(0, pb.n_samples, CHUNK_SAMPLES):     # the gain check on every processed sample
            checks.gains.add(pb.store.read(a, a + CHUNK_SAMPLES))
        found = checks.findings(pb, cfg.joint_states_topic, cfg.current_topic)
    w, c = time.perf_counter() - w, time.process_time() - c
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    pb.close()
    return w, c, peak, checks, found


def main_bench(lengths):
    tmp = Path(tempfile.mkdtemp(prefix="bench_input_checks_"))
    m = RobotModel(URDF)
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=3)
    save_trajectory(tmp / "traj.yaml", TrajectoryFile(traj))
    cfg = load_config(CONFIG)
    icfg = identification_config(dict(cfg.section("identification"), method="wls"))
    model = load_model(URDF, cfg, icfg)
    topics = {cfg.joint_states_topic: ("joint_state", None),
              cfg.current_topic: (cfg.current_kind, cfg.current_interface)}
    print(f"{'length':>7} {'without checks':>22} {'with checks':>22} {'peak traced MiB':>18} {'ratios':>7}  same as "
          "in memory")
    for secs in lengths:
        bag = tmp / f"bag_{secs}"
        reps = max(1, int(round(secs / 10.0)))       # the trajectory's period is 10 s
        assert main(["simulate", "--urdf", str(URDF), "--config", str(CONFIG), "--trajectory", str(tmp / "traj.yaml"),
                     "--output", str(bag), "--repetitions", str(reps), "--quiet"]) == 0
        w0, c0, p0, _, _ = run(bag, cfg, icfg, model, False)
        w1, c1, p1, checks, found = run(bag, cfg, icfg, model, True)
        same = "-"
        if secs <= 120:
            streams = read_streams(bag, topics)
            mem = StreamsInput(streams[cfg.joint_states_topic], streams[cfg.current_topic], str(bag))
            ref = run(mem, cfg, icfg, model, True)[4]
            same = "yes" if ref == found else f"NO ({len(ref)} vs {len(found)} findings)"
        ratios = sum(obs.checks.kept_ratio_count() for _, obs in checks.inputs)
        print(f"{10 * reps:>6}s {w0:>9.2f} s (CPU {c0:5.2f}) {w1:>9.2f} s (CPU {c1:5.2f}) "
              f"{p0 / 2**20:>8.1f} / {p1 / 2**20:<7.1f} {ratios:>7}  {same}")


if __name__ == "__main__":
    main_bench([float(a) for a in sys.argv[1:]] or [30.0, 120.0, 480.0])
