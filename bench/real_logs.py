"""Public recordings of real arms identified with the defaults, as a new user runs them.

For each log: `robot-ident identify`'s engine (`offline.inputs.identify_inputs`) with a
config that sets only the joints, the effort source and what the log needs to be read
(no method, no cutoff, no --force): the exit (identified, or refused with the
reason), every warning and note, the cutoff chosen from the data, and the per-joint
validation RMS (held out, or on the log's own validation recording). The Panda's and the
KUKA's efforts come from joint torque sensors after the gear, which do not see the
motor's rotor: their configs say so (``identification.model.armature: false``, as the
user guide advises); ``--armature`` identifies them with a rotor inertia all the same.

The logs are not copied into this repository (their licences differ and they are
large); put them under one folder (``--data`` or ``ROBOT_IDENT_REAL_LOGS``):

  panda/  Franka Emika Panda, joint-torque sensors, ~1 kHz, 21 s (Gaz et al. 2019, GPL-3.0)
          git clone https://github.com/marcocognetti/FrankaEmikaPandaDynModel P
          cp -r P/matlab/data/Exciting_Traj/Trajectory_1/rbt_log DATA/panda
  kuka/   KUKA LWR4+, joint-torque sensors, ~200 Hz jittery, 3 x 25 s (FloBaRoID, LGPL-3.0);
          at a commit from before the data moved to Git LFS:
          git clone https://github.com/kjyv/FloBaRoID F
          git -C F archive 4e2e5a2992f2175aa4e494c0d827590435a969a8 data/KUKA/HW model/kuka_lwr4.urdf \
              | tar -x -C DATA/kuka
          The recordings were low-passed by their authors (about 2-3 Hz) before saving, forwards
          and backwards (FloBaRoID's identification/data.py: filtfilt on positions and torques,
          velocities from the filtered positions, filtered again). Such a filter rings at the
          ends of a recording where the arm moves: in every run's last 0.5 s the slope of the
          positions and the velocities part (their 50 ms maximum rises from 0.003-0.007 rad/s,
          the runs' medians, to 0.6-1.3 rad/s at the end: the positions come to rest, the
          velocities and torques carry on); the first second shows nothing of it. No sensor
          produced those samples and no arm running live gives them, so the bench drops the
          last KUKA_EDGE_S of each KUKA run; ``--keep-edges`` keeps them.
          Runs 1 and 2 are one trajectory twice (positions within 6 mrad), run 3 another:
          `kuka` identifies on 1 and validates on 2 (a repeat: identify notes it), `kuka-new`
          identifies on 1 and validates on 3, `kuka-new-back` identifies on 3 and validates on 1.
  tx40/   Staubli TX40, motor torques and motor angles, 5 kHz, 9 s, coupled wrist (FIGAROH examples,
          Apache-2.0):
          git clone https://github.com/thanhndv212/figaroh-examples X
          git -C X archive c0b5c7f0fda10078be55104f9ee76ac106b7a5ee examples/staubli_TX40 | tar -x -C DATA/tx40
  ur10e/  Universal Robots UR10e, motor currents, ~94 Hz, raw (shamilmamedov/dynamic_calibration,
          no licence file: read locally, do not redistribute):
          git clone https://github.com/shamilmamedov/dynamic_calibration U
          git -C U archive 11af40e7deb758ec080a175fed8fcdd6c99aca29 dataset_ur10e URe/urdf | tar -x -C DATA/ur10e
          Currents become joint torques by the author's drive gains (UR10E_parameters.txt).

    python bench/real_logs.py [--data DATA] [--logs panda kuka kuka-new kuka-new-back ur10e tx40]
                              [--methods physical wls] [--armature] [--keep-edges]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

KUKA_RUNS = {"kuka": (1, 2), "kuka-new": (1, 3), "kuka-new-back": (3, 1)}
# UR10e drive gains [N*m/A] (joint side), estimated by the dataset's author with a known payload
UR10E_GAINS = (10.0, 10.6956, 8.4566, 9.0029, 9.48, 10.1232)
TX40_GEARS = (32.0, 32.0, 45.0, -48.0, 45.0, 32.0)     # motor / joint, the authors' (joint 4 reversed)
UR10E_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
                "wrist_3_joint")


def _npz(path, t, joints, q, qd, value, field="effort") -> Path:
    extra = {} if qd is None else {"velocity": qd}
    np.savez(path, time=np.asarray(t, float), joint_names=np.array(joints), position=q, **extra, **{field: value})
    return Path(path)


def _ur10e_csv(path, rows=None) -> dict:
    """The dataset's headerless CSV (t, q, qd, current, ...); rows (1-based, inclusive) as the
    author's main.m selects them; binary junk lines and repeated stamps dropped."""
    good = []
    for line in open(path, "rb"):
        try:
            p = [float(x) for x in line.decode("ascii").strip().split(",")]
        except (UnicodeDecodeError, ValueError):
            continue
        if len(p) in (19, 31) and all(abs(x) < 1e6 for x in p):
            good.append(p[:19])
    a = np.array(good)
    if rows is not None:
        a = a[rows[0] - 1:rows[1]]
    a = a[np.concatenate([[True], np.diff(a[:, 0]) > 0])]
    return {"t": a[:, 0], "q": a[:, 1:7], "qd": a[:, 7:13], "i": a[:, 13:19]}


