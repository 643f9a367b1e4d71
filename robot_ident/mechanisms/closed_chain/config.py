"""The parameter file's `closures:` key: a closed-chain robot through the whole product.

    robot_ident:
      ros__parameters:
        joints: [limb1_slide, limb2_slide, limb3_slide, head_a, head_c]   # the actuated joints
        closures: hybrid5_closures.yaml    # the loop-closure YAML (urdf/hybrid5_closures.yaml
                                           # format); a relative path is looked up next to the
                                           # parameter file, then in the package's urdf/ folder

`joints` must be the closure file's actuated joints (any order: it is the order of the
efforts and of the bag's columns). The tree URDF is the one given on the command line or
to the node (`--urdf`); the closure file's own `urdf:` is used when none is given.
"""
from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError, ModelError


def closures_source(model, config, config_path=None) -> dict:
    """``{"closures": path}`` for a result's `source` when `model` is a closed chain (where
    `validate` finds the closures again), else ``{}``."""
    return {"closures": str(closures_path(config, config_path))} if hasattr(model, "closures") else {}


def closures_path(config, config_path=None) -> Path | None:
    """Where the config's `closures:` file is, or None for a serial arm."""
    value = config.parameters.get("closures") if hasattr(config, "parameters") else None
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{config.source}: closures: expected a file path, got {value!r}")
    p = Path(value)
    tried = []
    candidates = [p] if p.is_absolute() else []
    if not p.is_absolute():
        base = Path(config_path or config.source).parent
        candidates += [base / p, Path.cwd() / p]
        try:
            from ...util.resources import share_file
            candidates.append(share_file("urdf", p.name))
        except ModelError:
            pass
    for c in candidates:
        tried.append(str(c))
        if c.is_file():
            return c.resolve()
    raise ConfigError(f"{config.source}: closures: file {value!r} not found (looked in {', '.join(tried)})")


def closed_chain_model(urdf, config, friction=None, armature=None, path=None):
    """The ClosedChainModel the config describes (None when it names no closures)."""
    from . import ClosedChainModel, ClosedChainSpec

    path = path or closures_path(config)
    if path is None:
        return None
    spec = ClosedChainSpec.from_yaml(path)
    joints = tuple(config.joints)
    if set(joints) != set(spec.actuated) or len(joints) != len(spec.actuated):
        raise ConfigError(f"{config.source}: joints {list(joints)} must be the actuated joints of {path} "
                          f"({', '.join(spec.actuated)})")
    return ClosedChainModel(urdf if urdf is not None else spec.urdf, joints, spec.closures, spec.home, friction,
                            armature, tie=spec.tie or None)


def passive_limit_violations(model, trajectory, dt: float = 0.01) -> list[dict]:
    """Check a trajectory of the actuated joints against the passive joints' URDF limits,
    the passive positions coming from the closure solver (and against the workspace: a
    pose the solver cannot assemble is a violation). Returns one entry per violated joint
    (the worst sample), empty when every sample is fine."""
    import numpy as np

    t = np.arange(0.0, trajectory.duration + 0.5 * dt, dt)
    q_a = trajectory.sample(t)[0]
    lim = model.tree.limits
    names = model.tree.joint_names
    worst: dict[str, dict] = {}
    for k in range(len(t)):
        try:
            q = model.solve_positions(q_a[k])
        except ModelError as exc:
            return [{"joint": "(closure)", "time": float(t[k]), "reason": str(exc)}]
        for i, j in enumerate(names):
            if j in model.joint_names:
                continue
            v = q[model.tree_index(j)]
            excess = max(lim.lower[i] - v, v - lim.upper[i])
            if excess > 0 and excess > worst.get(j, {}).get("excess", 0.0):
                worst[j] = {"joint": j, "time": float(t[k]), "value": float(v), "excess": float(excess),
                            "limits": [float(lim.lower[i]), float(lim.upper[i])]}
    return list(worst.values())
