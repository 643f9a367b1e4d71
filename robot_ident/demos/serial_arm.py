"""The whole loop on the built-in simulated arm, no hardware, no ROS.

1. The demo arm's URDF is the CAD model. The simulated "real" arm differs from it:
   every link's mass and inertia are scaled by a few percent (`cad_error`) and its centre of mass
   shifted by a few millimetres, and a 0.8 kg payload sits on the flange. Its joints
   have armature, Coulomb and viscous friction, and its effort sensors an offset.
2. Excitation: a Fourier series within the joint limits (not optimised here).
3. MuJoCo follows it at 1 kHz; positions, velocities and efforts get sensor noise
   (effort noise: a chosen fraction of each joint's effort RMS).
4. Filter, differentiate, decimate; identify base parameters (WLS by default) from
   the first trajectory; validate on a second, different trajectory.
5. Compare with the simulator's truth and write the result folder.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pinocchio as pin

from .. import defaults
from ..data.signals import ProcessedData, process
from ..errors import ModelError
from ..estimation import IdentificationResult
from ..estimation.pipeline import IdentificationSettings, base_parameters, identify, validate_result
from ..estimation.validation import ValidationReport
from ..excitation import FourierTrajectory
from ..io.effort_plot import plot_efforts
from ..io.results import result_to_dict, write_identified_urdf, write_result_yaml
from ..io.samples import write_run_samples
from ..io.urdf_export import write_parameters
from ..model.base import BaseParameters
from ..model.robot import RobotModel
from ..report.html import write_html_report
from ..sim import JointTruth, SimNoise, SimulatedArm
from ..util.atomic import atomic_write_text
from ..util.progress import Progress
from ..util.resources import share_file


@dataclass(frozen=True)
class DemoSetup:
    """Everything the demo varies; defaults are the figures quoted in docs/benchmarks.md."""

    effort_noise: float = defaults.DEMO_NOISE   # fraction of each joint's effort RMS
    identification_periods: int = defaults.DEMO_PERIODS   # of the 10 s Fourier period
    validation_periods: int = 1
    harmonics: int = 5
    base_frequency: float = 0.2 * np.pi
    acceleration_limits: tuple = (6.0, 6.0, 8.0, 10.0, 10.0, 10.0)
    limit_margin: float = 0.1
    seed: int = defaults.DEMO_SEED
    settings: IdentificationSettings = field(default_factory=IdentificationSettings)
    # The simulated arm's joints (in the demo arm's joint order).
    armature: tuple = (0.40, 0.40, 0.25, 0.04, 0.04, 0.03)
    coulomb: tuple = (3.6, 3.4, 2.2, 0.70, 0.65, 0.45)
    viscous: tuple = (1.8, 2.1, 1.3, 0.35, 0.28, 0.22)
    effort_offset: tuple = (0.4, -0.3, 0.25, 0.04, -0.03, 0.02)
    payload_mass: float = 0.8
    payload_com: tuple = (0.0, 0.11, 0.02)   # in the last joint's frame
    cad_error: float = 0.08                  # the true masses and inertias: CAD x (1 +- cad_error)
    # Another robot instead of the demo arm (the per-joint tuples above must match it).
    urdf: str | None = None
    joints: tuple | None = None


@dataclass
class Experiment:
    """A simulated arm run twice: identification and held-out validation data."""

    cad: RobotModel
    arm: SimulatedArm
    true_theta: np.ndarray          # the simulated arm's standard parameters (cad's layout)
    ident_data: ProcessedData
    valid_data: ProcessedData
    ident_noise_std: np.ndarray
    valid_noise_std: np.ndarray


@dataclass
class DemoOutcome:
    model: RobotModel
    base: BaseParameters
    result: IdentificationResult
    validation: ValidationReport
    noise_std: np.ndarray
    true_base: np.ndarray
    timings: dict
    output: Path | None

    @property
    def well_determined(self) -> np.ndarray:
        return self.result.relative_std < 5.0

    @property
    def relative_errors(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.abs(self.result.values - self.true_base) / np.abs(self.true_base)


def demo_urdf() -> Path:
    return share_file("urdf", "demo_arm.urdf")


def true_arm_parameters(cad: RobotModel, setup: DemoSetup) -> np.ndarray:
    """The simulated arm's standard inertial parameters: the CAD ones perturbed (physically
    consistent: scaled mass and inertia, shifted centre of mass) plus a flange payload."""
    rng = np.random.default_rng(setup.seed)
    theta = cad.nominal.copy()
    last = cad.layout.body_joints[-1]
    for body in cad.layout.body_joints:
        I = cad.body_inertia(theta, body)
        scale = 1.0 + rng.uniform(-setup.cad_error, setup.cad_error)
        shifted = pin.Inertia(I.mass * scale, I.lever + rng.uniform(-0.005, 0.005, 3), I.inertia * scale)
        if body == last:
            payload = pin.Inertia(setup.payload_mass, np.array(setup.payload_com),
                                  np.diag([4e-4, 3e-4, 4e-4]))
            shifted = shifted + payload
        theta[cad.layout.inertial_slice(body)] = shifted.toDynamicParameters()
    return theta


def declare_payload(settings: IdentificationSettings, cad: RobotModel, payload_mass: float) -> IdentificationSettings:
    """The demo knows its flange payload: widen the last body's mass bounds for the physical
    estimate (what a user does in `identification.physical.bodies`) unless already set."""
    last = cad.layout.body_joints[-1]
    if payload_mass <= 0 or last in settings.physical.bodies:
        return settings
    m = float(cad.nominal[cad.layout.inertial_slice(last)][0])
    lo, hi = settings.physical.mass_ratio
    bodies = {**settings.physical.bodies, last: {"mass": (lo * m, hi * m + 2.0 * payload_mass)}}
    return replace(settings, physical=replace(settings.physical, bodies=bodies))


def simulate_experiment(setup: DemoSetup, progress: Progress) -> Experiment:
    """Build the CAD model and the differing simulated arm, run the identification and the
    validation trajectories, and process both recordings."""
    with progress.stage("model"):
        cad = RobotModel(setup.urdf or demo_urdf(), setup.joints)
        n = cad.n
        for label in ("acceleration_limits", "armature", "coulomb", "viscous", "effort_offset"):
            if len(getattr(setup, label)) != n:
                raise ModelError(f"demo setup {label} needs {n} entries, one per joint of {cad.joint_names}")
        truth_theta = true_arm_parameters(cad, setup)
        truth_urdf, _ = write_parameters(cad, truth_theta)
        truth = JointTruth(np.array(setup.armature), np.array(setup.coulomb), np.array(setup.viscous),
                           np.array(setup.effort_offset))
        arm = SimulatedArm(truth_urdf, cad.joint_names, truth, nominal=cad)

    lim = cad.limits
    acc = np.array(setup.acceleration_limits, float)
    trajs = [FourierTrajectory.random_within_limits(
        cad.joint_names, lim.lower, lim.upper, lim.velocity, acc, wf=setup.base_frequency,
        harmonics=setup.harmonics, margin=setup.limit_margin, seed=setup.seed + k) for k in (1, 2)]
    periods = (setup.identification_periods, setup.validation_periods)
    runs = []
    with progress.stage("simulate"):
        for k, (traj, reps) in enumerate(zip(trajs, periods)):
            noise = SimNoise(effort_rel_std=setup.effort_noise, seed=setup.seed + 10 * (k + 1))
            runs.append(arm.run(traj, reps * traj.period, noise,
                                progress=lambda f, k=k: progress.fraction((k + f) / 2)))
    with progress.stage("process"):
        ident_data = process(runs[0].recording, setup.settings.filter)
        valid_data = process(runs[1].recording, setup.settings.filter)
    return Experiment(cad, arm, arm.true_parameters(cad), ident_data, valid_data,
                      runs[0].effort_noise_std, runs[1].effort_noise_std)


def run_demo(output: str | Path | None = defaults.DEMO_OUTPUT, setup: DemoSetup | None = None,
             progress: Progress | None = None, plots: bool = True) -> DemoOutcome:
    setup = setup or DemoSetup()
    progress = progress or Progress(quiet=True)
    settings = setup.settings
    if output is not None:
        from ..io.staging import check_output_folder, release_output
        check_output_folder(output, "result")        # before any work (takes its lock)
        try:
            return _run_demo(output, setup, progress, plots, settings)
        finally:
            release_output(output)
    return _run_demo(output, setup, progress, plots, settings)


def _run_demo(output, setup: DemoSetup, progress: Progress, plots: bool, settings) -> DemoOutcome:
    exp = simulate_experiment(setup, progress)
    cad, ident_data, valid_data = exp.cad, exp.ident_data, exp.valid_data
    with progress.stage("base parameters"):
        base = base_parameters(cad, settings)
        true_base = base.project(exp.true_theta)
    settings = declare_payload(settings, cad, setup.payload_mass)
    with progress.stage("identify"):
        result = identify(cad, ident_data, settings, base)
    with progress.stage("validate"):
        noise_std = exp.valid_noise_std
        validation = validate_result(result, cad, valid_data, settings, noise_std)

    outcome = DemoOutcome(cad, base, result, validation, noise_std, true_base, progress.timings, None)
    if output is not None:
        with progress.stage("write"):
            out = Path(output)
            rel = outcome.relative_errors
            good = outcome.well_determined
            extra = {"demo": {
                "effort_noise_fraction_of_rms": setup.effort_noise,
                "effort_noise_std": {j: float(s) for j, s in zip(cad.joint_names, noise_std)},
                "true_base_parameters": [float(v) for v in true_base],
                "well_determined_count": int(good.sum()),
                "median_relative_error_well_determined": float(np.median(rel[good])) if good.any() else None,
                "stage_seconds": {k: round(v, 4) for k, v in progress.timings.items()},
            }}
            from ..io.staging import StagedFolder
            with StagedFolder(out, "result") as tmp:      # written aside, swapped in whole
                write_result_yaml(tmp, result_to_dict(result, cad, validation, extra))
                write_identified_urdf(tmp, cad, result)
                atomic_write_text(tmp / "model.urdf", cad.urdf_xml)
                write_run_samples(tmp, cad, result, ident_data, valid_data)
                if plots:
                    pred_id = result.predict(cad, ident_data.q, ident_data.qd, ident_data.qdd)
                    plot_efforts(tmp / "identification_efforts.png", ident_data.t, ident_data.effort_raw, pred_id,
                                 cad.joint_names, "Identification trajectory: measured vs predicted effort")
                    plot_efforts(tmp / "validation_efforts.png", validation.t, validation.measured,
                                 validation.predicted, cad.joint_names,
                                 "Validation trajectory (held out): measured vs predicted effort")
                    write_html_report(tmp)
            outcome.output = out
    outcome.timings = dict(progress.timings)
    return outcome


def format_summary(o: DemoOutcome) -> str:
    v, r = o.validation, o.result
    lines = ["", "Validation on a held-out trajectory (samples outside the friction dead band:",
             f"|qd| > {v.moving_threshold} rad/s and > {r.extra['reversal_guard_s']:.3f} s from a velocity reversal)",
             "",
             f"{'joint':<14}{'RMS [N*m]':>11}{'noise std':>11}{'RMS/noise':>11}{'rel. RMS':>10}{'samples':>9}"]
    for k, j in enumerate(v.joint_names):
        lines.append(f"{j:<14}{v.rms[k]:>11.4f}{o.noise_std[k]:>11.4f}{v.noise_ratio[k]:>11.3f}"
                     f"{100 * v.relative_rms[k]:>9.2f}%{v.n_samples[k]:>9d}")
    good = o.well_determined
    rel = o.relative_errors
    lines += ["",
              f"method {r.method}, {r.n_samples} samples, {r.n_rows} equations, "
              f"condition number {r.condition_number:.1f}",
              f"base parameters: {o.base.size} of {len(o.base.standard_names)} standard",
              f"well-determined (relative std < 5 %): {int(good.sum())}; median relative error against the "
              f"simulator's truth: {100 * np.median(rel[good]):.3f} %" if good.any() else
              "no well-determined base parameter",
              "stage wall time: " + ", ".join(f"{k} {t:.2f} s" for k, t in o.timings.items())]
    if o.output is not None:
        files = [f for f in ("result.yaml", "model.urdf", "samples.npz", "identification_efforts.png",
                             "validation_efforts.png", "report.html") if (o.output / f).exists()]
        if (o.output / "identified.urdf").exists():
            files.insert(1, "identified.urdf")
        lines.append(f"result folder: {o.output}/ ({', '.join(files)})")
    return "\n".join(lines)
