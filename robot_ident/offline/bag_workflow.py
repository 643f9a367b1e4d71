"""The offline path: simulated arm -> rosbag2, and validation of a result on another
recording (rosbag2 -> result folder is offline/inputs.py). The command line calls these."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from .. import defaults
from ..errors import ConfigError
from ..estimation.pipeline import identification_config
from ..estimation.validation import ValidationReport, not_validated_lines
from ..io.model_loading import load_model
from ..io.result_model import load_result_model
from ..io.samples import write_validation_samples
from ..io.urdf_export import write_parameters
from ..model.robot import RobotModel
from ..util.atomic import atomic_write_text
from ..util.progress import Progress
from .inputs import print_stderr

TRUTH_FILE = "robot_ident_truth.yaml"


# ----------------------------------------------------------------------- simulate
@dataclass
class SimulateOutcome:
    bag: Path
    duration: float
    samples: int
    topics: dict
    truth_file: Path


def simulate_to_bag(urdf, config_path, trajectory_path, output, storage: str = defaults.STORAGE,
                    repetitions: int = defaults.REPETITIONS, progress: Progress | None = None,
                    package_dirs=(), bag_version: int = defaults.BAG_VERSION, external=None) -> SimulateOutcome:
    """`external`: a `sim.mujoco_arm.ExternalForce` pushing on a link (a contact, for the monitor);
    its joint torques' peaks go into the truth file."""
    from ..io.staging import check_output_folder, release_output

    progress = progress or Progress(quiet=True)
    if repetitions < 1:
        raise ConfigError(f"repetitions must be >= 1, got {repetitions}")
    check_output_folder(output, "bag", replace=False)          # before any work (takes its lock)
    try:
        return _simulate(urdf, config_path, trajectory_path, output, storage, repetitions, progress, package_dirs,
                         bag_version, external)
    finally:
        release_output(output)


def _simulate(urdf, config_path, trajectory_path, output, storage, repetitions, progress, package_dirs,
              bag_version, external=None) -> SimulateOutcome:
    from ..data.bag import write_bag_from_config
    from ..excitation.trajectory_file import load_trajectory
    from ..io.config import load_config
    from ..io.staging import StagedFolder
    from ..sim import SimulatedArm
    from ..sim.config import simulation_config
    from .sim_checks import check_trajectory_against_urdf

    cfg = load_config(config_path)
    if cfg.parameters.get("closures"):       # a closed chain: offline/closed_chain_workflow.py
        if external is not None:
            raise ConfigError("an external force is simulated on serial arms only (this config has closures)")
        from ..excitation.repeat import Repeated
        from .closed_chain_workflow import simulate_closed_chain_bag
        o = simulate_closed_chain_bag(urdf, config_path, Repeated(load_trajectory(trajectory_path).trajectory,
                                                                  repetitions), output, storage, progress=progress,
                                      bag_version=bag_version)
        return SimulateOutcome(o.bag, o.duration, o.samples, o.topics, o.truth_file)
    icfg = identification_config(cfg.section("identification"))
    cad = load_model(urdf, cfg, icfg)
    sim = simulation_config(cfg.section("simulation"), cad)
    traj = load_trajectory(trajectory_path).trajectory
    if set(traj.joint_names) != set(cad.joint_names):
        raise ConfigError(f"trajectory {trajectory_path} moves joints {list(traj.joint_names)}, the config "
                          f"identifies {list(cad.joint_names)}")
    check_trajectory_against_urdf(traj, cad, str(trajectory_path))
    with progress.stage("check"):
        # Limits and collisions re-checked here, whatever the file's stored report says.
        from ..excitation.collision.safety import check_for_use
        check_for_use(urdf, config_path, traj, package_dirs)
    with progress.stage("model"):
        theta = sim.truth_parameters(cad)
        truth_urdf, _ = write_parameters(cad, theta)
        order = [cad.joint_names.index(j) for j in traj.joint_names]
        truth = type(sim.truth)(*(np.asarray(a)[order] for a in (sim.truth.armature, sim.truth.coulomb,
                                                                  sim.truth.viscous, sim.truth.offset)))
        hook, nominal = None, RobotModel(cad.urdf_xml, traj.joint_names, transmission=cad.transmission)
        if hasattr(cad, "springs"):      # the config's springs: MuJoCo tendons with its stiffness and free length
            from ..model.spring import SpringRobotModel
            from ..sim.balancer import spring_hook, true_free_length
            sv = theta[cad.spring_slice()]
            hook = spring_hook(cad.springs, sv[0::2], true_free_length(cad.springs, sv))
            nominal = SpringRobotModel(cad.urdf_xml, traj.joint_names, springs=cad.springs.specs,
                                       transmission=cad.transmission)
        arm = SimulatedArm(truth_urdf, traj.joint_names, truth, nominal=nominal, spec_hook=hook,
                           transmission=cad.transmission)
    from ..excitation.repeat import Repeated
    with progress.stage("simulate"):
        run = arm.run(Repeated(traj, repetitions), None, sim.noise, progress=progress.fraction, external=external)
    with progress.stage("write bag"), StagedFolder(output, "bag", replace=False, create=False) as staged:
        # written aside and renamed into place: an interrupted write leaves nothing behind
        info = write_bag_from_config(staged, run.recording, cfg, storage=storage,
                                     current_noise_std=sim.current_noise, seed=sim.noise.seed,
                                     version=bag_version)
        ordered = RobotModel(cad.urdf_xml, traj.joint_names, friction=cad.friction, transmission=cad.transmission)
        true_theta = arm.true_parameters(ordered)
        names = ordered.layout.names
        truth_doc = {"note": "true standard parameters of the simulated arm (robot_ident simulate)",
                     "joints": list(traj.joint_names),
                     "effort_noise_std": {j: float(s) for j, s in zip(traj.joint_names, run.effort_noise_std)},
                     "parameters": {n: float(v) for n, v in zip(names, true_theta)}}
        if external is not None:
            peak = run.tau_external[np.argmax(np.abs(run.tau_external), axis=0), np.arange(len(traj.joint_names))]
            truth_doc["external_force"] = {"link": external.link, "force": [float(f) for f in external.force],
                                           "start": float(external.start), "end": float(external.end),
                                           "peak_joint_torques": {j: float(v) for j, v in zip(traj.joint_names, peak)}}
        if hasattr(cad, "springs"):
            truth_doc["parameters"].update({n: float(v) for n, v in zip(cad.springs.names, theta[cad.spring_slice()])})
        atomic_write_text(staged / TRUTH_FILE, yaml.safe_dump(truth_doc, sort_keys=False))
    truth_file = Path(output) / TRUTH_FILE
    return SimulateOutcome(Path(output), run.recording.duration, run.recording.n_samples, info.topics, truth_file)


