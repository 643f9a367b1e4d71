"""Every fixed-base arm of example-robot-data through design -> simulate -> identify.

For each arm (UR3, UR5, UR10, Panda, JACO2, xArm7, Z1, SO-100, SO-101, the TriFinger
finger, the two-link ASR arm, Baxter's left arm with the rest of the robot locked; not the
double pendulum, whose URDF's limits are all 0 -- placeholders no design can use): the CAD
is the vendor's URDF; the simulated truth is the CAD with every body perturbed by up to 15 %
(mass x U(0.85, 1.15), rotational inertia about the centre of mass x an independent
U(0.85, 1.15): physically consistent; centre
of mass moved by up to 15 % of its distance from the joint frame per axis, at most 5 mm),
the friction and armature of the `simulation:` section's defaults (the URDF's `<dynamics>`, else
none; a rotor of 1e-3 kg*m^2 per N*m of the joint's URDF effort limit within 0.005-0.5, as
`simulate` gives any arm: robot_ident/sim/config.py) and the time step it derives.
Grippers are locked (their joints are not in `joints:`), the Panda's mimic finger included.
The config is built in code: the arm joints, current_source effort, acceleration limits of
3 x each joint's URDF velocity limit (at most 30 rad/s^2), the meshes of example-robot-data
for the collision checks (margin 3 cm, the vendor's SRDF where there is one, a floor at the
base plane -- none for the TriFinger finger, which hangs below its base) and a noise-free
simulation.

Steps, as a user runs them: `robot-ident design` (--time-limit, seed 0) on the CAD, then
`robot-ident simulate` on the truth URDF; a second design (seed 1, another excitation)
simulated the same way is the held-out trajectory; `identify` (the command's engine,
`offline.inputs.identify_inputs`) on the CAD with the first bag, physical (default) and
wls. Printed per arm: joints, base parameters, design cond, the closest collision pair
and its distance (the design's collision report), model quality (good, or the reasons),
the worst joint's held-out model error -- RMS(predicted - true effort) / RMS(true
effort), the trajectory's exact states, the true effort from the truth's parameters --
for both methods, the pipeline's held-out validation (relative RMS against the simulated
efforts, moving samples) and the wall time. Input that identify refuses is reported (the
refusal after the table) and identified with --force, marked "(forced)". An arm that fails
prints its one-line error and the bench goes on.

    python bench/zoo.py [--arms ur3 panda ...] [--time-limit 60] [--work DIR [--reuse]]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARE_REL = Path("cmeel.prefix/share")
# name: (folder under robots/, URDF, arm joints (None: every movable joint), SRDF or None)
NO_FLOOR = {"finger_edu"}     # mounted above its workspace, hanging: the base plane is no floor
ARMS = {
    "ur3": ("ur_description/urdf", "ur3_robot.urdf", None, None),
    "ur5": ("ur_description/urdf", "ur5_robot.urdf", None, None),
    "ur10": ("ur_description/urdf", "ur10_robot.urdf", None, None),
    "panda": ("panda_description/urdf", "panda.urdf", tuple(f"panda_joint{i}" for i in range(1, 8)),
              "panda_description/srdf/panda.srdf"),
    "jaco2": ("kinova_description/robots", "kinova.urdf", tuple(f"j2s6s200_joint_{i}" for i in range(1, 7)),
              "kinova_description/srdf/kinova.srdf"),
    "xarm7": ("xarm_description/urdf", "xarm7.urdf", tuple(f"joint{i}" for i in range(1, 8)),
              "xarm_description/srdf/xarm7.srdf"),
    "z1": ("z1_description/urdf", "z1.urdf", tuple(f"joint{i}" for i in range(1, 7)), "z1_description/srdf/z1.srdf"),
    "so100": ("so_arm_description/urdf", "so100.urdf",
              ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"), None),
    "so101": ("so_arm_description/urdf", "so101.urdf",
              ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"), None),
    "finger_edu": ("finger_edu_description/robots", "finger_edu.urdf", None,
                   "finger_edu_description/srdf/finger_edu.srdf"),
    "twodof": ("asr_twodof_description/urdf", "TwoDofs.urdf", None, None),
    "baxter_left": ("baxter_description/urdf", "baxter.urdf",
                    ("left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"),
                    "baxter_description/srdf/baxter_manipulation.srdf"),
}
CAD_ERROR = 0.15            # mass and inertia factors in [1 - e, 1 + e]; COM moved by e x its distance per axis
COM_SHIFT_MAX = 0.005       # m per axis
ACCEL_PER_VELOCITY = 3.0    # acceleration limit = 3 x velocity limit (1/s), capped:
ACCEL_MAX = 30.0


def share_dir() -> Path:
    for base in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]):
        p = Path(base) / SHARE_REL
        if (p / "example-robot-data").is_dir():
            return p
    raise SystemExit("example-robot-data not found; pip install example-robot-data")


def perturbed(cad, rng) -> np.ndarray:
    """The CAD's standard parameters with every body perturbed by up to CAD_ERROR, consistently."""
    import pinocchio as pin
    theta = cad.nominal.copy()
    e = CAD_ERROR
    for b in cad.layout.body_joints:
        I = cad.body_inertia(theta, b)
        reach = np.minimum(e * np.linalg.norm(I.lever), COM_SHIFT_MAX)
        new = pin.Inertia(I.mass * rng.uniform(1 - e, 1 + e), I.lever + rng.uniform(-reach, reach, 3),
                          I.inertia * rng.uniform(1 - e, 1 + e))
        theta[cad.layout.inertial_slice(b)] = new.toDynamicParameters()
    return theta


