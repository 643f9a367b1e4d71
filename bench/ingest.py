"""Throughput and memory of the bag -> identification path on a 7-joint arm.

A 7-joint arm (the Panda of example-robot-data, or a generated 7-joint chain when
that is not installed) follows a Fourier excitation in the MuJoCo simulator for
`--duration` seconds at 1 kHz. The run is written as a rosbag2 (``/joint_states`` at
500 Hz, ``/dynamic_joint_states`` with the ``current`` interface at 1 kHz, currents
from the inverse actuator model plus noise) in each storage. Each bag is then
ingested in a fresh process, stage by stage:

  read     bag reading + message deserialisation + conversion to arrays
  sync     synchronisation onto the 1 kHz grid + current -> effort
  process  low-pass, differentiation, decimation to 200 Hz (signals.process)
  regress  base regressor (estimation.build_problem, or RobotModel + BaseParameters)
  solve    WLS (estimation.wls, or numpy lstsq when estimation is absent)

and prints samples per second (1 kHz recording samples / wall time) and the peak
resident memory of that process (``VmHWM``; ``ru_maxrss`` elsewhere) next to its memory
after imports, model and base parameters. A scaling table ingests bags of several lengths to show how peak
memory grows with the recording length (linearly, not with its square).

    python bench/ingest.py [--duration 60] [--storages sqlite3 mcap] [--scaling 15 30 60]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PANDA_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))


def _maxrss_mb() -> float:
    """Peak resident memory of this process. /proc's VmHWM belongs to the current memory map;
    ru_maxrss survives fork + exec on Linux, so in a child it can report the parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # Linux: kB


def find_panda_urdf() -> str | None:
    try:
        import example_robot_data as erd   # noqa: F401
        from example_robot_data.robots_loader import getModelPath
        base = getModelPath("panda_description/urdf/panda.urdf")
        return os.path.join(base, "panda_description/urdf/panda.urdf")
    except Exception:
        pass
    for p in sys.path:
        hits = glob.glob(os.path.join(p, "cmeel.prefix/share/example-robot-data/robots/"
                                         "panda_description/urdf/panda.urdf"))
        if hits:
            return hits[0]
    return None


def seven_joint_chain() -> str:
    """A generated 7-joint arm (used when example-robot-data is not installed)."""
    axes = ["0 0 1", "0 1 0", "0 0 1", "0 1 0", "0 0 1", "0 1 0", "0 0 1"]
    parts = ['<?xml version="1.0"?>\n<robot name="chain7">',
             '<link name="link0"><inertial><mass value="4"/>'
             '<inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial></link>']
    for k in range(7):
        m = 3.0 - 0.35 * k
        parts.append(
            f'<joint name="joint{k + 1}" type="revolute"><parent link="link{k}"/><child link="link{k + 1}"/>'
            f'<origin xyz="0 0 {0.3 if k else 0.1}"/><axis xyz="{axes[k]}"/>'
            f'<limit lower="-2.5" upper="2.5" velocity="2.0" effort="80"/></joint>'
            f'<link name="link{k + 1}"><inertial><origin xyz="0.01 0.005 0.12"/><mass value="{m:.2f}"/>'
            f'<inertia ixx="{0.02 * m:.4f}" ixy="0.0005" ixz="0.001" iyy="{0.018 * m:.4f}" iyz="0.0004" '
            f'izz="{0.006 * m:.4f}"/></inertial></link>')
    parts.append("</robot>")
    return "\n".join(parts)


def arm_description() -> tuple[str, tuple[str, ...], str]:
    path = find_panda_urdf()
    if path:
        # MuJoCo cannot keep the finger's <mimic> equality once the fingers are welded.
        xml = re.sub(r"<mimic[^>]*/>", "", Path(path).read_text())
        return xml, PANDA_JOINTS, "Panda (example-robot-data)"
    xml = seven_joint_chain()
    return xml, tuple(f"joint{k}" for k in range(1, 8)), "generated 7-joint chain"


CONFIG_TEMPLATE = """robot_ident:
  ros__parameters:
    joints: [{joints}]
    current_source: dynamic_joint_states
    current_interface: current
    actuators:
{actuators}
"""


def write_config(path: Path, joints) -> None:
    lines = []
    for k, j in enumerate(joints):
        kt, gr = (0.12, 100.0) if k < 4 else (0.05, 80.0)
        lines.append(f"      {j}: {{type: rotary, torque_constant: {kt}, gear_ratio: {gr}, efficiency: 0.95, "
                     f"direction: {1 if k % 2 == 0 else -1}, current_offset: 0.01}}")
    path.write_text(CONFIG_TEMPLATE.format(joints=", ".join(joints), actuators="\n".join(lines)))


