"""Identification of a real Franka Emika Panda from the public log of Gaz et al. (2019).

Source: https://github.com/marcocognetti/FrankaEmikaPandaDynModel (GPL-3.0), folder
``matlab/data/Exciting_Traj/Trajectory_1/rbt_log``: one exciting trajectory of 21 s
logged at ~1 kHz -- time, measured joint positions, velocities and link-side joint
torques (``tau_J`` of the Panda's torque sensors), 7 values per sample, one number a
line. The files are not copied into this repository (GPL-3.0, and 5 MB); fetch the
repository and point this script (or ``ROBOT_IDENT_PANDA_LOG`` for the test) at the
``rbt_log`` folder.

The script converts the log to a table in robot_ident's layout (data/table.py), then
identifies with the CAD model of example-robot-data's ``panda.urdf`` (hand and
fingers attached, fingers locked) and prints the held-out RMS per joint for each
estimator, against the CAD model on the same samples.

    python bench/panda_gaz2019.py /path/to/rbt_log [--methods wls physical] [--cutoff auto]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from robot_ident.offline.inputs import IdentifyOutcome  # noqa: E402

JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FILES = {"time": "exciting_traj_time.txt", "position": "exciting_traj_positions.txt",
         "velocity": "exciting_traj_velocity.txt", "effort": "exciting_traj_torques.txt"}


def load_log(folder) -> dict:
    """The four files as arrays: time (N,), position/velocity/effort (N, 7)."""
    folder = Path(folder)
    out = {}
    for key, name in FILES.items():
        p = folder / name
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found (expected the rbt_log folder of Gaz et al.)")
        a = np.loadtxt(p)
        out[key] = a if key == "time" else a.reshape(-1, 7)
    n = out["time"].size
    for key in ("position", "velocity", "effort"):
        if out[key].shape != (n, 7):
            raise ValueError(f"{FILES[key]}: {out[key].shape[0]} samples, time has {n}")
    return out


def write_npz(log: dict, path) -> Path:
    np.savez(path, time=log["time"], joint_names=np.array(JOINTS), position=log["position"],
             velocity=log["velocity"], effort=log["effort"])
    return Path(path)


def panda_urdf() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))
    from conftest import example_robot_urdf
    return example_robot_urdf("panda_description", "panda.urdf")


def config(method: str, cutoff) -> dict:
    filt = {"order": 4, "target_rate_hz": 200.0, "trim_s": 0.2}
    if cutoff != "auto":
        filt["cutoff_hz"] = float(cutoff)
    return {"robot_ident": {"ros__parameters": {
        "joints": list(JOINTS), "current_source": "effort",
        # tau_J comes from the link-side torque sensors, after the gear: the rotor is not in it
        # (no armature; Gaz et al.'s model has none either)
        "identification": {"method": method, "filter": filt,
                           "model": {"locked_positions": {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0},
                                     "armature": False}},
    }}}


@dataclass
class PandaOutcome(IdentifyOutcome):
    """`identify_inputs`'s outcome with what it identified from, for `cad_rms`."""

    table: Path | None = None
    config: Path | None = None
    holdout: object = None


def run(rbt_log, methods=("wls",), cutoff="auto", holdout=None, work=None):
    """Identify; returns {method: PandaOutcome} and the work folder."""
    from robot_ident.data.holdout import Holdout
    from robot_ident.offline.inputs import identify_inputs

    holdout = holdout or Holdout(every=5, block_s=2.0)
    work = Path(work or tempfile.mkdtemp(prefix="panda_gaz2019_"))
    table = write_npz(load_log(rbt_log), work / "panda_gaz2019.npz")
    out = {}
    for m in methods:
        cfg = work / f"config_{m}.yaml"
        cfg.write_text(yaml.safe_dump(config(m, cutoff)))
        t0 = time.perf_counter()
        o = identify_inputs([table], panda_urdf(), cfg, work / f"result_{m}", holdout=holdout, plots=False)
        o.result.extra["wall_s"] = time.perf_counter() - t0
        out[m] = PandaOutcome(**vars(o), table=table, config=cfg, holdout=holdout)
    return out, work


