"""Trajectory YAML: what `robot-ident design` writes and the nodes / CLI read back.

Layout (plain YAML, floats written with Python's shortest round-trip repr, so every
coefficient reads back bit for bit)::

    format: robot_ident/excitation_trajectory
    version: 1
    family: fourier | modified_fourier | polynomial7 | joint_moves
    joints: [...]
    coefficients: {...}           # family-specific, see _ENCODERS
    duration: 10.0                # seconds
    period: 10.0                  # periodic families only (null otherwise)
    sampling: {point_rate, optimisation_samples, constraint_points, check_dt, evaluation_samples}
    criterion: {name, cond, logdet, base_parameters, joint_weights}
    optimizer: {name, seed, evaluations, wall_time, ...}
    limits: {lower, upper, velocity, acceleration, effort, margins}
    limit_report: {valid, dt, n_samples, checks: [{joint, quantity, limit, worst, time, ok}]}
    collision: {margin, floor, boxes, srdf, pairs, skipped}   # the environment it was designed for
    collision_report: {valid, checked, margin, dt, n_samples, pairs, closest: {pair, distance, time},
                       violations: [...]}                  # null: designed without a collision model

The reports are informative: whoever runs the trajectory re-checks it (simulate, the
excitation node), since a file can be edited or made for another URDF or environment.

The file is written atomically (temporary file + os.replace).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import yaml

from ..errors import TrajectoryError
from ..util.atomic import atomic_write_text
from ..util.yaml_strict import safe_load_strict, yaml_error_line
from .constraints import LimitReport
from .families import JointMovesTrajectory, ModifiedFourierTrajectory, PolynomialTrajectory
from .fourier import FourierTrajectory

FORMAT = "robot_ident/excitation_trajectory"
VERSION = 1


def _family_of(traj) -> str:
    if isinstance(traj, FourierTrajectory):
        return "fourier"
    fam = getattr(traj, "family", None)
    if fam in ("modified_fourier", "polynomial7", "joint_moves"):
        return fam
    raise TrajectoryError(f"cannot serialise a trajectory of type {type(traj).__name__}")


def encode_trajectory(traj) -> dict:
    fam = _family_of(traj)
    if fam == "fourier":
        c = {"wf": float(traj.wf), "q0": traj.q0.tolist(), "a": traj.a.tolist(), "b": traj.b.tolist()}
    elif fam == "modified_fourier":
        c = {"wf": float(traj.wf), "start": traj.start.tolist(), "a": traj.a.tolist(), "b": traj.b.tolist()}
    elif fam == "polynomial7":
        c = {"duration": float(traj.duration), "start": traj.start.tolist(),
             "c": traj.coefficients.tolist(),
             "power_coefficients": traj.power_coefficients().tolist()}
    else:
        c = {"start": traj.start.tolist(), "move_joints": list(traj.move_joints),
             "displacements": traj.displacements.tolist(), "durations": traj.durations.tolist()}
    periodic = fam in ("fourier", "modified_fourier")
    return {"family": fam, "joints": list(traj.joint_names), "coefficients": c,
            "duration": float(traj.duration), "period": float(traj.period) if periodic else None}


def _need(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d:
        raise TrajectoryError(f"trajectory file: missing key {where + key!r}")
    return d[key]


def decode_trajectory(d: dict):
    fam = _need(d, "family", "")
    joints = _need(d, "joints", "")
    c = _need(d, "coefficients", "")
    w = "coefficients."
    try:
        if fam == "fourier":
            return FourierTrajectory(joints, _need(c, "wf", w), _need(c, "q0", w), _need(c, "a", w), _need(c, "b", w))
        if fam == "modified_fourier":
            return ModifiedFourierTrajectory(joints, _need(c, "wf", w), _need(c, "start", w),
                                             _need(c, "a", w), _need(c, "b", w))
        if fam == "polynomial7":
            return PolynomialTrajectory(joints, _need(c, "duration", w), _need(c, "start", w), _need(c, "c", w))
        if fam == "joint_moves":
            return JointMovesTrajectory(joints, _need(c, "start", w), _need(c, "move_joints", w),
                                        _need(c, "displacements", w), _need(c, "durations", w))
    except (TypeError, ValueError) as exc:
        raise TrajectoryError(f"trajectory file: bad coefficients for family {fam!r}: {exc}") from exc
    raise TrajectoryError(f"trajectory file: unknown family {fam!r}")


@dataclass(frozen=True)
class TrajectoryFile:
    trajectory: object
    report: LimitReport | None = None
    sampling: dict = field(default_factory=dict)
    criterion: dict = field(default_factory=dict)
    optimizer: dict = field(default_factory=dict)
    limits: dict = field(default_factory=dict)
    collision_report: object = None        # CollisionReport or None
    collision: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = {"format": FORMAT, "version": VERSION}
        d.update(encode_trajectory(self.trajectory))
        d["sampling"] = dict(self.sampling)
        d["criterion"] = dict(self.criterion)
        d["optimizer"] = dict(self.optimizer)
        d["limits"] = dict(self.limits)
        d["limit_report"] = None if self.report is None else self.report.to_dict()
        d["collision"] = dict(self.collision)
        d["collision_report"] = None if self.collision_report is None else self.collision_report.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrajectoryFile":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise TrajectoryError(f"not a robot_ident trajectory file (format must be {FORMAT!r})")
        if d.get("version") != VERSION:
            raise TrajectoryError(f"trajectory file version {d.get('version')!r} is not supported "
                                  f"(expected {VERSION})")
        from .collision.check import CollisionReport
        rep = d.get("limit_report")
        crep = d.get("collision_report")
        return cls(decode_trajectory(d), None if rep is None else LimitReport.from_dict(rep),
                   d.get("sampling") or {}, d.get("criterion") or {}, d.get("optimizer") or {},
                   d.get("limits") or {}, None if crep is None else CollisionReport.from_dict(crep),
                   d.get("collision") or {})

    @classmethod
    def from_design(cls, result) -> "TrajectoryFile":
        s, o = result.spec, result.optimizer
        return cls(
            result.trajectory, result.report,
            sampling={"point_rate": float(s.point_rate), "optimisation_samples": int(s.n_samples),
                      "constraint_points": int(s.n_constraint), "check_dt": float(s.check_dt),
                      "evaluation_samples": int(s.n_evaluation)},
            criterion={"name": s.criterion, "cond": float(result.cond), "logdet": float(result.logdet),
                       "base_parameters": int(result.base_size),
                       "joint_weights": None if s.joint_weights is None else [float(w) for w in s.joint_weights]},
            optimizer={"name": o.optimizer, "seed": int(s.seed), "evaluations": int(o.n_evals),
                       "wall_time": float(o.wall_time), "objective": float(o.f),
                       "initial_objective": float(o.initial_f),
                       "info": {k: (v.item() if isinstance(v, np.generic) else v) for k, v in o.info.items()}},
            limits=result.limits.to_dict(),
            collision_report=result.collision_report,
            collision=getattr(result, "collision_environment", None) or {})


def dump_trajectory_yaml(tf: TrajectoryFile) -> str:
    return yaml.safe_dump(tf.to_dict(), sort_keys=False, default_flow_style=None, width=100)


def is_trajectory_file(path) -> bool:
    """A trajectory file `save_trajectory` wrote (its format)."""
    with open(os.fspath(path), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    return isinstance(d, dict) and d.get("format") == FORMAT


def save_trajectory(path, tf: TrajectoryFile) -> None:
    atomic_write_text(path, dump_trajectory_yaml(tf))


def load_trajectory(path) -> TrajectoryFile:
    try:
        with open(os.fspath(path), encoding="utf-8") as fh:
            d = safe_load_strict(fh)
    except OSError as exc:
        raise TrajectoryError(f"cannot read trajectory file {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise TrajectoryError(f"trajectory file {path} is not valid YAML: {yaml_error_line(exc)}") from exc
    return TrajectoryFile.from_dict(d)