# ----------------------------------------------------------------------- validate
@dataclass
class ValidateOutcome:
    report: ValidationReport
    noise_sigma: np.ndarray      # the identification's in-sample RMS against the raw effort
    output: Path


def validate_bag(bag, result_dir, urdf=None, config_path=None, progress: Progress | None = None,
                 output=None, warn=print_stderr) -> ValidateOutcome:
    """Per-joint RMS of a result on another bag. Joints are matched by name; a config with
    other joints, a URDF of another layout, or a bag whose efforts do not follow the
    result's prediction (another robot) is a one-line error. Writes `output` (default
    DIR/validation.yaml), checked before any work. Reads `bag` (a rosbag2 folder or a table)
    through the one pipeline (estimation/flow.py), in bounded memory, with the recording
    checks (spikes only warn); their ``warning:`` lines go to `warn` and validation.yaml."""
    from ..io.samples import VALIDATION_FILE, is_samples_file
    from ..io.staging import check_output_file

    progress = progress or Progress(quiet=True)
    rdir = Path(result_dir)
    out = check_output_file(Path(output) if output is not None else rdir / "validation.yaml", is_validation_file,
                            "validation file")
    check_output_file(out.parent / VALIDATION_FILE, is_samples_file, "samples file")     # written beside it
    r = load_result_model(rdir, urdf, config_path)
    d, base, values, cfg, model, raw, icfg = r.doc, r.base, r.values, r.cfg, r.model, r.raw_rms, r.icfg
    vsettings = icfg.settings
    chosen = (d.get("source") or {}).get("filter_cutoff_hz")
    from dataclasses import replace
    if chosen:   # the cutoff the identification used (chosen from the data when the config has none)
        vsettings = replace(vsettings, filter=replace(vsettings.filter, cutoff_hz=float(chosen)))
    if (d.get("source") or {}).get("use_measured_velocity") is False:   # as the identification decided
        vsettings = replace(vsettings, filter=replace(vsettings.filter, use_measured_velocity=False))
    settings = d.get("settings", {})
    thr = float(settings.get("moving_threshold", icfg.settings.moving_threshold))
    guard = float(settings.get("reversal_guard_s", icfg.settings.guard_s))
    from ..data.processing import input_fingerprint
    fp = input_fingerprint(bag, cfg)
    same = [k for k, p in ((d.get("source") or {}).get("fingerprints") or {}).items() if fp is not None and p == fp]
    in_sample = ([f"warning: {bag} holds the data result {rdir} was identified from ({same[0]}; a copy?): these "
                  "ratios are in-sample, they measure the fit, not new data; validate on another recording"]
                 if same else [])
    in_sample += _structure_of_result(d, rdir)
    sigma = np.array([raw[j] for j in model.joint_names])
    from ..estimation.flow import validate_source
    report, n, findings, kept = validate_source(bag, cfg, vsettings.filter, model, base, values, thr, guard, sigma,
                                                progress, judge=lambda slopes: _other_robot(slopes, rdir))
    in_sample += _retraces_result(rdir, bag, kept[0])
    # the samples for the report go next to the validation file (the result folder by default)
    write_validation_samples(out.parent, model, *kept, max_samples=kept[0].n_samples)
    doc = {"format": VALIDATION_FORMAT, "bag": str(bag), "result": str(rdir), "samples": int(n),
           "dead_band": {"velocity": thr, "reversal_guard_s": guard},
           "note": "rms_over_noise_std divides by the identification's in-sample RMS against the raw effort",
           "warnings": in_sample + [f.line() for f in findings] + not_validated_lines(report),
           "in_sample": bool(same), "joints": report.as_dict()}
    for line in doc["warnings"]:
        warn(line)
    return ValidateOutcome(report, sigma, atomic_write_text(out, yaml.safe_dump(doc, sort_keys=False)))