def config(model, share: Path, srdf: Path | None, floor: float | None = 0.0) -> dict:
    acc = {j: float(min(ACCEL_PER_VELOCITY * v, ACCEL_MAX)) for j, v in zip(model.joint_names, model.limits.velocity)}
    sim = {"effort_noise": 0.0, "position_noise": 0.0, "velocity_noise": 0.0}
    collision = {"package_dirs": [str(share)], "margin": 0.03, "floor": floor}
    if srdf is not None:
        collision["srdf"] = str(srdf)
    return {"robot_ident": {"ros__parameters": {
        "joints": list(model.joint_names), "current_source": "effort",
        "excitation": {"acceleration_limits": acc, "collision": collision},
        "simulation": sim,
    }}}


def cli(*args) -> str:
    """`robot-ident ARGS` in a subprocess (this checkout first on the path); its output, or
    RuntimeError with its last line."""
    env = {"PYTHONPATH": str(ROOT)}
    import os
    env = {**os.environ, **env}
    p = subprocess.run([sys.executable, "-m", "robot_ident.cli", *map(str, args)], capture_output=True, text=True,
                       env=env)
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr.strip() or p.stdout.strip()).splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit {p.returncode}"
        raise RuntimeError(last if last.startswith("robot-ident") else f"robot-ident {args[0]}: {last}")
    return p.stdout


def model_error(result, model, traj, true_theta) -> np.ndarray:
    """Per joint RMS(predicted - true) / RMS(true) on the trajectory's exact states (every 2 ms)."""
    t = np.arange(0.0, traj.duration, 0.002)
    q, qd, qdd = traj.sample(t)
    true = model.efforts(q, qd, qdd, true_theta)
    pred = result.predict(model, q, qd, qdd)
    return np.sqrt(np.mean((pred - true) ** 2, axis=0)) / np.sqrt(np.mean(true ** 2, axis=0))