# ---------------------------------------------------------------------- ingest (child)
def ingest(bag: str, urdf: str, config: str, trace: bool) -> dict:
    """Runs in a fresh process: every stage of the bag -> estimate path, timed."""
    from robot_ident.model.base import BaseParameters
    from robot_ident.data.bag import read_streams
    from robot_ident.io.config import load_config
    from robot_ident.model.robot import RobotModel
    from robot_ident.data.signals import FilterOptions, process
    from robot_ident.data.sync import synchronise
    try:
        from robot_ident.estimation import build_problem, wls
    except ImportError:
        build_problem = wls = None
    cfg = load_config(config)
    model = RobotModel(Path(urdf).read_text(), cfg.joints)
    base = BaseParameters.from_model(model)
    if trace:
        import tracemalloc
        tracemalloc.start()
    rss0 = _maxrss_mb()
    out = {"rss_after_imports_mb": rss0, "stages": {}}

    def stage(name, fn):
        t0 = time.perf_counter()
        r = fn()
        out["stages"][name] = time.perf_counter() - t0
        if trace:
            out.setdefault("traced_peak_mb", {})[name] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.reset_peak()
        return r

    topics = {cfg.joint_states_topic: ("joint_state", None),
              cfg.current_topic: (cfg.current_kind, cfg.current_interface)}
    streams = stage("read", lambda: read_streams(bag, topics))

    def do_sync():
        res = synchronise(streams[cfg.joint_states_topic], streams[cfg.current_topic], cfg.joints,
                          options=cfg.sync, effort_field=cfg.effort_field)
        return [cfg.actuators.apply(r) for r in res.segments], res.report
    segments, report = stage("sync", do_sync)
    rec = max(segments, key=lambda r: r.n_samples)
    data = stage("process", lambda: process(rec, FilterOptions()))
    if build_problem is not None:
        problem = stage("regress", lambda: build_problem(model, base, data))
        result = stage("solve", lambda: wls(problem))
        pred = problem.W @ result.values
        y, rows = problem.y, problem.joint_of_row
        out["solver"] = "estimation.wls"
    else:
        W = stage("regress", lambda: base.regressor(model.regressor(data.q, data.qd, data.qdd)))
        y = data.effort.reshape(-1)
        x = stage("solve", lambda: np.linalg.lstsq(W, y, rcond=None)[0])
        pred = W @ x
        rows = np.tile(np.arange(model.n), data.n_samples)
        out["solver"] = "numpy.linalg.lstsq"
    out["rel_rms"] = [float(np.sqrt(np.mean((y - pred)[rows == k] ** 2)) / np.sqrt(np.mean(y[rows == k] ** 2)))
                      for k in range(model.n)]
    out["samples"] = rec.n_samples
    out["segments"] = len(segments)
    out["regressor_rows"] = int(data.n_samples * model.n)
    out["n_base"] = base.size
    out["peak_rss_mb"] = _maxrss_mb()
    out["dropped"] = {r.role: r.duplicates + r.nan_samples for r in report.streams.values()}
    return out


BLAS_THREADS = "1"


