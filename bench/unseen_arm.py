"""An arm the defaults were never tuned on: a simulated UR5 whose truth differs from its CAD.

The CAD model is example-robot-data's ``ur5_robot.urdf``. The simulated truth perturbs
every body (mass x U(0.8, 1.25), centre of mass moved by up to 2 cm per axis, rotational
inertia about it x U(0.8, 1.25): physically consistent) and adds armature, Coulomb and
viscous friction and offsets; MuJoCo follows a random Fourier excitation with 1 % effort
noise. The recording is identified through the `identify` command's engine with the
defaults (cutoff from the data, physical estimate) and, as the reference, with plain
WLS at a fixed 20 Hz. Printed: the cutoff chosen, and the noise-free model error --
the RMS of predicted minus true efforts on a second trajectory, states exact -- per
joint, for each run and as a ratio to the reference.

    python bench/unseen_arm.py [--seeds 0 1 2] [--duration 40] [--accel-scale 1.0]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))

ARMATURE = (0.40, 0.40, 0.25, 0.04, 0.04, 0.03)
COULOMB = (3.6, 3.4, 2.2, 0.70, 0.65, 0.45)
VISCOUS = (1.8, 2.1, 1.3, 0.35, 0.28, 0.22)
OFFSET = (0.4, -0.3, 0.25, 0.04, -0.03, 0.02)
ACCEL = (6.0, 6.0, 8.0, 10.0, 10.0, 10.0)


def perturbed(cad, rng) -> np.ndarray:
    """The CAD's standard parameters with every body's inertia perturbed (consistently)."""
    import pinocchio as pin
    theta = cad.nominal.copy()
    for b in cad.layout.body_joints:
        I = cad.body_inertia(theta, b)
        m = I.mass * rng.uniform(0.8, 1.25)
        c = I.lever + rng.uniform(-0.02, 0.02, 3)
        new = pin.Inertia(m, c, I.inertia * rng.uniform(0.8, 1.25))
        theta[cad.layout.inertial_slice(b)] = new.toDynamicParameters()
    return theta


def run(seed: int, duration: float, work: Path, accel_scale: float = 1.0) -> dict:
    from conftest import example_robot_urdf

    from robot_ident.excitation import FourierTrajectory
    from robot_ident.io.results import load_result
    from robot_ident.io.urdf_export import write_parameters
    from robot_ident.model.robot import RobotModel
    from robot_ident.offline.inputs import identify_inputs
    from robot_ident.sim import JointTruth, SimNoise, SimulatedArm

    urdf = example_robot_urdf("ur_description", "ur5_robot.urdf")
    cad = RobotModel(urdf)
    rng = np.random.default_rng(seed)
    truth_xml, _ = write_parameters(cad, perturbed(cad, rng))
    arm = SimulatedArm(truth_xml, cad.joint_names, JointTruth(*(np.array(v) for v in (ARMATURE, COULOMB, VISCOUS,
                                                                                      OFFSET))), nominal=cad)
    theta_true = arm.true_parameters(cad)
    lim = cad.limits

    def traj(s):
        return FourierTrajectory.random_within_limits(cad.joint_names, np.maximum(lim.lower, -3.0),
                                                      np.minimum(lim.upper, 3.0), lim.velocity,
                                                      accel_scale * np.array(ACCEL),
                                                      seed=s)
    rec = arm.run(traj(100 + seed), duration, SimNoise(effort_rel_std=0.01, seed=seed)).recording
    table = work / f"ur5_{seed}.npz"
    np.savez(table, time=rec.t, joint_names=np.array(cad.joint_names), position=rec.q, velocity=rec.qd,
             effort=rec.effort)
    # the validation trajectory, exact states: the model error without noise
    tv = np.arange(0.0, 20.0, 0.005)
    q, qd, qdd = traj(200 + seed).sample(tv)
    Y = cad.regressor(q, qd, qdd)
    true = (Y @ theta_true).reshape(-1, cad.n)
    out = {}
    for label, ident in (("defaults", {}), ("wls 20 Hz", {"method": "wls", "filter": {"cutoff_hz": 20.0}})):
        cfg = work / f"ur5_{seed}_{label.replace(' ', '_')}.yaml"
        cfg.write_text(yaml.safe_dump({"robot_ident": {"ros__parameters": {
            "joints": list(cad.joint_names), "current_source": "effort", "identification": ident}}}))
        o = identify_inputs([table], urdf, cfg, work / f"r_{seed}_{label.replace(' ', '_')}", plots=False,
                            warn=lambda _line: None)
        _, base, values, _ = load_result(o.output)
        pred = (base.regressor(Y) @ values).reshape(-1, cad.n)
        out[label] = (np.sqrt(np.mean((pred - true) ** 2, axis=0)), o.settings.filter.cutoff_hz, o.result.method)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--accel-scale", type=float, default=1.0,
                    help="scale the excitation's acceleration limits (0.2: a slow excitation, where every "
                         "cutoff scores alike)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="unseen_arm_"))
    ratios = []
    for seed in args.seeds:
        out = run(seed, args.duration, work, args.accel_scale)
        ref = out["wls 20 Hz"][0]
        print(f"seed {seed}:")
        for label, (err, cutoff, method) in out.items():
            r = err / ref
            gm = float(np.exp(np.mean(np.log(r))))
            print(f"  {label:<10} ({method}, cutoff {cutoff:g} Hz): model error per joint "
                  + " ".join(f"{e:.4f}" for e in err) + f" N·m; / reference: geometric mean {gm:.3f}, max {r.max():.3f}")
        ratios.append(np.exp(np.mean(np.log(out["defaults"][0] / ref))))
    print(f"defaults / reference, geometric mean over joints, per seed: {', '.join(f'{r:.3f}' for r in ratios)}")
    print(f"work folder {work}")


if __name__ == "__main__":
    main()