ARMATURE_ON_TORQUE_SENSORS = False     # --armature: a rotor inertia where the sensors cannot see one
KUKA_EDGE_S = 0.5                      # the authors' forward-backward filter's end transient (see above)
KEEP_FILTER_EDGES = False              # --keep-edges: the KUKA runs as published, edges and all


def prepare(name: str, data: Path, work: Path) -> dict:
    """The log as tables and a config: {urdf, config (dict), inputs, validate_inputs, holdout}."""
    p = _prepare(name, data, work)
    if ARMATURE_ON_TORQUE_SENSORS:
        model = p["config"]["robot_ident"]["ros__parameters"].get("identification", {}).get("model", {})
        model.pop("armature", None)
    return p


def _prepare(name: str, data: Path, work: Path) -> dict:
    from robot_ident.data.holdout import Holdout
    if name == "panda":
        from panda_gaz2019 import JOINTS, config, load_log, panda_urdf, write_npz
        cfg = config("physical", "auto")
        del cfg["robot_ident"]["ros__parameters"]["identification"]["method"]
        del cfg["robot_ident"]["ros__parameters"]["identification"]["filter"]
        table = write_npz(load_log(data / "panda"), work / "panda.npz")
        return {"urdf": panda_urdf(), "config": cfg, "inputs": [table], "validate": [],
                "holdout": Holdout(every=5, block_s=2.0), "joints": JOINTS}
    if name in KUKA_RUNS:
        hw = data / "kuka" / "data" / "KUKA" / "HW"
        joints = tuple(f"lwr_{k}_joint" for k in range(7))
        tables = []
        for k in KUKA_RUNS[name]:        # identification run, validation run
            z = np.load(hw / f"measurements_{k}.npz")
            t = z["times"] - z["times"][0]
            keep = t <= t[-1] - (0.0 if KEEP_FILTER_EDGES else KUKA_EDGE_S)
            tables.append(_npz(work / f"kuka_{k}.npz", t[keep], joints, z["positions"][keep],
                               z["velocities"][keep], z["torques"][keep]))
        # the LWR4+'s measured torques come from its joint torque sensors, after the gear: no rotor in them
        cfg = {"robot_ident": {"ros__parameters": {"joints": list(joints), "current_source": "effort",
                                                   "identification": {"model": {"armature": False}}}}}
        return {"urdf": data / "kuka" / "model" / "kuka_lwr4.urdf", "config": cfg, "inputs": tables[:1],
                "validate": tables[1:], "holdout": None, "joints": joints}
    if name == "ur10e":
        root = data / "ur10e" / "dataset_ur10e"
        ident = _ur10e_csv(root / "identification_data" / "ur-20_02_10-30sec_12harm.csv", (635, 3510))
        valid = _ur10e_csv(root / "validation_data" / "ur-20_01_17-ptp_10_points.csv", (700, 4200))
        tables = [_npz(work / f"ur10e_{k}.npz", d["t"], UR10E_JOINTS, d["q"], d["qd"], d["i"], "current")
                  for k, d in (("ident", ident), ("valid", valid))]
        acts = {j: {"type": "rotary", "torque_constant": g, "gear_ratio": 1.0, "efficiency": 1.0}
                for j, g in zip(UR10E_JOINTS, UR10E_GAINS)}
        cfg = {"robot_ident": {"ros__parameters": {"joints": list(UR10E_JOINTS), "actuators": acts,
                                                   "current_source": "joint_states_effort"}}}
        return {"urdf": data / "ur10e" / "URe" / "urdf" / "ur10e.urdf", "config": cfg, "inputs": tables[:1],
                "validate": tables[1:], "holdout": None, "joints": UR10E_JOINTS}
    if name == "tx40":
        root = data / "tx40" / "examples" / "staubli_TX40"
        c = np.loadtxt(root / "data" / "curr_data.csv", delimiter=",", skiprows=1)       # motor torques [N*m]
        p = np.loadtxt(root / "data" / "pos_read_data.csv", delimiter=",", skiprows=1)   # motor angles [rad]
        gears = np.array(TX40_GEARS)
        Nq = np.diag(gears)
        Nq[5, 4] = gears[5]                 # the coupled wrist: motor 6 turns with joint 5
        q = np.linalg.solve(Nq, p.T).T
        q[:, 1] -= np.pi / 2                # the data's zero against the URDF's (the authors' tools)
        q[:, 2] += np.pi / 2
        joints = tuple(f"joint_{k}" for k in range(1, 7))
        table = _npz(work / "tx40.npz", np.arange(len(p)) * 2e-4, joints, q, None, c, "current")
        acts = {j: {"type": "rotary", "torque_constant": 1.0, "gear_ratio": float(abs(g)), "efficiency": 1.0,
                    "direction": int(np.sign(g))} for j, g in zip(joints, gears)}
        cfg = {"robot_ident": {"ros__parameters": {
            "joints": list(joints), "actuators": acts, "current_source": "joint_states_effort",
            # gearbox outputs: output 6 = q5 + q6 (motor 6 counter-acts joint 5's turn)
            "transmissions": {"wrist": {"joints": ["joint_5", "joint_6"], "motors": ["m5", "m6"],
                                        "motor_from_joint": [[1.0, 0.0], [1.0, 1.0]]}}}}}
        return {"urdf": root / "urdf" / "tx40_mdh_modified.urdf", "config": cfg, "inputs": [table],
                "validate": [], "holdout": None, "joints": joints}
    raise ValueError(f"unknown log {name!r}")


