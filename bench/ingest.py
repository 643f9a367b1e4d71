"""Ingest: bag read rate, end-to-end `robot-ident identify` time and peak memory against
the recording's length, for the demo arm (6 joints) and the Panda (7 joints).

Each arm follows a Fourier excitation in the MuJoCo simulator for the longest duration
at 1 kHz; the first 60 / 300 / 600 s are written as rosbag2 folders (``/joint_states``
500 Hz with positions and velocities, ``/dynamic_joint_states`` 1 kHz with the
``current`` interface, currents from the inverse actuator model plus noise). Then, each
in a fresh process:

  read      `data.bag_stream.bag_chunks` over both topics (read + batch CDR decoding into
            arrays), messages per second, sqlite3 and mcap;
  identify  the whole program, as ``robot-ident identify --no-plots`` runs it (the one
            pipeline, estimation/flow.py: the bag read in bounded memory) with ``wls`` and
            ``physical`` (sqlite3 bag), with the config's cutoff (``set``) and with a copy
            of the config without ``identification.filter.cutoff_hz`` (``auto``: the
            cutoff chosen from the data, the recording read once through every
            candidate's filter): wall time of the process (imports included), its CPU time
            (user + system, its forked helpers included -- the bag's reader, the
            cross-validation's workers, the gain check, the WLS covariance: util/parallel.py --
            what it costs on an idle core; on a shared machine the wall time is an upper
            bound), its peak resident memory (VmHWM), the largest helper's (pages it shares
            with the main process included: on the 300 s demo bag about 47 of a
            cross-validation worker's 171 MiB are its own) and, for ``auto``, the cutoff chosen.

Peak memory should not grow with the recording: each peak is compared with the shortest
recording's for the same method and cutoff. ``--cutoffs set`` or ``--cutoffs auto``
measures one of the two (``--auto-cutoff`` is ``--cutoffs auto``).

    python bench/ingest.py [--durations 60 300 600] [--arms demo panda] [--methods wls physical]
                           [--cutoffs set auto] [--auto-cutoff]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
        import example_robot_data as erd  # noqa: F401
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
    identification:
      filter: {{cutoff_hz: 20.0}}     # set (--cutoffs auto identifies with a copy without it)
"""


def auto_cutoff_config(src: Path, dst: Path) -> Path:
    """A copy of the config `src` without a filter cutoff (chosen from the data)."""
    import yaml
    doc = yaml.safe_load(src.read_text())
    ident = next(iter(doc.values()))["ros__parameters"].setdefault("identification", {})
    (ident.get("filter") or {}).pop("cutoff_hz", None)
    dst.write_text(yaml.safe_dump(doc, sort_keys=False))
    return dst


def write_config(path: Path, joints) -> None:
    lines = []
    for k, j in enumerate(joints):
        kt, gr = (0.12, 100.0) if k < 4 else (0.05, 80.0)
        lines.append(f"      {j}: {{type: rotary, torque_constant: {kt}, gear_ratio: {gr}, efficiency: 0.95, "
                     f"direction: {1 if k % 2 == 0 else -1}, current_offset: 0.01}}")
    path.write_text(CONFIG_TEMPLATE.format(joints=", ".join(joints), actuators="\n".join(lines)))


# ----------------------------------------------------------------------- children
def child_read(bag: str, config: str) -> dict:
    from robot_ident.data.bag_stream import bag_chunks
    from robot_ident.io.config import load_config
    cfg = load_config(config)
    topics = {cfg.joint_states_topic: ("joint_state", None),
              cfg.current_topic: (cfg.current_kind, cfg.current_interface)}
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for chunk in bag_chunks(bag, topics):
        n += sum(len(s) for s in chunk.values())
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"messages": n, "seconds": dt, "rate": n / dt, "cpu_rate": n / cpu, "peak_rss_mb": _maxrss_mb()}


def child_identify(bag: str, urdf: str, config: str, method: str, out: str) -> dict:
    # the program as a user runs it: `cli.run` (its BLAS setting), before anything loads numpy
    from robot_ident.cli import run
    sys.argv = ["robot-ident", "identify", "--bag", bag, "--urdf", urdf, "--config", config, "--output", out,
                "--method", method, "--no-plots", "--quiet"]
    code = run()
    if code:
        raise SystemExit(code)
    peak = _maxrss_mb()          # before reading the result back
    # the forked helpers (util/parallel.py, estimation/auto_cutoff.py): the largest one's
    # peak, the pages it shares with this process included
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    return {"peak_rss_mb": peak, "worker_rss_mb": workers}


def chosen_cutoff(out: Path) -> tuple[float | None, bool]:
    """The result folder's filter cutoff and whether it was chosen from the data (read here,
    not in the timed process: loading result.yaml took 0.08 s of it)."""
    import yaml
    src = yaml.safe_load((out / "result.yaml").read_text()).get("source", {})
    return src.get("filter_cutoff_hz"), bool(src.get("filter_cutoff_chosen_from_data"))


def run_child(*args) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, __file__, "--child", *map(str, args)]
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["wall_s"] = wall
    out["cpu_s"] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return out


