"""What the excitation node will run: the trajectory (from a file or designed at start-up),
the limits it is checked against and the model, prepared from the URDF and the config."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..excitation.constraints import LimitSpec


# ------------------------------------------------------------------- preparation
@dataclass(frozen=True)
class ExcitationPlan:
    trajectory: object
    limits: LimitSpec
    model: object
    source: str                  # "file <path>" or "designed (...)"
    collision: object = None     # CollisionModel (None: checked without one, explicitly allowed)
    collision_report: object = None


def prepare_excitation(urdf, config_path, trajectory_path=None, node: str | None = None,
                       design_time: float | None = None, package_dirs: Sequence[str] = (),
                       allow_without_collision_model: bool | None = None) -> ExcitationPlan:
    """The trajectory to run and its limits: read from `trajectory_path`, or designed from
    the config's ``excitation`` section (which must then give acceleration limits).

    `urdf` is a path or the URDF text (a robot_description parameter). The collision model
    comes from the URDF's <collision> geometry and ``excitation.collision``; a trajectory
    file is re-checked here (limits and collisions, densely), whatever its stored report
    says. Without collision geometry this refuses unless `allow_without_collision_model`
    (None: the config's ``excitation.collision.allow_without_collision_model``) is true."""
    from ..errors import ConfigError
    from ..excitation.collision.safety import build_collision_model, verify_trajectory
    from ..excitation.config import load_excitation_config
    from ..excitation.designer import design_excitation
    from ..excitation.trajectory_file import load_trajectory
    from ..io.config import load_config

    cfg = load_config(config_path, node)
    exc = load_excitation_config(config_path, cfg.node_name if cfg.node_name != "/**" else "robot_ident")
    if trajectory_path:
        traj = load_trajectory(trajectory_path).trajectory
        if set(traj.joint_names) != set(cfg.joints):
            raise ConfigError(f"trajectory {trajectory_path} moves joints {list(traj.joint_names)}, the config "
                              f"{config_path} identifies {list(cfg.joints)}")
        joints = tuple(traj.joint_names)
        source = f"file {trajectory_path}"
    else:
        traj, joints = None, tuple(cfg.joints)
    from ..io.model_loading import closed_chain_from_file
    from ..mechanisms.closed_chain.config import passive_limit_violations
    from ..model.spring import spring_model_from_file
    # closures: the actuated joints only; springs (gravity balancers) count in the nominal efforts
    model = closed_chain_from_file(urdf, config_path, node) or \
        spring_model_from_file(urdf, joints, config_path, node or "robot_ident")
    missing = [j for j in joints if j not in exc.acceleration_limits]
    if missing:
        raise ConfigError(f"{config_path}: excitation.acceleration_limits: no limit for joint(s) "
                          f"{', '.join(missing)} (needed for the limit check and the approach)")
    limits = LimitSpec.from_model(model, exc.acceleration_limits, exc.margins, use_effort=exc.effort_limits)
    allow = exc.collision.allow_without_collision_model if allow_without_collision_model is None \
        else bool(allow_without_collision_model)
    if hasattr(model, "closures"):      # passive joints are not in the collision model yet
        if not allow:
            raise ConfigError("collisions of a closed chain cannot be checked yet (its passive joints are not in "
                              "the collision model); refusing to move the arm. Set "
                              "allow_without_collision_model: true to run with the joint-limit checks only")
        cm = None
    else:
        cm = build_collision_model(model, exc.collision, package_dirs)
        if not cm.has_geometry:
            if not allow:
                raise ConfigError("the URDF has no <collision> geometry, so self-collisions and obstacles cannot be "
                                  "checked; refusing to move the arm. Add collision geometry to the URDF, or set "
                                  "allow_without_collision_model: true to run without the check")
            cm = None
    if traj is None:
        spec = exc.design_spec(joints, max_time=design_time)
        result = design_excitation(model, limits, spec, collision=cm)
        traj = result.trajectory
        source = f"designed ({spec.family}, {spec.optimizer}, cond {result.cond:.4g})"
    if hasattr(model, "closures"):
        bad = passive_limit_violations(model, traj, dt=0.02)
        if bad:
            raise ConfigError("the excitation takes passive joint(s) of the closed chain out of their limits "
                              "or out of the workspace: " + "; ".join(f"{b['joint']} at t = {b['time']:.2f} s"
                                                                       for b in bad))
    rep = verify_trajectory(traj, limits, model, cm, what=f"the excitation ({source})")
    return ExcitationPlan(traj, limits, model, source, cm, rep.collisions)