def run(name: str, data: Path, methods, work: Path) -> dict:
    from robot_ident.errors import RobotIdentError
    from robot_ident.offline.inputs import identify_inputs

    p = prepare(name, data, work)
    rms = {}
    for method in methods:
        cfg = work / f"{name}_{method}.yaml"
        c = p["config"]
        c["robot_ident"]["ros__parameters"].setdefault("identification", {})
        if method != "physical":        # physical is the default: nothing set
            c["robot_ident"]["ros__parameters"]["identification"]["method"] = method
        cfg.write_text(yaml.safe_dump(c))
        lines: list[str] = []
        t0 = time.perf_counter()
        try:
            o = identify_inputs(p["inputs"], p["urdf"], cfg, work / f"{name}_{method}", validate_inputs=p["validate"],
                                holdout=p["holdout"], plots=False, warn=lines.append)
        except RobotIdentError as exc:
            print(f"{name} {method}: REFUSED (exit 2): {exc}")
            for ln in lines:
                print(f"    {ln}")
            continue
        wall = time.perf_counter() - t0
        n_warn = sum(1 for ln in lines if ln.startswith("warning:"))
        n_note = len(lines) - n_warn
        v = o.validation
        where = "validation recording" if p["validate"] else "held out"
        print(f"{name} {method}: identified (exit 0) in {wall:.1f} s; {n_warn} warning(s), {n_note} note(s); "
              f"{o.cutoff_note}")
        for ln in lines:
            print(f"    {ln}")
        print(f"    {'joint':<22}{'RMS (' + where + ')':>34}{'NRMS':>9}{'rel. RMS':>10}{'in-sample':>11}{'samples':>9}")
        for k, j in enumerate(v.joint_names):
            if j in v.not_validated:
                print(f"    {j:<22}  not validated: {v.not_validated[j]}")
                continue
            print(f"    {j:<22}{v.rms[k]:>34.4f}{100 * v.nrms[k]:>8.2f}%{100 * v.relative_rms[k]:>9.1f}%"
                  f"{o.result.extra['raw_residual_rms'][j]:>11.4f}{v.n_samples[k]:>9d}")
        print()
        rms[method] = v.rms
    if "physical" in rms and "wls" in rms:
        r = rms["physical"] / rms["wls"]
        print(f"{name}: physical / wls validation RMS per joint: {' '.join(f'{x:.3f}' for x in r)} "
              f"(worst {np.nanmax(r):.3f})\n")
    return rms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("ROBOT_IDENT_REAL_LOGS"))
    ap.add_argument("--logs", nargs="+", default=["panda", "kuka", "kuka-new", "kuka-new-back", "ur10e", "tx40"])
    ap.add_argument("--methods", nargs="+", default=["physical", "wls"])
    ap.add_argument("--armature", action="store_true",
                    help="identify the torque-sensor logs (Panda, KUKA) with a rotor inertia too")
    ap.add_argument("--keep-edges", action="store_true",
                    help="keep the KUKA runs' last KUKA_EDGE_S (their authors' filter transient)")
    args = ap.parse_args()
    global ARMATURE_ON_TORQUE_SENSORS, KEEP_FILTER_EDGES
    ARMATURE_ON_TORQUE_SENSORS = args.armature
    KEEP_FILTER_EDGES = args.keep_edges
    if not args.data:
        ap.error("give the folder with the logs (--data or ROBOT_IDENT_REAL_LOGS); see this file's doc")
    work = Path(tempfile.mkdtemp(prefix="real_logs_"))
    for name in args.logs:
        run(name, Path(args.data), args.methods, work)
    print(f"result folders under {work}")


if __name__ == "__main__":
    main()