VALIDATION_FORMAT = "robot_ident/validation"


def is_validation_file(path: Path) -> bool:
    """validation.yaml of `validate_bag` (its format; before it had one, its keys)."""
    d = yaml.safe_load(path.read_text(encoding="utf-8"))
    return isinstance(d, dict) and (d.get("format") == VALIDATION_FORMAT or {"bag", "result", "joints"} <= set(d))


def _structure_of_result(d: dict, rdir) -> list[str]:
    """The result's own structure finding, repeated: its ratios on another recording do not
    clear a model whose residual followed what the config lacks (the same error is in both)."""
    found = ((d.get("model_quality") or {}).get("misses_structure")) or []
    if not found:
        return []
    return [f"warning: result {rdir} misses structure its identification data showed (on joint "
            + ", ".join(repr(f.get("joint")) for f in found) + "): these ratios cannot clear it -- a wrong "
            "structure is as wrong on every recording; fix the config (see its result.yaml model_quality)"]


def _retraces_result(rdir, bag, data) -> list[str]:
    """The note when `bag`'s kept samples retrace the identification's motion (the result's
    samples.npz; nothing to compare without one, or when its joints differ)."""
    from ..estimation.retrace import retrace_note, retraced_fraction
    from ..io.samples import read_samples
    stored = read_samples(rdir)
    ident = None if stored is None else stored.sets.get("identification")
    if ident is None or ident.q is None or ident.qd is None or stored.joints != tuple(data.joint_names):
        return []
    return retrace_note(str(bag), retraced_fraction(ident.t, ident.q, ident.qd, data.q, data.qd))


def _other_robot(slopes: dict, rdir) -> list:
    """Joints whose bag efforts do not follow the result's prediction (joint -> (slope,
    partial correlation)): the bag or the result of another robot."""
    from ..estimation.plausibility import GAIN_WARN, Finding, off_prediction
    return [Finding("error" if not GAIN_WARN[0] <= a <= GAIN_WARN[1] else "warning", f"joint {j!r}",
                    f"the bag's efforts are {a:.3g} x what result {rdir} predicts: a bag or result of another "
                    "robot, payload or torque constant, or another direction -- these ratios measure that, not "
                    "the model")
            for j, a in off_prediction(slopes)]


def format_validation(report: ValidationReport, model_units=None, ratio_label="RMS/noise") -> str:
    lines = [f"{'joint':<16}{'RMS':>12}{'rel. RMS':>10}{'NRMS':>9}{ratio_label:>12}{'samples':>9}"]
    for k, j in enumerate(report.joint_names):
        if j in report.not_validated:
            lines.append(f"{j:<16}  not validated: {report.not_validated[j]}")
            continue
        ratio = f"{report.noise_ratio[k]:.3f}" if report.noise_ratio is not None else "-"
        nrms = (f"{100 * report.nrms[k]:.2f}%" + ("r" if report.nrms_reference[k] == "effort_range" else " ")
                if report.nrms is not None else "-")
        lines.append(f"{j:<16}{report.rms[k]:>12.5g}{100 * report.relative_rms[k]:>9.2f}%{nrms:>9}{ratio:>12}"
                     f"{report.n_samples[k]:>9d}")
    if report.nrms is not None:
        lines.append("NRMS: RMS over the URDF effort limit (r: over the measured effort range, no limit in the URDF)")
    return "\n".join(lines)

