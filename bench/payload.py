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


def run(workdir: Path, seed: int, repetitions: int, design_time: float, quiet=True) -> dict:
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
    assert cli(["identify", "--payload", "--bag", str(bag), "--urdf", str(URDF), "--config", str(cfg),
                "--output", str(out)] + q) == 0
    t3 = time.perf_counter()
    import yaml
    d = yaml.safe_load((out / "payload.yaml").read_text())["payload"]
    c_true = truth[1:4] / truth[0]
    return {"seed": seed, "mass_err_pct": 100 * abs(d["mass"] - truth[0]) / truth[0],
            "com_err_mm": 1e3 * float(np.linalg.norm(np.array(d["com"]) - c_true)),
            "determined": len(d["determined"]), "well": 10 - len(d["poorly_determined"]) - len(d["not_determined"]),
            "design_s": t1 - t0, "simulate_s": t2 - t1, "identify_s": t3 - t2, "motion_s": None}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--repetitions", type=int, default=2)
    ap.add_argument("--design-time", type=float, default=20.0)
    a = ap.parse_args(argv)
    print("seed | mass err | com err | determined / well determined (of 10) | design | simulate | identify")
    for s in a.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            r = run(Path(tmp), s, a.repetitions, a.design_time)
        print(f"{r['seed']} | {r['mass_err_pct']:.3f} % | {r['com_err_mm']:.3f} mm | {r['determined']} / {r['well']} | "
              f"{r['design_s']:.1f} s | {r['simulate_s']:.1f} s | {r['identify_s']:.1f} s")


if __name__ == "__main__":
    main()