def run_child(bag, urdf, config, trace=False) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if BLAS_THREADS:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = BLAS_THREADS
    cmd = [sys.executable, __file__, "--ingest", str(bag), "--urdf", str(urdf), "--config", str(config)]
    if trace:
        cmd.append("--trace")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode:
        raise SystemExit(f"ingest failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------- main (parent)
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--storages", nargs="+", default=["sqlite3", "mcap"])
    ap.add_argument("--scaling", type=float, nargs="*", default=[15.0, 30.0, 60.0])
    ap.add_argument("--current-noise", type=float, default=0.005, help="A")
    ap.add_argument("--blas-threads", default="1",
                    help="OPENBLAS/OMP/MKL thread count in the ingest processes ('' = leave the environment); "
                         "multi-threaded OpenBLAS on a busy machine made the solve 20-300x slower here")
    ap.add_argument("--ingest", help=argparse.SUPPRESS)
    ap.add_argument("--urdf", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ingest:
        print(json.dumps(ingest(args.ingest, args.urdf, args.config, args.trace)))
        return

    global BLAS_THREADS
    BLAS_THREADS = args.blas_threads
    from robot_ident.excitation.fourier import FourierTrajectory
    from robot_ident.data.bag import write_bag_from_config
    from robot_ident.io.config import load_config
    from robot_ident.model.robot import RobotModel
    from robot_ident.sim.mujoco_arm import JointTruth, SimulatedArm

    xml, joints, label = arm_description()
    n = len(joints)
    work = Path(tempfile.mkdtemp(prefix="ri_ingest_"))
    urdf = work / "arm.urdf"
    urdf.write_text(xml)
    cfg_path = work / "config.yaml"
    write_config(cfg_path, joints)
    cfg = load_config(cfg_path)

    model = RobotModel(xml, joints)
    truth = JointTruth(np.full(n, 0.1), np.linspace(0.3, 0.8, n), np.linspace(0.2, 0.5, n),
                       np.linspace(-0.2, 0.2, n))
    traj = FourierTrajectory.random_within_limits(joints, model.limits.lower, model.limits.upper,
                                                  0.5 * model.limits.velocity, np.full(n, 3.0),
                                                  wf=0.2 * np.pi, harmonics=5, seed=3)
    durations = sorted(set([args.duration] + [d for d in args.scaling if d <= args.duration]))
    t0 = time.perf_counter()
    sim = SimulatedArm(xml, joints, truth).run(traj, duration=max(durations))
    t_sim = time.perf_counter() - t0
    rec = sim.recording
    print(f"arm: {label}, {n} joints; simulated {rec.duration:.0f} s at {rec.sample_rate:.0f} Hz "
          f"({rec.n_samples} samples) in {t_sim:.1f} s")
    print(f"bags: /joint_states 500 Hz (position, velocity), /dynamic_joint_states 1 kHz (position, current), "
          f"current noise {args.current_noise} A; BLAS threads in the ingest processes: "
          f"{BLAS_THREADS or os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; work folder {work}\n")

    def bag_for(duration, storage):
        path = work / f"bag_{storage}_{duration:g}s"
        if not path.exists():
            r = rec.slice_time(0.0, duration)
            t0 = time.perf_counter()
            write_bag_from_config(path, r, cfg, storage=storage, current_noise_std=args.current_noise)
            size = sum(f.stat().st_size for f in path.iterdir()) / 2**20
            print(f"  wrote {path.name}: {size:.1f} MiB in {time.perf_counter() - t0:.2f} s")
        return path

    results = {}
    for storage in args.storages:
        results[storage] = run_child(bag_for(args.duration, storage), urdf, cfg_path)
    print()
    stages = ["read", "sync", "process", "regress", "solve"]
    hdr = f"{'storage':<9}{'samples':>8}" + "".join(f"{s + ' [s]':>13}" for s in stages) + \
          f"{'read+sync [S/s]':>17}{'total [S/s]':>13}{'total [s]':>11}{'RSS before [MiB]':>18}{'peak RSS [MiB]':>16}"
    print(hdr)
    for storage, o in results.items():
        st = o["stages"]
        rs = st["read"] + st["sync"]
        tot = sum(st.values())
        print(f"{storage:<9}{o['samples']:>8d}" + "".join(f"{st[s]:>13.3f}" for s in stages) +
              f"{o['samples'] / rs:>17.0f}{o['samples'] / tot:>13.0f}{tot:>11.2f}{o['rss_after_imports_mb']:>18.0f}"
              f"{o['peak_rss_mb']:>16.0f}")
    o = next(iter(results.values()))
    print(f"\nsolver {o['solver']}: {o['regressor_rows']} regressor rows x {o['n_base']} base parameters; "
          f"relative residual RMS per joint: {', '.join(f'{v:.3f}' for v in o['rel_rms'])}")

    if args.scaling:
        print("\nmemory against recording length (sqlite3; traced = Python/numpy heap peak per stage, "
              "under tracemalloc):")
        print(f"{'length [s]':>10}{'samples':>9}{'peak RSS growth [MiB]':>23}"
              + "".join(f"{'traced ' + s:>16}" for s in stages))
        for d in durations:
            if d not in args.scaling and d != args.duration:
                continue
            o = run_child(bag_for(d, "sqlite3"), urdf, cfg_path, trace=True)
            tp = o["traced_peak_mb"]
            print(f"{d:>10g}{o['samples']:>9d}{o['peak_rss_mb'] - o['rss_after_imports_mb']:>23.0f}"
                  + "".join(f"{tp[s]:>16.1f}" for s in stages))


if __name__ == "__main__":
    main()
