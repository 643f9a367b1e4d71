"""Checks made wherever a trajectory is used (simulate, the excitation node): the joint
limits and the collisions are re-checked here from the URDF and the config, never taken
from the report stored in the trajectory file (it can be edited, or made for another
URDF or environment)."""
from __future__ import annotations

import sys
from dataclasses import dataclass

from ...errors import TrajectoryError
from .check import CollisionReport, check_collisions
from .model import CollisionModel
from .spec import CollisionSpec

NO_GEOMETRY_WARNING = ("WARNING: the URDF has no <collision> geometry: self-collisions, the floor and "
                       "obstacles are NOT checked; this trajectory may drive the arm into itself or its surroundings")


def build_collision_model(robot, spec: CollisionSpec | None = None, package_dirs=()) -> CollisionModel:
    """The collision model of a RobotModel with the config's spec and extra package dirs
    (``--package-dir``, searched first)."""
    spec = spec or CollisionSpec()
    if package_dirs:
        spec = spec.with_package_dirs(package_dirs)
    return CollisionModel(robot, spec)


def warn_no_geometry(stream=None) -> None:
    print(NO_GEOMETRY_WARNING, file=stream or sys.stderr)


@dataclass(frozen=True)
class SafetyReport:
    limits: object                   # LimitReport
    collisions: CollisionReport

    @property
    def valid(self) -> bool:
        return self.limits.valid and self.collisions.valid

    def summary(self) -> str:
        return f"limits: {self.limits.summary()}; collisions: {self.collisions.summary()}"


def verify_trajectory(traj, limits, model=None, collision: CollisionModel | None = None, dt: float = 1e-3,
                      what: str = "the trajectory", start=None) -> SafetyReport:
    """Dense check of limits (and nominal efforts, if limited) and collisions; TrajectoryError
    naming the first violations if either fails."""
    from ..constraints import check_trajectory

    lrep = check_trajectory(traj, limits, model, dt, start)
    crep = check_collisions(traj, collision, dt)
    rep = SafetyReport(lrep, crep)
    if not lrep.valid:
        raise TrajectoryError(f"{what} violates the limits: {lrep.summary()}")
    if not crep.valid:
        raise TrajectoryError(f"{what} collides: {crep.summary()}")
    return rep


def check_for_use(urdf, config_path, traj, package_dirs=(), node: str = "robot_ident", dt: float = 1e-3,
                  warn=None) -> SafetyReport:
    """The check `simulate` makes before running a trajectory file: limits (URDF position and
    velocity, the config's acceleration limits and margins; accelerations unchecked, with a
    warning, when the config gives none) and collisions (URDF geometry + the config's
    ``excitation.collision``). TrajectoryError when either fails."""
    from ...model.robot import RobotModel
    from ..config import load_excitation_config
    from ..constraints import LimitSpec

    warn = warn or (lambda m: print(m, file=sys.stderr))
    exc = load_excitation_config(config_path, node)
    from ...model.spring import spring_model_from_file
    # the config's springs (gravity balancers) are part of the nominal efforts the limits check
    model = spring_model_from_file(urdf, traj.joint_names, config_path, node) if config_path else \
        RobotModel(urdf, traj.joint_names)
    missing = [j for j in model.joint_names if j not in exc.acceleration_limits]
    acc = {j: exc.acceleration_limits.get(j, 1e12) for j in model.joint_names}
    if missing:
        warn(f"warning: no excitation.acceleration_limits for joint(s) {', '.join(missing)} in {config_path}: "
             "their accelerations are not checked")
    limits = LimitSpec.from_model(model, acc, exc.margins, use_effort=exc.effort_limits)
    cm = build_collision_model(model, exc.collision, package_dirs)
    if not cm.has_geometry:
        warn(NO_GEOMETRY_WARNING)
        cm = None
    return verify_trajectory(traj, limits, model, cm, dt, what="the trajectory")
