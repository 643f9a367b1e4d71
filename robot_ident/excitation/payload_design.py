"""Excitation for payload identification (`robot-ident design --payload`).

Only the excited joints (by default the last three that carry the payload frame) move;
the others are held at a pose. The criterion (cond or log-det) is computed on the
payload's columns of the regressor only: the 10 inertial columns of the body that
carries the payload, for the reduced model of the excited joints with the others locked
at the pose (the arm's own parameters are known, so only these columns matter). The
designed trajectory is then written for every identified joint, the held ones with zero
amplitude at the pose, and checked again densely against the full arm's limits.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import TrajectoryError
from ..model.robot import RobotModel
from .constraints import LimitSpec, check_trajectory
from .designer import DesignResult, DesignSpec, design_excitation
from .families import ModifiedFourierTrajectory
from .fourier import FourierTrajectory


@dataclass(frozen=True)
class PayloadColumns:
    """Duck-types `BaseParameters` for the excitation criterion: the kept columns are the
    payload body's 10 inertial columns."""

    independent: np.ndarray
    names: tuple

    @property
    def size(self) -> int:
        return len(self.independent)


def payload_columns(model: RobotModel, body: str) -> PayloadColumns:
    sl = model.layout.inertial_slice(body)
    return PayloadColumns(np.arange(sl.start, sl.stop), tuple(model.layout.names[sl]))


def expand_trajectory(traj, joints, held: dict):
    """The excited joints' trajectory written for every joint in `joints` (held ones constant)."""
    n = len(joints)
    idx = {j: k for k, j in enumerate(traj.joint_names)}
    if isinstance(traj, FourierTrajectory):
        L = traj.a.shape[1]
        q0, a, b = np.zeros(n), np.zeros((n, L)), np.zeros((n, L))
        for k, j in enumerate(joints):
            if j in idx:
                q0[k], a[k], b[k] = traj.q0[idx[j]], traj.a[idx[j]], traj.b[idx[j]]
            else:
                q0[k] = held[j]
        return FourierTrajectory(tuple(joints), traj.wf, q0, a, b)
    if isinstance(traj, ModifiedFourierTrajectory):
        L = traj.a.shape[1]
        start, a, b = np.zeros(n), np.zeros((n, L)), np.zeros((n, L))
        for k, j in enumerate(joints):
            if j in idx:
                start[k], a[k], b[k] = traj.start[idx[j]], traj.a[idx[j]], traj.b[idx[j]]
            else:
                start[k] = held[j]
        return ModifiedFourierTrajectory(tuple(joints), traj.wf, start, a, b)
    raise TrajectoryError(f"payload excitation supports the fourier and modified_fourier families, "
                          f"not {getattr(traj, 'family', type(traj).__name__)}")


def design_payload_excitation(urdf, joints, frame: str, excited, held: dict, acceleration: dict,
                              spec: DesignSpec, margins=None, use_effort: bool = False,
                              collision_spec=None, package_dirs=()) -> DesignResult:
    """Design on the excited joints (others locked at `held`), criterion on the payload
    columns; return a DesignResult for every joint in `joints`, checked on the full arm:
    its limits and, when the URDF has collision geometry, its collisions (the design keeps
    the margin to the arm itself and the environment of `collision_spec`)."""
    from ..estimation.payload import PayloadModel
    from .collision.safety import build_collision_model

    if spec.family not in ("fourier", "modified_fourier"):
        raise TrajectoryError(f"payload excitation supports the fourier and modified_fourier families, "
                              f"not {spec.family}")
    full = RobotModel(urdf, joints)
    reduced = RobotModel(urdf, list(excited), locked_positions=held)
    body = PayloadModel(reduced, frame).body
    cols = payload_columns(reduced, body)
    kw = {} if margins is None else {"margins": margins}
    lim_r = LimitSpec.from_model(reduced, acceleration, use_effort=use_effort, **kw)
    start = None if spec.start_pose is None else np.asarray(spec.start_pose, float)
    cm = build_collision_model(reduced, collision_spec, package_dirs)
    res = design_excitation(reduced, lim_r, replace(spec, start_pose=None if start is None else tuple(start)),
                            base=cols, collision=cm if cm.has_geometry else None)
    traj = expand_trajectory(res.trajectory, full.joint_names, held)
    lim_f = LimitSpec.from_model(full, {**{j: 1.0 for j in held}, **acceleration}, use_effort=use_effort, **kw)
    start_f = None if spec.family == "fourier" else traj.start
    report = check_trajectory(traj, lim_f, full, spec.check_dt, start_f)
    if not report.valid:
        raise TrajectoryError(f"the payload excitation violates the full arm's limits: {report.summary()}")
    full_cm = build_collision_model(full, collision_spec, package_dirs)
    if full_cm.has_geometry:        # the expanded trajectory on the whole arm, densely, as simulate will
        from .collision.safety import verify_trajectory
        verify_trajectory(traj, lim_f, full, full_cm, dt=spec.check_dt, what="the payload excitation",
                          start=start_f)
    return replace(res, trajectory=traj, limits=lim_f, report=report)
