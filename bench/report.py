"""Figures of the report of `robot-ident demo`: wall time of each figure and of the whole
page, sizes of report.html and samples.npz, and what the page answers (worst friction
fit, least determined base parameters, bodies against CAD).

    python bench/report.py [--output DIR] [--seed 7]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from robot_ident.demos.serial_arm import DemoSetup, run_demo
from robot_ident.report import plots
from robot_ident.report.build import build, key_answers
from robot_ident.report.inputs import load_inputs
from robot_ident.report.page import write_report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", default=None)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    out = Path(args.output or tempfile.mkdtemp(prefix="report_bench_")) / "demo"
    run_demo(out, DemoSetup(seed=args.seed), plots=False)
    t = time.perf_counter()
    d = build(load_inputs(out))
    t_build = time.perf_counter() - t
    figs = {"friction": lambda: plots.friction_figure(d.friction, d.worst_friction),
            "error histograms": lambda: plots.error_histogram_figure(d.histograms, "x"),
            "relative std": lambda: plots.relative_std_figure(d.chart),
            "bodies": lambda: plots.bodies_figure(d.bodies),
            "base vs CAD": lambda: plots.base_changes_figure(d.base_changes),
            "coverage": lambda: plots.coverage_figure(d.coverage, 1.0)}
    plots.coverage_figure(d.coverage, 1.0)          # matplotlib's first-use cost out of the figures
    for name, fn in figs.items():
        t = time.perf_counter()
        png = fn()
        print(f"figure {name:<17} {time.perf_counter() - t:6.2f} s  {len(png) / 1024:7.0f} KiB")
    t = time.perf_counter()
    page = write_report(out)
    npz = (out / "samples.npz").stat().st_size / 1024
    print(f"build (load + numbers) {t_build:.2f} s; whole page {time.perf_counter() - t:.2f} s; "
          f"report.html {page.stat().st_size / 1024:.0f} KiB; samples.npz {npz:.0f} KiB")
    print("friction misfit per joint [%]: " + ", ".join(
        f"{f.joint} {f.misfit_percent:.2f}{'' if f.within_noise else ' (> noise)'}" for f in d.friction))
    print("error RMS / noise per joint: " + ", ".join(f"{h.joint} {h.ratio:.3f}" for h in d.histograms))
    print("bodies (mass change %, CoM shift mm, mass fixed by the data): " + ", ".join(
        f"{c.body} {c.mass_change_percent:+.1f}/{c.com_shift_mm:.1f}/{c.determined['mass']}" for c in d.bodies))
    for line in key_answers(d):
        print("answer:", line)
    print(f"folder: {out}")


if __name__ == "__main__":
    main()
