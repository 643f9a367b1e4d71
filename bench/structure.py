"""What the structure check (estimation/structure_check.py) sees, and what it does not say.

Faults a held-out / in-sample ratio cannot see, on simulated arms (MuJoCo truth):
the demo arm with one joint's torque constant 1.3x (each joint in turn), every torque
constant 1.3x, two current channels crossed; the demo arm with a coupled wrist
identified with the right coupling, without it, with M = I and with one sign of M
wrong; the palletiser with and without its balancer spring; a plain and a coupled bag in one
run under either config, consistent pairs, validation recordings of the same arm and of the
arm with 1.3x masses. Then the public logs of
real arms (bench/real_logs.py; fetched, not shipped), where a warning would be a false
alarm. Printed per case: the model quality, the joints that miss structure (the probe
and its share of the residual), and the largest shares over all joints (named probes;
`own`) and the largest residual as a share of its joint's effort RMS -- against the
thresholds PROBE_SHARE, OWN_SHARE and UNEXPLAINED.

    python bench/structure.py [--data REAL_LOGS] [--cases demo coupled spring mixed real]
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from robot_ident.estimation.structure_check import OWN_SHARE, PROBE_SHARE, UNEXPLAINED  # noqa: E402


def quiet(_line: str) -> None:
    """The warnings are summed up in each case's line."""


def line(tag: str, result) -> None:
    found = (result.quality or {}).get("misses_structure") or result.extra.get("structure_findings") or []
    diag = result.extra.get("structure") or []
    named = max((v for d in diag for k, v in d["explained"].items() if k not in ("own", "gain")), default=0.0)
    own = max((d["explained"]["own"] for d in diag), default=0.0)
    rel = max((d["relative_rms"] for d in diag), default=0.0)
    flagged = ", ".join(f"{f['joint']} ({f['probe']} {f.get('share', np.nan):.2f}, residual "
                        f"{100 * f.get('relative_rms', np.nan):.3g} %)"
                        for f in found) or "-"
    print(f"{tag:<44} {'good' if result.quality['good'] else 'NOT GOOD':<9} max named {named:.2f}  own {own:.2f}  "
          f"residual {100 * rel:.3g} %  misses structure: {flagged}")


def demo_cases(work: Path) -> None:
    from robot_ident.cli import main
    from robot_ident.excitation import FourierTrajectory
    from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory
    from robot_ident.model.robot import RobotModel
    from robot_ident.offline.inputs import identify_arrays, identify_inputs

    urdf, config = ROOT / "urdf" / "demo_arm.urdf", ROOT / "config" / "demo_arm.yaml"
    m = RobotModel(urdf)
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=3)
    save_trajectory(work / "traj.yaml", TrajectoryFile(traj))
    assert main(["simulate", "--urdf", str(urdf), "--config", str(config), "--trajectory", str(work / "traj.yaml"),
                 "--output", str(work / "bag"), "--repetitions", "2", "--quiet"]) == 0
    doc = yaml.safe_load(config.read_text())
    cases = {"clean": {}, "every torque constant 1.3x": {j: 1.3 for j in m.joint_names}}
    cases.update({f"{j} torque constant 1.3x": {j: 1.3} for j in m.joint_names})
    for name, scale in cases.items():
        c = copy.deepcopy(doc)
        p = c["robot_ident"]["ros__parameters"]
        p.setdefault("identification", {})["method"] = "wls"
        for j, s in scale.items():
            p["actuators"][j]["torque_constant"] *= s
        (work / "c.yaml").write_text(yaml.safe_dump(c))
        o = identify_inputs([str(work / "bag")], urdf, work / "c.yaml", None, plots=False, force=True, warn=quiet)
        line(f"demo, {name}", o.result)
    # crossed channels: the bag's joint efforts as a table with two columns swapped
    from robot_ident.data.bag import read_recordings_from_config
    from robot_ident.io.config import load_config
    rec = read_recordings_from_config(work / "bag", load_config(config)).longest
    for a, b in ((0, 1), (1, 2), (3, 4), (4, 5)):
        e = rec.effort.copy()
        e[:, [a, b]] = e[:, [b, a]]
        res, _ = identify_arrays(m, rec.t, rec.q, e, rec.qd, force=True)
        line(f"demo, efforts of {m.joint_names[a]} / {m.joint_names[b]} crossed", res)


