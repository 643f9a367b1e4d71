"""The palletiser balancer demo (issue 15) over seeds: stiffness and preload errors with
the spring in the model, validation RMS / noise with and without it, and the balancer
design (peak and ripple of the shoulder torque along the pick-and-place cycle).

    PYTHONPATH=$PWD python bench/balancer.py [--seeds 0 1 2] [--periods 3]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from robot_ident.demos.palletiser import PalletiserSetup, run_palletiser_demo  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--periods", type=int, default=3)
    a = ap.parse_args(argv)
    print("seed | K err (std) | F0 err (std) | worst RMS/noise with spring | worst RMS/noise ignoring it | "
          "shoulder RMS/noise with / without | peak before -> after (K) | ripple before -> after (K) | time")
    for s in a.seeds:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            o = run_palletiser_demo(tmp, PalletiserSetup(seed=s, periods=a.periods))
        K, sK = o.identified["balancer.K"]
        F, sF = o.identified["balancer.F0"]
        w = {j: o.validation_with[j] / o.noise[j] for j in o.noise}
        wo = {j: o.validation_without[j] / o.noise[j] for j in o.noise}
        d = o.design
        print(f"{s} | {100 * (K - o.true_K) / o.true_K:+.3f} % ({100 * sK / o.true_K:.3f} %) | "
              f"{100 * (F - o.true_F0) / o.true_F0:+.3f} % ({100 * sF / o.true_F0:.3f} %) | "
              f"{max(w.values()):.3f} ({max(w, key=w.get)}) | {max(wo.values()):.2f} ({max(wo, key=wo.get)}) | "
              f"{w['shoulder']:.3f} / {wo['shoulder']:.2f} | {d.peak_before:.0f} -> {d.peak_after:.0f} N·m "
              f"({d.stiffness_before:.0f} -> {d.stiffness_peak:.0f} N/m, -{d.peak_reduction_percent:.2f} %) | "
              f"{d.ripple_before:.0f} -> {d.ripple_after:.0f} N·m ({d.stiffness_ripple:.0f} N/m) | "
              f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