class _CadModel:
    """The CAD model (URDF inertias and friction, no offset) as a result to validate."""

    def predict(self, model, q, qd, qdd):
        return model.efforts(q, qd, qdd)


def held_out_rms(outcome, predictor=None) -> np.ndarray:
    """Held-out RMS per joint of `predictor` (default the CAD model) on the samples the
    identification held out: the table processed again with the settings it used (cutoff
    and velocity decided), the same hold-out flags, the same moving samples."""
    from robot_ident.data.holdout import holdout_flags, runs_of
    from robot_ident.data.processing import process_one
    from robot_ident.estimation.compressed import validate_runs
    from robot_ident.estimation.flow import _segment_times  # the flow's own segment times
    from robot_ident.io.config import load_config
    s, model = outcome.settings, outcome.model
    processed = process_one(outcome.table, load_config(outcome.config), s.filter, joints=model.joint_names)
    try:
        held = np.concatenate(holdout_flags(_segment_times(processed), outcome.holdout))
        runs = [(processed.store, a, b) for a, b in runs_of(held)]
        return validate_runs(predictor or _CadModel(), model, runs, s.moving_threshold, s.guard_s).rms
    finally:
        processed.close()


def cad_rms(outcome) -> np.ndarray:
    """Held-out RMS of the CAD model (URDF inertias and friction, no offset) on the same samples."""
    return held_out_rms(outcome)


def effort_noise_std(rbt_log, cutoff_hz: float = 50.0) -> np.ndarray:
    """A sensor-noise estimate per joint: the RMS of the raw torque minus its zero-phase
    low-pass at `cutoff_hz` (what the rigid-body model cannot be asked to predict)."""
    from robot_ident.data.signals import lowpass
    log = load_log(rbt_log)
    fs = 1.0 / float(np.median(np.diff(log["time"])))
    e = log["effort"]
    return np.sqrt(np.mean((e - lowpass(e, fs, cutoff_hz, 4)) ** 2, axis=0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rbt_log", nargs="?", default=os.environ.get("ROBOT_IDENT_PANDA_LOG"))
    ap.add_argument("--methods", nargs="+", default=["wls", "physical"])
    ap.add_argument("--cutoff", default="auto")
    args = ap.parse_args()
    if not args.rbt_log:
        ap.error("give the rbt_log folder (or set ROBOT_IDENT_PANDA_LOG)")
    outcomes, work = run(args.rbt_log, args.methods, args.cutoff)
    first = next(iter(outcomes.values()))
    print(first.summary)
    noise = effort_noise_std(args.rbt_log)
    print("torque sensor noise estimate (RMS above 50 Hz): " + ", ".join(f"{x:.3f}" for x in noise))
    print()
    for m, o in outcomes.items():
        v = o.validation
        print(f"method {m}: cutoff {o.settings.filter.cutoff_hz:g} Hz, {o.result.n_samples} identification samples, "
              f"condition number {o.result.condition_number:.1f}, wall {o.result.extra['wall_s']:.1f} s")
        print(f"{'joint':<14}{'held-out RMS':>13}{'in-sample':>11}{'/noise':>8}{'NRMS':>8}{'rel. RMS':>10}"
              f"{'samples':>9}")
        for k, j in enumerate(v.joint_names):
            print(f"{j:<14}{v.rms[k]:>13.4f}{o.result.extra['raw_residual_rms'][j]:>11.4f}{v.rms[k] / noise[k]:>8.2f}"
                  f"{100 * v.nrms[k]:>7.2f}%{100 * v.relative_rms[k]:>9.1f}%{v.n_samples[k]:>9d}")
        again = held_out_rms(o, o.result)      # the validation's figures, recomputed: the same samples
        if not np.allclose(again, v.rms, rtol=1e-9, atol=1e-12):
            print(f"WARNING: recomputed held-out RMS {again} differs from the validation's {v.rms}")
        print("CAD model held-out RMS:  " + ", ".join(f"{x:.3f}" for x in cad_rms(o)))
        print()
    print(f"result folders under {work}")


if __name__ == "__main__":
    main()
