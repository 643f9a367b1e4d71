"""Figures of `robot-ident demo` on the built-in simulated arm.

For several seeds and effort-noise levels: per-joint validation RMS / noise std on a
held-out trajectory (outside the friction dead band and over all samples), the median
and 90th-percentile relative error of the well-determined base parameters against the
simulator's truth, condition number, wall time per stage and peak memory.

    python bench/demo.py [--seeds 7 8 9] [--noise 0.01 0.05]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from robot_ident.demos.serial_arm import DemoSetup, run_demo
from robot_ident.estimation.pipeline import IdentificationSettings
from robot_ident.estimation.validation import rms_report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 8, 9])
    ap.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.05])
    ap.add_argument("--methods", nargs="+", default=["ols", "wls"])
    args = ap.parse_args()
    print(f"{'method':<6}{'noise':>7}{'seed':>6}{'max RMS/noise':>15}{'all-samples':>13}{'median err':>12}"
          f"{'p90 err':>10}{'well-det.':>10}{'cond':>8}{'wall [s]':>10}")
    rows = []
    for method in args.methods:
        for noise in args.noise:
            for seed in args.seeds:
                t0 = time.perf_counter()
                o = run_demo(None, DemoSetup(effort_noise=noise, seed=seed,
                                             settings=IdentificationSettings(method=method)))
                wall = time.perf_counter() - t0
                v = o.validation
                allv = rms_report(v.t, v.measured, v.predicted, v.joint_names, noise_std=o.noise_std)
                good = o.well_determined
                rel = o.relative_errors[good]
                rows.append((method, noise, v.noise_ratio.max(), np.median(rel)))
                print(f"{method:<6}{noise:>7.2f}{seed:>6}{v.noise_ratio.max():>15.3f}{allv.noise_ratio.max():>13.3f}"
                      f"{100 * np.median(rel):>11.3f}%{100 * np.percentile(rel, 90):>9.2f}%{good.sum():>10d}"
                      f"{o.result.condition_number:>8.0f}{wall:>10.2f}")
    last = o
    print("\nper-joint RMS / noise std (last run):",
          ", ".join(f"{j} {r:.3f}" for j, r in zip(last.validation.joint_names, last.validation.noise_ratio)))
    print("stage wall time (last run):", ", ".join(f"{k} {t:.3f} s" for k, t in last.timings.items()))
    print(f"peak memory (max RSS): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