def coupled_cases() -> None:
    from robot_ident.data.signals import FilterOptions
    from robot_ident.demos.serial_arm import DemoSetup, demo_urdf, true_arm_parameters
    from robot_ident.estimation.pipeline import IdentificationSettings
    from robot_ident.excitation import FourierTrajectory
    from robot_ident.io.urdf_export import write_parameters
    from robot_ident.model.robot import RobotModel
    from robot_ident.model.transmission import CoupledGroup, Transmission
    from robot_ident.offline.inputs import identify_arrays
    from robot_ident.sim import JointTruth, SimNoise, SimulatedArm

    M = np.array([[1.0, 0.0, 0.0], [-1.0, 1.0, 0.0], [0.5, -1.0, 1.0]])
    setup, cad = DemoSetup(), RobotModel(demo_urdf())
    j = cad.joint_names
    group = lambda m: Transmission(j, [CoupledGroup("wrist", j[3:], ("m4", "m5", "m6"), m)])  # noqa: E731
    truth_urdf, _ = write_parameters(cad, true_arm_parameters(cad, setup))
    truth = JointTruth(np.array(setup.armature), np.array(setup.coulomb), np.array(setup.viscous),
                       np.array(setup.effort_offset))
    arm = SimulatedArm(truth_urdf, j, truth, nominal=RobotModel(demo_urdf(), transmission=group(M)),
                       transmission=group(M))
    lim = cad.limits
    traj = FourierTrajectory.random_within_limits(j, lim.lower, lim.upper, lim.velocity,
                                                  np.array(setup.acceleration_limits), wf=setup.base_frequency,
                                                  harmonics=setup.harmonics, margin=setup.limit_margin,
                                                  seed=setup.seed + 1)
    r = arm.run(traj, 2 * traj.period, SimNoise(effort_rel_std=0.01, seed=17)).recording
    sign = np.ones((3, 3))
    sign[2, 0] = -1
    settings = IdentificationSettings(method="wls", filter=FilterOptions(cutoff_hz=20.0))
    for name, tr in (("right coupling", group(M)), ("coupling left out", None), ("M = I", group(np.eye(3))),
                     ("one sign of M wrong", group(M * sign))):
        model = RobotModel(demo_urdf(), transmission=tr)
        res, _ = identify_arrays(model, r.t, r.q, r.effort, r.qd, settings=settings)
        line(f"coupled wrist, {name}", res)


def spring_cases(work: Path) -> None:
    from robot_ident.demos.palletiser import PalletiserSetup, palletiser_files, run_palletiser_demo
    from robot_ident.offline.inputs import identify_inputs
    run_palletiser_demo(work / "pal", PalletiserSetup(periods=1))
    urdf, config = palletiser_files()
    doc = yaml.safe_load(Path(config).read_text())
    for name, drop in (("palletiser, with its spring", False), ("palletiser, spring left out", True)):
        c = copy.deepcopy(doc)
        p = c["robot_ident"]["ros__parameters"]
        if drop:
            p.pop("springs")
        p.setdefault("identification", {})["method"] = "wls"
        (work / "p.yaml").write_text(yaml.safe_dump(c))
        o = identify_inputs([str(work / "pal" / "ident_bag")], urdf, work / "p.yaml", None, plots=False, force=True,
                            warn=quiet)
        line(name, o.result)