def run_arm(name: str, work: Path, share: Path, args) -> dict:
    from robot_ident.estimation.conditioning import quality_reasons
    from robot_ident.estimation.plausibility import PlausibilityError
    from robot_ident.excitation.trajectory_file import load_trajectory
    from robot_ident.io.urdf_export import write_parameters
    from robot_ident.model.robot import RobotModel
    from robot_ident.offline.inputs import identify_inputs

    folder, urdf_name, joints, srdf = ARMS[name]
    robots = share / "example-robot-data" / "robots"
    urdf = robots / folder / urdf_name
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    cad0 = RobotModel(urdf, joints)
    cfg_path = d / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config(cad0, share, None if srdf is None else robots / srdf,
                                              None if name in NO_FLOOR else 0.0)))
    truth_xml, report = write_parameters(cad0, perturbed(cad0, np.random.default_rng(args.seed)))
    if report.kept_cad:
        raise RuntimeError(f"truth: bodies kept at CAD values: {report.kept_cad}")
    truth = d / "truth.urdf"
    truth.write_text(truth_xml)
    row = {"joints": cad0.n}
    for k, (traj, seed, budget) in enumerate((("traj.yaml", 0, args.time_limit),
                                              ("check.yaml", 1, args.check_time_limit))):
        if args.reuse and (d / traj).is_file() and (d / f"run{k + 1}").is_dir():
            continue            # the design and bag of an earlier run (same truth: same seed)
        cli("design", "--urdf", urdf, "--config", cfg_path, "--output", d / traj, "--seed", seed,
            "--time-limit", budget)
        cli("simulate", "--urdf", truth, "--config", cfg_path, "--trajectory", d / traj, "--output",
            d / f"run{k + 1}", "--quiet")
    tf = load_trajectory(d / "traj.yaml")
    row["cond"] = tf.criterion["cond"]
    row["base"] = tf.criterion.get("base_parameters")
    cr = tf.collision_report
    row["closest"] = "no collision model" if cr is None else (
        f"{cr.closest_pair} {100 * cr.closest_distance:.1f} cm" if cr.closest_pair else "no pair")
    truth_doc = yaml.safe_load((d / "run2" / "robot_ident_truth.yaml").read_text())
    check = load_trajectory(d / "check.yaml").trajectory
    for method in args.methods:
        kw = dict(method=method, validate_inputs=[str(d / "run2")], plots=False, warn=lambda line: None)
        refused = None
        try:
            o = identify_inputs([str(d / "run1")], urdf, cfg_path, d / f"result_{method}", **kw)
        except PlausibilityError as exc:    # what identify refuses: reported, then identified with --force
            refused = str(exc).strip().splitlines()[-1]
            o = identify_inputs([str(d / "run1")], urdf, cfg_path, d / f"result_{method}", force=True, **kw)
        q = o.result.quality
        true_theta = np.array([truth_doc["parameters"][n] for n in o.model.layout.names])
        err = model_error(o.result, o.model, check, true_theta)
        row[method] = {"good": q is None or q["good"], "reasons": [] if q is None else quality_reasons(q),
                       "err": err, "valid": np.asarray(o.validation.relative_rms),
                       "warnings": [w for w in o.warnings if not w.startswith("note:")],
                       "cutoff": o.settings.filter.cutoff_hz, "refused": refused}
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--methods", nargs="+", default=["physical", "wls"])
    ap.add_argument("--time-limit", type=float, default=60.0, help="design budget of the identification excitation [s]")
    ap.add_argument("--check-time-limit", type=float, default=20.0, help="design budget of the held-out excitation [s]")
    ap.add_argument("--seed", type=int, default=0, help="seed of the CAD perturbation")
    ap.add_argument("--work", type=Path, help="folder for configs, trajectories, bags and results (default: temporary)")
    ap.add_argument("--reuse", action="store_true",
                    help="identify again on the designs and bags already in --work (the identification alone)")
    args = ap.parse_args()
    share = share_dir()
    work = args.work or Path(tempfile.mkdtemp(prefix="robot_ident_zoo_"))
    print(f"work folder: {work}; CAD error up to {100 * CAD_ERROR:.0f} %, noise-free simulation, design "
          f"{args.time_limit:g} s (held-out {args.check_time_limit:g} s)")
    m = args.methods
    head = (f"{'arm':<11}{'joints':>7}{'base':>6}{'cond':>8}  {'closest pair':<44}"
            + "".join(f"{'quality ' + x:>18}{'err% ' + x:>16}{'valid% ' + x:>16}" for x in m) + f"{'wall s':>8}")
    print(head, flush=True)
    notes = []
    for name in args.arms:
        t0 = time.perf_counter()
        try:
            r = run_arm(name, work, share, args)
        except Exception as exc:     # noqa: BLE001  (one arm's failure must not end the bench)
            line = str(exc).strip().splitlines()
            print(f"{name:<11} FAILED ({type(exc).__name__}): {line[-1] if line else ''} "
                  f"[{time.perf_counter() - t0:.0f} s]", flush=True)
            continue
        cells = ""
        for x in m:
            e = r[x]
            verdict = ("good" if e["good"] else "NOT GOOD") + (" (forced)" if e["refused"] else "")
            cells += (f"{verdict:>18}{100 * e['err'].max():>16.2f}"
                      f"{100 * e['valid'].max():>16.2f}")
            if e["refused"]:
                notes.append(f"{name} {x}: identify refused ({e['refused']}); identified with --force")
            if not e["good"]:
                notes.append(f"{name} {x}: not a good model: {'; '.join(e['reasons'])}")
            notes += [f"{name} {x}: {w}" for w in e["warnings"]]
        print(f"{name:<11}{r['joints']:>7}{r['base'] or '':>6}{r['cond']:>8.1f}  {r['closest']:<44}{cells}"
              f"{time.perf_counter() - t0:>8.0f}", flush=True)
        for x in m:
            print(f"{'':<11}  {x}: cutoff {r[x]['cutoff']} Hz, err% per joint: "
                  + " ".join(f"{100 * v:.2f}" for v in r[x]["err"]), flush=True)
    for line in notes:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
