"""Figures of the coupled-wrist identification (test/test_transmission.py's setup).

The demo arm with a three-joint coupled wrist (motor-side armature, Coulomb and
viscous friction simulated by MuJoCo tendons), identified with the coupled model and
with the per-joint model; validation on another trajectory, moving samples. Prints
held-out RMS / effort noise per joint for each effort-noise level, the true
parameters' own score (the filter's floor), and the cutoff `identify` would choose.

    python bench/coupled_wrist.py [--noise 0.01 0.03] [--cutoff 20] [--choose]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from robot_ident.data.holdout import Holdout
from robot_ident.data.signals import FilterOptions, process
from robot_ident.demos.serial_arm import DemoSetup, demo_urdf, true_arm_parameters
from robot_ident.estimation.flow import identify_sources
from robot_ident.estimation.pipeline import IdentificationConfig, IdentificationSettings, identify, validate_result
from robot_ident.estimation.validation import rms_report
from robot_ident.excitation import FourierTrajectory
from robot_ident.io.urdf_export import write_parameters
from robot_ident.model.robot import RobotModel
from robot_ident.model.transmission import CoupledGroup, Transmission, dead_band_rows
from robot_ident.offline.inputs import arrays_config, arrays_input
from robot_ident.sim import JointTruth, SimNoise, SimulatedArm

WRIST_M = np.array([[1.0, 0.0, 0.0], [-1.0, 1.0, 0.0], [0.5, -1.0, 1.0]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.03])
    ap.add_argument("--cutoff", type=float, default=20.0)
    ap.add_argument("--choose", action="store_true", help="also run the cross-validated cutoff choice")
    args = ap.parse_args()
    setup = DemoSetup()
    cad = RobotModel(demo_urdf())
    j = cad.joint_names
    tr = Transmission(j, [CoupledGroup("wrist", j[3:], ("m4", "m5", "m6"), WRIST_M)])
    model = RobotModel(demo_urdf(), transmission=tr)
    truth_urdf, _ = write_parameters(cad, true_arm_parameters(cad, setup))
    truth = JointTruth(np.array(setup.armature), np.array(setup.coulomb), np.array(setup.viscous),
                       np.array(setup.effort_offset))
    arm = SimulatedArm(truth_urdf, j, truth, nominal=model, transmission=tr)
    lim = cad.limits
    trajs = [FourierTrajectory.random_within_limits(
        j, lim.lower, lim.upper, lim.velocity, np.array(setup.acceleration_limits), wf=setup.base_frequency,
        harmonics=setup.harmonics, margin=setup.limit_margin, seed=setup.seed + k) for k in (1, 2)]
    settings = IdentificationSettings(method="wls", filter=FilterOptions(cutoff_hz=args.cutoff))
    print(f"joints: {', '.join(j)}; wrist motors m4..m6, M = {WRIST_M.tolist()}")
    for rel in args.noise:
        t0 = time.perf_counter()
        runs = [arm.run(trajs[0], 2 * trajs[0].period, SimNoise(effort_rel_std=rel, seed=17)),
                arm.run(trajs[1], trajs[1].period, SimNoise(effort_rel_std=rel, seed=27))]
        ident, valid = (process(r.recording, settings.filter) for r in runs)
        noise = runs[1].effort_noise_std
        pred = model.efforts(valid.q, valid.qd, valid.qdd, arm.true_parameters(model))
        floor = rms_report(valid.t, valid.effort_raw, pred, j,
                           dead_band_rows(model, valid, settings.moving_threshold, settings.guard_s), noise)
        print(f"\neffort noise {100 * rel:g} % of RMS, cutoff {args.cutoff:g} Hz")
        print(f"  true parameters    RMS/noise: {np.round(floor.noise_ratio, 3).tolist()}")
        for label, m in (("coupled model", model), ("per-joint model", cad)):
            res = identify(m, ident, settings)
            v = validate_result(res, m, valid, settings, noise)
            print(f"  {label:<18} RMS/noise: {np.round(v.noise_ratio, 3).tolist()}")
        if args.choose:      # identify's choice: the one pipeline on the identification run, nothing held out
            r = runs[0].recording
            o = identify_sources([arrays_input(model, r.t, r.q, r.effort, r.qd)], arrays_config(model),
                                 IdentificationConfig(settings, model.friction), model, holdout=Holdout(),
                                 auto_cutoff=True, plots=False)
            print("  " + o.summary.splitlines()[-1])
        print(f"  wall {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