def mixed_cases(work: Path) -> None:
    """Several inputs and validation recordings (issue 31): a plain and a coupled-wrist bag of
    the demo arm in one run, under either config; consistent pairs; a validation recording of
    the arm with 1.3x masses, and one of the same arm."""
    import re

    from robot_ident.demos.serial_arm import demo_urdf
    from robot_ident.excitation import FourierTrajectory
    from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory
    from robot_ident.model.robot import RobotModel
    from robot_ident.offline.bag_workflow import simulate_to_bag
    from robot_ident.offline.inputs import identify_inputs
    urdf, plain = demo_urdf(), ROOT / "config" / "demo_arm.yaml"
    cad = RobotModel(urdf)
    lim = cad.limits
    for seed in (13, 16):
        tr = FourierTrajectory.random_within_limits(cad.joint_names, lim.lower, lim.upper, lim.velocity,
                                                    np.array([6.0, 6, 8, 10, 10, 10]), wf=0.2 * np.pi, harmonics=5,
                                                    margin=0.1, seed=seed)
        save_trajectory(work / f"t{seed}.yaml", TrajectoryFile(tr))
    doc = yaml.safe_load(plain.read_text())
    p = doc["robot_ident"]["ros__parameters"]
    p["transmissions"] = {"wrist": {"joints": ["wrist_1", "wrist_2", "wrist_3"], "motors": ["m4", "m5", "m6"],
                                    "motor_from_joint": [[1.0, 0, 0], [-1.0, 1.0, 0], [0.5, -1.0, 1.0]]}}
    for j, m in zip(["wrist_1", "wrist_2", "wrist_3"], ["m4", "m5", "m6"]):
        p["simulation"]["joints"][m] = p["simulation"]["joints"].pop(j)
    coupled = work / "coupled.yaml"
    coupled.write_text(yaml.safe_dump(doc))
    heavy = work / "heavy.urdf"
    heavy.write_text(re.sub(r'<mass value="([0-9.eE+-]+)"', lambda m: f'<mass value="{1.3 * float(m.group(1)):g}"',
                            Path(urdf).read_text()))
    bags = {}
    for name, u, c, seed in (("plain", urdf, plain, 16), ("plain2", urdf, plain, 13), ("coupled", urdf, coupled, 13),
                             ("coupled2", urdf, coupled, 16), ("heavy", heavy, plain, 16)):
        simulate_to_bag(u, c, work / f"t{seed}.yaml", work / name, repetitions=2)
        bags[name] = str(work / name)
    for tag, inputs, cfg, valid in (
            ("plain + coupled bags, plain config", ["plain", "coupled"], plain, []),
            ("plain + coupled bags, coupled config", ["plain", "coupled"], coupled, []),
            ("two plain bags, plain config", ["plain", "plain2"], plain, []),
            ("two coupled bags, coupled config", ["coupled", "coupled2"], coupled, []),
            ("validation: the same arm", ["plain2"], plain, ["plain"]),
            ("validation: the arm with 1.3x masses", ["plain2"], plain, ["heavy"])):
        said: list[str] = []
        o = identify_inputs([bags[k] for k in inputs], urdf, cfg, None, validate_inputs=[bags[k] for k in valid],
                            plots=False, warn=said.append)
        line(tag, o.result)
        for w in said:
            if "validation recording" in w:
                print(f"{'':<44} {w[:160]}")


def real_cases(data: Path, work: Path) -> None:
    import real_logs

    from robot_ident.offline.inputs import identify_inputs
    for name in ("panda", "kuka", "ur10e", "tx40"):
        p = real_logs.prepare(name, data, work)
        for method in ("physical", "wls"):
            c = copy.deepcopy(p["config"])
            if method != "physical":
                c["robot_ident"]["ros__parameters"].setdefault("identification", {})["method"] = method
            (work / f"{name}.yaml").write_text(yaml.safe_dump(c))
            o = identify_inputs(p["inputs"], p["urdf"], work / f"{name}.yaml", None, validate_inputs=p["validate"],
                                holdout=p["holdout"], plots=False, warn=quiet)
            line(f"real {name}, {method}", o.result)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("ROBOT_IDENT_REAL_LOGS"), help="the real logs (real_logs.py)")
    ap.add_argument("--cases", nargs="+", default=["demo", "coupled", "spring", "mixed", "real"])
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_structure_"))
    print(f"thresholds: a named probe >= {PROBE_SHARE}, own >= {OWN_SHARE} of the residual's variance; a residual "
          f">= {UNEXPLAINED} of the effort RMS")
    if "demo" in args.cases:
        demo_cases(work)
    if "coupled" in args.cases:
        coupled_cases()
    if "spring" in args.cases:
        spring_cases(work)
    if "mixed" in args.cases:
        mixed_cases(work)
    if "real" in args.cases:
        if args.data:
            real_cases(Path(args.data), work)
        else:
            print("real logs: skipped (give --data or ROBOT_IDENT_REAL_LOGS; see bench/real_logs.py)")


if __name__ == "__main__":
    main()
