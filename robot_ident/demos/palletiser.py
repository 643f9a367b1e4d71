"""The palletiser demo (issue 15, source D): a 4-axis palletiser of our own with a
gravity-balancer spring on the shoulder, identified from simulated rosbag2 recordings
with and without the spring in the model, and the balancer design question answered on
a pick-and-place cycle.

Truth (MuJoCo): every link's mass and inertia scaled by up to +-5 %, centres of mass
shifted by up to 5 mm, the spring a MuJoCo spatial tendon (stiffness 6000 N/m, free
length 0.05 m; the CAD says 5000 N/m), joint friction, armature and offsets from the
config's `simulation:` section, 1 % effort noise. The arm follows a designed excitation
(config/palletiser_excitation.yaml; identification bag, 3 x 10 s) and a random Fourier
trajectory (validation bag, 10 s).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from ..util.progress import Progress
from ..util.resources import share_file


@dataclass
class PalletiserSetup:
    true_stiffness: float = 6000.0          # N/m
    true_free_length: float = 0.05          # m
    seed: int = 0
    periods: int = 3                        # 10 s Fourier periods in the identification bag
    cycle_payload: float = 0.0
    # Trajectory YAML of the identification bag; default config/palletiser_excitation.yaml (designed by
    # `robot-ident design` on the spring model: cond criterion over the base parameters with K and F0).
    excitation: str | None = None
    mass_scale: float = 0.05
    com_shift: float = 0.005


@dataclass
class PalletiserOutcome:
    setup: PalletiserSetup
    true_K: float
    true_F0: float
    identified: dict                        # name -> (value, std) of the spring parameters
    validation_with: dict                   # joint -> RMS on the validation bag
    validation_without: dict
    noise: dict                             # joint -> effort noise std of the validation bag
    design: object                          # mechanisms.balancer.BalancerDesign
    output: Path
    extra: dict = field(default_factory=dict)


def palletiser_files() -> tuple[Path, Path]:
    return share_file("urdf", "palletiser.urdf"), share_file("config", "palletiser.yaml")


class WaypointCycle:
    """Rest-to-rest moves between waypoints (7th-order smoothstep per segment)."""

    def __init__(self, joint_names, waypoints, segment_time: float):
        self.joint_names = tuple(joint_names)
        self.w = np.asarray(waypoints, float)
        self.T = float(segment_time)
        self.duration = self.T * (len(self.w) - 1)

    def sample(self, t):
        from ..excitation.families import smoothstep7

        t = np.clip(np.atleast_1d(np.asarray(t, float)), 0.0, self.duration)
        seg = np.minimum((t // self.T).astype(int), len(self.w) - 2)
        tau = (t - seg * self.T) / self.T
        s, ds, dds = smoothstep7(tau)
        d = self.w[seg + 1] - self.w[seg]
        return (self.w[seg] + s[:, None] * d, (ds / self.T)[:, None] * d, (dds / self.T ** 2)[:, None] * d)


def pick_and_place_cycle(segment_time: float = 1.2) -> WaypointCycle:
    """home -> above pick -> pick -> above pick -> above place (turret +90 deg) -> place -> home."""
    home = [0.0, 0.0, 0.0, 0.0]
    above_pick = [-0.8, 0.5, 0.1, 0.0]
    pick = [-0.8, 0.9, 0.55, 0.0]
    above_place = [0.8, 0.5, 0.1, 1.57]
    place = [0.8, 1.1, 0.75, 1.57]
    return WaypointCycle(("turret", "shoulder", "elbow", "wrist"),
                         [home, above_pick, pick, above_pick, above_place, place, above_place, home], segment_time)


def true_parameters(cad, setup: PalletiserSetup) -> np.ndarray:
    rng = np.random.default_rng(setup.seed)
    theta = cad.nominal.copy()
    for body in cad.layout.body_joints:
        I = cad.body_inertia(theta, body)
        s = 1.0 + rng.uniform(-setup.mass_scale, setup.mass_scale)
        theta[cad.layout.inertial_slice(body)] = pin.Inertia(
            I.mass * s, I.lever + rng.uniform(-setup.com_shift, setup.com_shift, 3),
            I.inertia * s).toDynamicParameters()
    k = cad.layout.index("balancer.K")
    L_ref = cad.springs.reference_lengths[0]
    theta[k], theta[k + 1] = setup.true_stiffness, setup.true_stiffness * (L_ref - setup.true_free_length)
    return theta


def _simulate(cad, cfg, truth_urdf, theta, setup, traj, bag, seed):
    from ..data.bag import write_bag_from_config
    from ..sim import SimulatedArm
    from ..sim.balancer import spring_hook
    from ..sim.config import simulation_config

    sim = simulation_config(cfg.section("simulation"), cad)
    k = cad.layout.index("balancer.K")
    K, F0 = theta[k], theta[k + 1]
    L0 = cad.springs.reference_lengths[0] - F0 / K
    arm = SimulatedArm(str(truth_urdf), cad.joint_names, sim.truth, nominal=cad,
                       spec_hook=spring_hook(cad.springs, [K], [L0]))
    from dataclasses import replace
    run = arm.run(traj, None, replace(sim.noise, seed=seed))
    write_bag_from_config(bag, run.recording, cfg, current_noise_std=sim.current_noise, seed=seed)
    return dict(zip(cad.joint_names, run.effort_noise_std))


def identify_and_validate(urdf, config_path, bag, valid_bag, output):
    """The command line's identify (whole bag) and validate (another bag) from core pieces:
    (model, result, validation RMS per joint); writes the result folder."""
    from ..data.processing import process_one, segments_in_memory
    from ..data.signals import concatenate
    from ..estimation.pipeline import identification_config, identify, validate_result
    from ..io.config import load_config
    from ..io.model_loading import load_model
    from ..io.result_folder import write_result_folder

    cfg = load_config(config_path)
    icfg = identification_config(cfg.section("identification"))
    model = load_model(urdf, cfg, icfg)

    def read(path):
        processed = process_one(path, cfg, icfg.settings.filter)
        try:
            return concatenate(segments_in_memory(processed)), processed.summary
        finally:
            processed.close()

    data, summary = read(bag)
    result = identify(model, data, icfg.settings)
    validation = validate_result(result, model, read(valid_bag)[0], icfg.settings)
    write_result_folder(Path(output), model, result, validation, data,
                        {"source": {"bag": str(bag), "validation_bag": str(valid_bag), "synchronisation": summary}},
                        config_path, plots=False)
    return model, result, dict(zip(model.joint_names, (float(x) for x in validation.rms)))


def run_palletiser_demo(output, setup: PalletiserSetup | None = None,
                        progress: Progress | None = None) -> PalletiserOutcome:
    from ..estimation.pipeline import identification_config
    from ..excitation import FourierTrajectory
    from ..excitation.repeat import Repeated
    from ..io.config import load_config
    from ..io.model_loading import load_model
    from ..io.urdf_export import write_parameters
    from ..mechanisms.balancer import design_balancer
    from ..util.atomic import atomic_write_text

    setup = setup or PalletiserSetup()
    progress = progress or Progress(quiet=True)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    urdf, config = palletiser_files()
    cfg = load_config(config)
    icfg = identification_config(cfg.section("identification"))
    with progress.stage("model"):
        cad = load_model(urdf, cfg, icfg)
        theta = true_parameters(cad, setup)
        truth_xml, _ = write_parameters(cad, theta)
        truth_urdf = atomic_write_text(out / "truth.urdf", truth_xml)
        acc = np.array([3.0, 3.0, 3.0, 6.0])
        lim = cad.limits
        trajs = [FourierTrajectory.random_within_limits(cad.joint_names, lim.lower, lim.upper, lim.velocity, acc,
                                                        seed=setup.seed + s) for s in (11, 12)]
        from ..excitation.trajectory_file import load_trajectory
        trajs[0] = load_trajectory(setup.excitation or share_file("config", "palletiser_excitation.yaml")).trajectory
    with progress.stage("simulate identification bag"):
        _simulate(cad, cfg, truth_urdf, theta, setup, Repeated(trajs[0], setup.periods), out / "ident_bag",
                  setup.seed)
    with progress.stage("simulate validation bag"):
        noise = _simulate(cad, cfg, truth_urdf, theta, setup, trajs[1], out / "valid_bag", setup.seed + 1)
    # The same identification with the spring left out of the model, for comparison.
    doc = yaml.safe_load(Path(config).read_text())
    doc["robot_ident"]["ros__parameters"].pop("springs")
    no_spring = atomic_write_text(out / "config_without_spring.yaml", yaml.safe_dump(doc, sort_keys=False))
    res, results = {}, {}
    for label, cfg_path in (("with_spring", config), ("without_spring", no_spring)):
        with progress.stage(f"identify ({label.replace('_', ' ')})"):
            model, result, rms = identify_and_validate(urdf, cfg_path, out / "ident_bag", out / "valid_bag",
                                                       out / label)
            res[label] = rms
            results[label] = (model, result)
    model, result = results["with_spring"]
    ident = {n: (float(v), float(s)) for n, v, s in zip(result.names, result.values, result.std)
             if n.startswith("balancer.")}
    with progress.stage("balancer design"):
        theta_id = result.standard_values if result.standard_values is not None else theta
        cyc = pick_and_place_cycle()
        t = np.arange(0.0, cyc.duration, 0.005)
        q, qd, qdd = cyc.sample(t)
        design = design_balancer(cad, theta_id, t, q, qd, qdd, "balancer", "shoulder")
    k = cad.layout.index("balancer.K")
    return PalletiserOutcome(setup, float(theta[k]), float(theta[k + 1]), ident, res["with_spring"],
                             res["without_spring"], noise, design, out)


def plot_design(path, design) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(design.t, design.tau_without_spring, ":", label="without spring")
    ax.plot(design.t, design.tau_before, label=f"K = {design.stiffness_before:.0f} N/m (identified)")
    ax.plot(design.t, design.tau_peak, label=f"K = {design.stiffness_peak:.0f} N/m (min peak)")
    ax.plot(design.t, design.tau_ripple, "--", label=f"K = {design.stiffness_ripple:.0f} N/m (min ripple)")
    ax.set_xlabel("t [s]")
    ax.set_ylabel(f"{design.joint} torque [N·m]")
    ax.legend()
    ax.grid(True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_palletiser_summary(o: PalletiserOutcome) -> str:
    K, sK = o.identified.get("balancer.K", (np.nan, np.nan))
    F, sF = o.identified.get("balancer.F0", (np.nan, np.nan))
    lines = [f"palletiser with a shoulder balancer: true K {o.true_K:.1f} N/m, F0 {o.true_F0:.2f} N",
             f"identified K {K:.1f} +- {sK:.1f} N/m ({100 * (K - o.true_K) / o.true_K:+.3f} %), "
             f"F0 {F:.2f} +- {sF:.2f} N ({100 * (F - o.true_F0) / o.true_F0:+.3f} %)",
             "validation RMS on another trajectory (N·m), with the spring in the model / ignoring it / noise std:"]
    for j in o.validation_with:
        w, wo, n = o.validation_with[j], o.validation_without[j], o.noise[j]
        lines.append(f"  {j:<10}{w:>10.3f}{wo:>12.3f}{n:>10.3f}   ratio to noise {w / n:.3f} / {wo / n:.3f}")
    lines.append("balancer design on a pick-and-place cycle: " + o.design.summary())
    return "\n".join(lines)


def run_palletiser_cli(args) -> int:
    """`robot-ident demo --robot palletiser` (uses --output, --seed, --periods, --no-plots, --quiet)."""
    setup = PalletiserSetup(seed=args.seed, periods=max(1, int(args.periods)))
    out = args.output if args.output != "robot_ident_demo" else "robot_ident_palletiser"
    o = run_palletiser_demo(out, setup, Progress(quiet=args.quiet))
    if not args.no_plots:
        plot_design(Path(out) / "balancer_design.png", o.design)
    print(format_palletiser_summary(o))
    print(f"results: {out}/ (with_spring/, without_spring/, bags, truth.urdf"
          + ("" if args.no_plots else ", balancer_design.png") + ")")
    return 0
