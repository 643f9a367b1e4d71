"""The `--payload` variants of `design` and `identify` (kept apart from the shared commands)."""
from __future__ import annotations

from ...errors import ConfigError


def run_design(args, cfg, joints, urdf) -> int:
    from ...estimation.payload import payload_config
    from ...excitation.payload_design import design_payload_excitation
    from ...excitation.trajectory_file import TrajectoryFile, save_trajectory
    from ...io.config import load_config
    from ...model.robot import RobotModel

    full = RobotModel(urdf, joints)
    doc = load_config(args.config, args.node)
    pcfg = payload_config(doc.section("payload"), full)
    excited = pcfg.excited(full)
    held = pcfg.held_pose(full, excited)
    missing = [j for j in full.joint_names if j not in cfg.acceleration_limits]
    if missing:
        raise ConfigError(f"{args.config}: {args.node}.ros__parameters.excitation.acceleration_limits: "
                          f"no limit for joint(s) {', '.join(missing)}")
    spec = cfg.design_spec(excited, optimizer=args.optimizer, criterion=args.criterion, family=args.family,
                           max_time=args.time_limit, max_evals=args.max_evals, seed=args.seed)
    result = design_payload_excitation(urdf, full.joint_names, pcfg.frame, excited, held,
                                       cfg.acceleration_limits, spec, cfg.margins, cfg.effort_limits,
                                       collision_spec=cfg.collision, package_dirs=args.package_dir)
    tf = TrajectoryFile.from_design(result)
    tf.criterion["payload"] = {"frame": pcfg.frame, "excited_joints": list(excited),
                               "held_pose": {j: float(v) for j, v in held.items()},
                               "columns": "10 inertial columns of the body carrying the payload"}
    save_trajectory(args.output, tf)
    o = result.optimizer
    print(f"payload excitation ({spec.family}) of {', '.join(excited)}, others held at "
          + ", ".join(f"{j}={v:.3g}" for j, v in held.items())
          + f": cond {result.cond:.4g} on the payload's 10 columns, {o.n_evals} evaluations in {o.wall_time:.1f} s, "
            f"duration {result.trajectory.duration:.1f} s")
    print(f"limits (whole arm): {result.report.summary()}")
    if not result.cond < 1e6:
        print(f"warning: this motion cannot determine every payload parameter (cond {result.cond:.3g}); "
              "excite more joints (payload.joints)")
    print(f"wrote {args.output}")
    return 0


def run_identify(args, urdf) -> int:
    from ...offline.inputs import print_stderr
    from ...offline.payload_workflow import format_payload, identify_payload_bag
    from ...util.progress import Progress

    if args.result is None and args.urdf is None:
        raise ConfigError("identify --payload needs the arm's model: --result DIR or --urdf FILE")
    bag = args.bag[0] if isinstance(args.bag, list) else args.bag
    o = identify_payload_bag(bag, args.config, args.output, result_dir=args.result, urdf=urdf,
                             frame=args.frame, holdout=args.holdout, refit_friction=args.refit_friction,
                             progress=Progress(quiet=args.quiet), force=args.force, warn=print_stderr)
    print(f"arm model: {o.arm.source}")
    print(format_payload(o.estimate, o.holdout_rms))
    files = sorted(p.name for p in o.output.iterdir() if not p.name.startswith("."))
    print(f"payload folder: {o.output}/ ({', '.join(files)})")
    return 0
