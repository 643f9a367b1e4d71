"""Every estimator on simulated data with known truth (MuJoCo).

Cases: the demo arm and the Panda (example-robot-data, 7 arm joints), effort noise
1 % and 5 % of each joint's effort RMS, and a 1 % case where 1 % of the identification
samples carry a one-sided glitch of 100 noise std (a saturating current sensor).
For each estimator: worst and per-joint validation RMS / noise std on a held-out
trajectory (outside the friction dead band), median relative error of the
well-determined base parameters (WLS relative std < 5 %, the same set for every
estimator) against the simulator's truth, whether every body of the standard
parameters is physically consistent (n/a for base-parameter estimators), wall time.

    python bench/estimators.py [--robots demo panda] [--quick]
"""
from __future__ import annotations

import argparse
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from robot_ident.demos.serial_arm import DemoSetup, simulate_experiment  # noqa: E402
from robot_ident.estimation import ESTIMATORS, build_problem  # noqa: E402
from robot_ident.io.urdf_export import body_is_physical  # noqa: E402
from robot_ident.estimation.pipeline import IdentificationSettings, base_parameters  # noqa: E402
from robot_ident.util.progress import Progress  # noqa: E402
from robot_ident.estimation.validation import validate  # noqa: E402

PANDA_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))


def panda_urdf() -> str:
    for base in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        p = Path(base) / "cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf"
        if p.is_file():
            return str(p)
    raise SystemExit("example-robot-data is not installed (pip install example-robot-data)")


def setups(robot: str, noise: float) -> DemoSetup:
    if robot == "demo":
        return DemoSetup(effort_noise=noise)
    return DemoSetup(
        effort_noise=noise, urdf=panda_urdf(), joints=PANDA_JOINTS, seed=3,
        acceleration_limits=(7.5, 3.75, 5.0, 6.25, 7.5, 10.0, 10.0),
        armature=(0.20, 0.20, 0.15, 0.15, 0.05, 0.05, 0.05),
        coulomb=(0.6, 0.5, 0.5, 0.5, 0.3, 0.3, 0.3),
        viscous=(0.6, 0.6, 0.5, 0.5, 0.2, 0.2, 0.15),
        effort_offset=(0.1, -0.1, 0.05, 0.1, -0.05, 0.02, 0.01),
        payload_mass=1.0, payload_com=(0.0, 0.0, 0.15))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["demo", "panda"])
    ap.add_argument("--methods", nargs="+", default=list(ESTIMATORS))
    args = ap.parse_args()
    settings = IdentificationSettings()
    cases = [(0.01, 0.0), (0.05, 0.0), (0.01, 0.01)]
    print(f"{'robot':<6}{'noise':>6}{'outl.':>6}  {'method':<10}{'worst RMS/noise':>16}{'median err':>12}"
          f"{'physical':>10}{'wall [s]':>10}   per-joint RMS/noise")
    for robot in args.robots:
        for noise, outliers in cases:
            setup = setups(robot, noise)
            exp = simulate_experiment(setup, Progress(quiet=True))
            base = base_parameters(exp.cad, settings)
            problem = build_problem(exp.cad, base, exp.ident_data, settings.moving_threshold, settings.guard_s)
            if outliers:
                rng = np.random.default_rng(0)
                hit = rng.random(problem.n_rows) < outliers
                problem.y = problem.y.copy()
                problem.y[hit] += 100 * exp.ident_noise_std[problem.joint_of_row[hit]]
            true_base = base.project(exp.true_theta)
            good = None
            for method in args.methods:
                t0 = time.perf_counter()
                res = ESTIMATORS[method](problem)
                wall = time.perf_counter() - t0
                if good is None or method == "wls":
                    good = res.relative_std < 5 if method == "wls" else good
                v = validate(res, exp.cad, exp.valid_data, settings.moving_threshold, exp.valid_noise_std,
                             settings.guard_s)
                if good is None:
                    good = np.ones(base.size, bool)
                rel = np.abs(res.values - true_base)[good] / np.abs(true_base[good])
                if res.standard_values is None:
                    phys = "n/a"
                else:
                    ok = [body_is_physical(res.standard_values[exp.cad.layout.inertial_slice(b)])[0]
                          for b in exp.cad.layout.body_joints]
                    phys = f"{sum(ok)}/{len(ok)}"
                print(f"{robot:<6}{100 * noise:>5.0f}%{100 * outliers:>5.0f}%  {method:<10}"
                      f"{v.noise_ratio.max():>16.3f}{100 * np.median(rel):>11.3f}%{phys:>10}{wall:>10.2f}   "
                      + " ".join(f"{r:.2f}" for r in v.noise_ratio), flush=True)


if __name__ == "__main__":
    main()
