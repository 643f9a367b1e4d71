"""`robot-ident simulate` for a closed-chain robot (the config names a `closures:` file):
MuJoCo's closed-chain truth (sim/closed_chain_sim.py: the whole tree with the closures as
equality constraints) follows a trajectory of the actuated joints; the recording (actuated
positions and efforts, turned into motor currents by the config's actuators, e.g. screw
drives) is written to a rosbag2 with the truth file next to it."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from .. import defaults
from ..errors import ConfigError
from ..util.atomic import atomic_write_text
from ..util.progress import Progress

TRUTH_FILE = "robot_ident_truth.yaml"


@dataclass
class ClosedChainSimOutcome:
    bag: Path
    duration: float
    samples: int
    topics: dict
    truth_file: Path
    max_violation: float
    effort_noise_std: np.ndarray


def closed_chain_truth(model, sim_cfg) -> np.ndarray:
    """CAD inertial parameters with the `simulation:` section's armature, friction and offsets."""
    theta = model.nominal.copy()
    vals = sim_cfg.truth.values()
    for k, j in enumerate(model.joint_names):
        for s in model.layout.actuator_symbols:
            theta[model.layout.index(f"{j}.{s}")] = vals[s][k]
    return theta


def simulate_closed_chain_bag(urdf, config_path, trajectory, output, storage: str = defaults.STORAGE,
                              truth: np.ndarray | None = None, noise=None, progress: Progress | None = None,
                              position_noise: float | None = None,
                              joint_states_rate_hz: float = 500.0,
                              bag_version: int = defaults.BAG_VERSION) -> ClosedChainSimOutcome:
    """Simulate `trajectory` (any object with joint_names, duration, sample(t)) on the closed
    chain of the config and write the bag. `truth` (standard parameters in the model's
    layout) defaults to the CAD plus the `simulation:` section's drive parameters."""
    from ..data.bag import write_bag_from_config
    from ..estimation.pipeline import identification_config
    from ..io.config import load_config
    from ..io.model_loading import load_model
    from ..sim.closed_chain_sim import ClosedChainSim
    from ..sim.config import simulation_config

    progress = progress or Progress(quiet=True)
    cfg = load_config(config_path)
    icfg = identification_config(cfg.section("identification"))
    with progress.stage("model"):
        model = load_model(urdf, cfg, icfg)
        if not hasattr(model, "closures"):
            raise ConfigError(f"{config_path} names no closures: not a closed-chain robot")
        sim_cfg = simulation_config(cfg.section("simulation"), model)
        theta = closed_chain_truth(model, sim_cfg) if truth is None else np.asarray(truth, float)
        if set(trajectory.joint_names) != set(model.joint_names):
            raise ConfigError(f"the trajectory moves {list(trajectory.joint_names)}, the actuated joints are "
                              f"{list(model.joint_names)}")
        if tuple(trajectory.joint_names) != tuple(model.joint_names):
            raise ConfigError("the trajectory's joints must be in the config's order "
                              f"({', '.join(model.joint_names)})")
        from ..mechanisms.closed_chain.config import passive_limit_violations
        bad = passive_limit_violations(model, trajectory, dt=0.02)
        if bad:
            raise ConfigError("the trajectory takes passive joint(s) out of their limits or out of the "
                              "workspace: " + "; ".join(f"{b['joint']} at t = {b['time']:.2f} s" for b in bad))
        sim = ClosedChainSim(model, theta, nominal=model.nominal)
    nz = noise or sim_cfg.noise
    if position_noise is not None:
        nz = replace(nz, position_std=position_noise)
    with progress.stage("simulate"):
        run = sim.run(trajectory, noise=nz, progress=progress.fraction)
    from ..io.staging import StagedFolder
    with progress.stage("write bag"), StagedFolder(output, "bag", replace=False, create=False) as staged:
        # written aside and renamed into place: an interrupted write leaves nothing behind
        info = write_bag_from_config(staged, run.recording, cfg, storage=storage,
                                     current_noise_std=sim_cfg.current_noise, seed=nz.seed,
                                     joint_states_rate_hz=joint_states_rate_hz, version=bag_version)
        doc = {"note": "true standard parameters of the simulated closed chain (robot_ident simulate)",
               "joints": list(model.joint_names), "max_closure_violation_m": float(run.max_violation),
               "effort_noise_std": {j: float(s) for j, s in zip(model.joint_names, run.effort_noise_std)},
               "parameters": {n: float(v) for n, v in zip(model.layout.names, theta)}}
        atomic_write_text(staged / TRUTH_FILE, yaml.safe_dump(doc, sort_keys=False))
    truth_file = Path(output) / TRUTH_FILE
    return ClosedChainSimOutcome(Path(output), run.recording.duration, run.recording.n_samples, info.topics,
                                 truth_file, float(run.max_violation), run.effort_noise_std)