# ---------------------------------------------------------------------- main (parent)
def demo_arm() -> tuple[str, tuple[str, ...], str, Path]:
    from robot_ident.io.config import load_config
    cfg = ROOT / "config" / "demo_arm.yaml"
    return (ROOT / "urdf" / "demo_arm.urdf").read_text(), tuple(load_config(cfg).joints), "demo arm", cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--durations", type=float, nargs="+", default=[60.0, 300.0, 600.0])
    ap.add_argument("--arms", nargs="+", default=["demo", "panda"], choices=["demo", "panda"])
    ap.add_argument("--methods", nargs="+", default=["wls", "physical"])
    ap.add_argument("--storages", nargs="+", default=["sqlite3", "mcap"])
    ap.add_argument("--current-noise", type=float, default=0.005, help="A")
    ap.add_argument("--cutoffs", nargs="+", default=["set", "auto"], choices=["set", "auto"],
                    help="identify with the config's cutoff (set) and/or with it removed (auto: chosen from the data)")
    ap.add_argument("--auto-cutoff", action="store_true", help="the same as --cutoffs auto")
    ap.add_argument("--work", help="folder for the bags (default: a new temporary folder)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, rest = args.child[0], args.child[1:]
        if kind == "read":
            print(json.dumps(child_read(*rest)))
        else:
            print(json.dumps(child_identify(*rest)))
        return
    if args.auto_cutoff:
        args.cutoffs = ["auto"]

    import numpy as np

    from robot_ident.data.bag import write_bag_from_config
    from robot_ident.excitation.fourier import FourierTrajectory
    from robot_ident.io.config import load_config
    from robot_ident.model.robot import RobotModel
    from robot_ident.sim.mujoco_arm import JointTruth, SimNoise, SimulatedArm

    work = Path(args.work or tempfile.mkdtemp(prefix="ri_ingest_"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder {work}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start\n")
    rows = []
    for arm in args.arms:
        if arm == "demo":
            xml, joints, label, cfg_path = demo_arm()
        else:
            xml, joints, label = arm_description()
            cfg_path = work / "panda_config.yaml"
            write_config(cfg_path, joints)
        urdf = work / f"{arm}.urdf"
        urdf.write_text(xml)
        cfg = load_config(cfg_path)
        ident_cfgs = {"set": cfg_path, "auto": auto_cutoff_config(cfg_path, work / f"{arm}_auto.yaml")}
        n = len(joints)
        model = RobotModel(xml, joints)
        truth = JointTruth(np.full(n, 0.1), np.linspace(0.3, 0.8, n), np.linspace(0.2, 0.5, n),
                           np.linspace(-0.2, 0.2, n))
        traj = FourierTrajectory.random_within_limits(joints, model.limits.lower, model.limits.upper,
                                                      0.5 * model.limits.velocity, np.full(n, 3.0),
                                                      wf=0.2 * np.pi, harmonics=5, seed=3)
        rec = None
        for d in sorted(args.durations):
            bags = {st: work / f"{arm}_{st}_{d:g}s" for st in args.storages}
            for b in bags.values():
                if b.exists() and not (b / "metadata.yaml").exists():    # an interrupted write
                    shutil.rmtree(b)
            if not all(b.exists() for b in bags.values()):
                if rec is None:
                    t0 = time.perf_counter()
                    rec = SimulatedArm(xml, joints, truth).run(traj, duration=max(args.durations),
                                                               noise=SimNoise()).recording
                    print(f"{label}: simulated {rec.duration:.0f} s at 1 kHz in {time.perf_counter() - t0:.0f} s")
                part = rec.slice_time(0.0, d)
                for st, b in bags.items():
                    if not b.exists():
                        write_bag_from_config(b, part, cfg, storage=st, current_noise_std=args.current_noise)
            row = {"arm": label, "joints": n, "duration": d}
            for st, b in bags.items():
                o = run_child("read", b, cfg_path)
                row[f"read_{st}"], row[f"read_cpu_{st}"] = o["rate"], o["cpu_rate"]
                row["messages"] = o["messages"]
            main_bag = bags[args.storages[0]]
            for m in args.methods:
                for c in args.cutoffs:
                    res = work / f"res_{c}_{arm}_{m}_{d:g}"
                    o = run_child("identify", main_bag, urdf, ident_cfgs[c], m, res)
                    k = f"{m}_{c}"
                    row[f"{k}_s"], row[f"{k}_cpu"], row[f"{k}_rss"] = o["wall_s"], o["cpu_s"], o["peak_rss_mb"]
                    row[f"{k}_worker_rss"] = o["worker_rss_mb"]
                    row[f"{k}_hz"], row[f"{k}_chosen"] = chosen_cutoff(res)
            rows.append(row)
            print(_format_row(row, args, rows), flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f} (2 cores shared with other work: "
          "wall times are upper bounds)")


def _format_row(row, args, rows) -> str:
    first = next(r for r in rows if r["arm"] == row["arm"])
    parts = [f"{row['arm']:<28}{row['duration']:>6.0f} s {row['messages']:>8d} msg"]
    parts += [f"read {st} {row[f'read_{st}'] / 1e3:6.1f} k msg/s (CPU {row[f'read_cpu_{st}'] / 1e3:6.1f} k)"
              for st in args.storages]
    for m in args.methods:
        for c in args.cutoffs:
            k = f"{m}_{c}"
            growth = 100 * (row[f"{k}_rss"] / first[f"{k}_rss"] - 1)
            hz = row[f"{k}_hz"]
            how = "" if c == "set" else (f" -> {hz:g} Hz" if row[f"{k}_chosen"] else f" -> {hz:g} Hz (default)")
            workers = f", helper {row[f'{k}_worker_rss']:4.0f} MiB" if row[f"{k}_worker_rss"] else ""
            parts.append(f"{m} {c}{how} {row[f'{k}_s']:5.1f} s (CPU {row[f'{k}_cpu']:5.1f} s), peak RSS "
                         f"{row[f'{k}_rss']:4.0f} MiB ({growth:+.1f} %){workers}")
    return " | ".join(parts)


if __name__ == "__main__":
    main()
