"""Payload identification on the simulated demo arm (issue 15): a 2 kg tool on tool0.

Designs a wrist excitation (`design --payload` path), simulates it in MuJoCo with the
tool as a link of the truth URDF (the arm otherwise equal to the CAD, joint friction,
armature and offsets from config/demo_arm_payload.yaml, 1 % effort noise), writes a
rosbag2, and identifies the payload through `identify --payload` with the arm known
from the URDF (friction, armature and offsets of the wrist estimated with it).
Prints the errors against the truth and the wall times.

    PYTHONPATH=$PWD python bench/payload.py [--seeds 0 1 2] [--repetitions 2]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from robot_ident.cli import main as cli  # noqa: E402
from robot_ident.io.payload_urdf import add_payload_link  # noqa: E402

URDF = ROOT / "urdf" / "demo_arm.urdf"
CONFIG = ROOT / "config" / "demo_arm_payload.yaml"


def tool(mass=2.0, com=(0.012, -0.018, 0.065), box=(0.10, 0.08, 0.14), rpy=(0.3, -0.2, 0.5)) -> np.ndarray:
    a, b, h = box
    Ibox = mass / 12.0 * np.diag([b * b + h * h, a * a + h * h, a * a + b * b])
    R = pin.rpy.rpyToMatrix(*rpy)
    return pin.Inertia(mass, np.array(com), R @ Ibox @ R.T).toDynamicParameters()


def identify_arm(workdir: Path, cfg: Path, seed: int) -> Path:
    """The arm without the tool identified first (6 joints, 20 s, physical): the result folder."""
    from robot_ident.excitation import FourierTrajectory
    from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory
    from robot_ident.model.robot import RobotModel

    m = RobotModel(str(URDF))
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=seed + 3)
    save_trajectory(workdir / "arm.yaml", TrajectoryFile(traj))
    assert cli(["simulate", "--urdf", str(URDF), "--config", str(cfg), "--trajectory", str(workdir / "arm.yaml"),
                "--output", str(workdir / "arm_bag"), "--repetitions", "2", "--quiet"]) == 0
    assert cli(["identify", "--bag", str(workdir / "arm_bag"), "--urdf", str(URDF), "--config", str(cfg),
                "--output", str(workdir / "arm"), "--no-plots", "--quiet"]) == 0
    return workdir / "arm"


def run(workdir: Path, seed: int, repetitions: int, design_time: float, quiet=True, arm: str = "urdf") -> dict:
    truth = tool()
    truth_urdf = workdir / "truth.urdf"
    truth_urdf.write_text(add_payload_link(URDF.read_text(), "tool0", truth, "tool"))
    cfg = workdir / "config.yaml"
    cfg.write_text(CONFIG.read_text().replace("      seed: 0\n      joints:", f"      seed: {seed}\n      joints:"))
    traj = workdir / "payload_traj.yaml"
    t0 = time.perf_counter()
    q = ["--quiet"] if quiet else []
    rc = cli(["design", "--payload", "--urdf", str(URDF), "--config", str(cfg), "--output", str(traj),
              "--time-limit", str(design_time), "--seed", str(seed)])
    assert rc == 0
    t1 = time.perf_counter()
    bag = workdir / "bag"
    assert cli(["simulate", "--urdf", str(truth_urdf), "--config", str(cfg), "--trajectory", str(traj),
                "--output", str(bag), "--repetitions", str(repetitions)] + q) == 0
    t2 = time.perf_counter()
    out = workdir / "payload"
    t_sim = time.perf_counter()
    known = ["--urdf", str(URDF)] if arm == "urdf" else ["--result", str(identify_arm(workdir, cfg, seed))]
    t2 = time.perf_counter()
    assert cli(["identify", "--payload", "--bag", str(bag), "--config", str(cfg), "--output", str(out)]
               + known + q) == 0
    t3 = time.perf_counter()
    import yaml

    from robot_ident.excitation.trajectory_file import load_trajectory
    d = yaml.safe_load((out / "payload.yaml").read_text())["payload"]
    c_true = truth[1:4] / truth[0]
    return {"seed": seed, "mass_err_pct": 100 * abs(d["mass"] - truth[0]) / truth[0],
            "com_err_mm": 1e3 * float(np.linalg.norm(np.array(d["com"]) - c_true)),
            "determined": len(d["determined"]), "well": 10 - len(d["poorly_determined"]) - len(d["not_determined"]),
            "inertia_err_pct": 100 * float(np.max(np.abs(np.array([p["value"] for p in d["parameters"]])[4:]
                                                          - truth[4:]))) / float(np.max(np.abs(truth[4:]))),
            "design_s": t1 - t0, "simulate_s": t_sim - t1, "arm_s": t2 - t_sim, "identify_s": t3 - t2,
            "motion_s": float(yaml.safe_load((bag / "robot_ident_truth.yaml").read_text()) and
                              repetitions * load_trajectory(traj).trajectory.duration)}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--repetitions", type=int, default=2)
    ap.add_argument("--design-time", type=float, default=20.0)
    ap.add_argument("--arm", choices=("urdf", "result", "both"), default="both",
                    help="the known arm: the URDF (= the simulated arm), or a result identified first")
    a = ap.parse_args(argv)
    print("arm | seed | motion | mass err | com err | max inertia err (of the largest) | determined / well "
          "determined | design | simulate | identify")
    for arm in (("urdf", "result") if a.arm == "both" else (a.arm,)):
        for s in a.seeds:
            with tempfile.TemporaryDirectory() as tmp:
                r = run(Path(tmp), s, a.repetitions, a.design_time, arm=arm)
            print(f"{arm} | {r['seed']} | {r['motion_s']:.0f} s | {r['mass_err_pct']:.3f} % | "
                  f"{r['com_err_mm']:.3f} mm | "
                  f"{r['inertia_err_pct']:.2f} % | {r['determined']} / {r['well']} | {r['design_s']:.1f} s | "
                  f"{r['simulate_s']:.1f} s | {r['identify_s']:.1f} s"
                  + (f" | arm identified first in {r['arm_s']:.1f} s" if arm == "result" else ""))


if __name__ == "__main__":
    main()
