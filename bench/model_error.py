"""Noise-free model error of an identified result against the URDF a simulator ran.

For a recording made in a simulator (Gazebo, MuJoCo) whose truth is a URDF -- its
inertials and its <dynamics> friction -- the identified model is compared with that
truth on a held-out motion, states exact: a random Fourier trajectory within the
limits that the identification never saw. Printed per joint: the RMS of predicted
minus true efforts, as a fraction of the true efforts' RMS.

    python bench/model_error.py --result RESULT_FOLDER --urdf TRUTH.urdf [--seed 5] [--scale 0.5]

`--scale` scales the validation trajectory's velocity and acceleration limits (a
simulator's controller may not follow the full limits).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> None:
    from robot_ident.excitation import FourierTrajectory
    from robot_ident.io.result_model import result_robot
    from robot_ident.io.results import load_result
    from robot_ident.model.robot import RobotModel

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--result", required=True, type=Path)
    ap.add_argument("--urdf", required=True, type=Path, help="the URDF the simulator ran (the truth)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--rigid-body", action="store_true",
                    help="compare without the joint friction and offset terms (Fc, Fv, off) on both sides: "
                         "a simulator whose friction law is not the URDF's (Gazebo's DART) is then judged on "
                         "the rigid-body dynamics alone")
    a = ap.parse_args()
    d, base, values, _ = load_result(a.result)
    joints, locked, friction, _ = result_robot(d, a.result / "result.yaml")
    model = RobotModel(a.result / "model.urdf", joints, locked, friction)
    truth = RobotModel(a.urdf, joints, locked, friction)
    if tuple(model.layout.names) != tuple(base.standard_names) or model.layout.names != truth.layout.names:
        raise SystemExit("the result's layout differs from the URDF's: another robot?")
    lim = truth.limits
    acc = np.full(truth.n, 5.0) * a.scale
    traj = FourierTrajectory.random_within_limits(joints, np.maximum(lim.lower, -3.0), np.minimum(lim.upper, 3.0),
                                                  lim.velocity * a.scale, acc, seed=a.seed)
    t = np.arange(0.0, a.duration, 0.005)
    q, qd, qdd = traj.sample(t)
    theta_true = truth.nominal.copy()
    if a.rigid_body:
        friction_terms = ("Fc", "Fv", "off")
        theta_true[[k for k, n in enumerate(truth.layout.names) if n.split(".")[-1] in friction_terms]] = 0.0
        lone = [k for k, n in enumerate(base.names) if n.split(".")[-1] in friction_terms]   # base terms of their own
        values = values.copy()
        values[lone] = 0.0
    true = (truth.regressor(q, qd, qdd) @ theta_true).reshape(-1, truth.n)
    pred = (base.regressor(model.regressor(q, qd, qdd)) @ values).reshape(-1, truth.n)
    rms = np.sqrt(np.mean((pred - true) ** 2, axis=0))
    ref = np.sqrt(np.mean(true ** 2, axis=0))
    print(f"result {a.result} against {a.urdf} ({d.get('method', '?')}), "
          f"held-out Fourier trajectory seed {a.seed}, {a.duration:g} s, limits x {a.scale:g}"
          + (", rigid body only" if a.rigid_body else ""))
    for j, e, r in zip(joints, rms, ref):
        print(f"  {j:16s} model error {e:8.4g} of RMS {r:8.4g}  ({100 * e / r:6.2f} %)")
    print(f"  worst {100 * float((rms / ref).max()):.2f} % of effort RMS")


if __name__ == "__main__":
    main()
