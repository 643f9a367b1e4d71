"""`robot-ident design`: optimise an excitation trajectory and write its YAML."""
from __future__ import annotations

from ... import defaults
from ...errors import ConfigError
from ._urdf import add_package_dir, add_xacro_arg, urdf_of


def add_parser(sub):
    p = sub.add_parser(
        "design", help="design an optimised excitation trajectory (writes a trajectory YAML)",
        description="Optimise an excitation trajectory for the identified joints of a URDF within the "
                    "position/velocity limits of the URDF and the acceleration limits of the config, check it "
                    "densely and write it with its criterion value and limit report.")
    p.add_argument("--urdf", required=True, help="robot description (URDF file)")
    add_xacro_arg(p)
    p.add_argument("--config", required=True,
                   help="ROS 2 parameter YAML (robot_ident: ros__parameters: {joints, excitation: ...})")
    p.add_argument("--output", required=True, help="trajectory YAML to write")
    p.add_argument("--optimizer", choices=("slsqp", "ga", "pso", "qga"),
                   help=f"the optimiser (default: excitation.optimizer of the config, else {defaults.OPTIMIZER})")
    p.add_argument("--criterion", choices=("cond", "logdet"),
                   help="what is minimised: the condition number or -log det of the regressor (default: "
                        f"excitation.criterion of the config, else {defaults.CRITERION})")
    p.add_argument("--family", choices=("fourier", "modified_fourier", "polynomial7", "joint_moves"),
                   help=f"trajectory family (default: excitation.family of the config, else {defaults.FAMILY})")
    p.add_argument("--joints", nargs="+", metavar="JOINT",
                   help="identified joints (default: the config's joints, else every movable joint)")
    p.add_argument("--time-limit", type=float,
                   help="optimiser wall-time budget in seconds (default: excitation.max_time of the config, else "
                        f"{defaults.MAX_TIME_S:g})")
    p.add_argument("--max-evals", type=int,
                   help="optimiser evaluation budget (default: excitation.max_evaluations of the config, else none)")
    p.add_argument("--seed", type=int,
                   help=f"random seed (default: excitation.seed of the config, else {defaults.SEED})")
    p.add_argument("--node", default="robot_ident", help="node section of the config (default: %(default)s)")
    p.add_argument("--payload", action="store_true",
                   help="excitation for payload identification: only the config's payload.joints move (default: "
                        "the last three), the others are held at payload.pose; criterion on the payload's columns")
    add_package_dir(p, "the collision checks")
    p.set_defaults(func=run)
    return p


NAME_WEAKEST_ABOVE = 1e3     # cond above which design names the combination the trajectory separates least
RANK_DEFICIENT = 1e6


def weakest_line(model, result) -> str:
    """The combination of base parameters the designed trajectory tells apart least, and why
    (estimation/weak_directions.py): a note, or a warning when the regressor is nearly rank
    deficient."""
    import numpy as np

    from ...estimation.weak_directions import from_regressor
    from ...model.base import BaseParameters
    base = BaseParameters.from_model(model)
    traj = result.trajectory
    t = np.linspace(0.0, traj.duration, result.spec.n_evaluation)
    weak = from_regressor(base.regressor(model.regressor(*traj.sample(t))), model, base)
    kind = "warning" if not result.cond < RANK_DEFICIENT else "note"
    return (f"{kind}: cond {result.cond:.3g}: this trajectory tells apart {weak['text']} least; "
            f"{weak['advice']}")


def run(args) -> int:
    urdf = urdf_of(args)
    from ...excitation.collision.safety import build_collision_model, warn_no_geometry
    from ...excitation.config import load_excitation_config
    from ...excitation.constraints import LimitSpec
    from ...excitation.designer import design_excitation
    from ...excitation.trajectory_file import TrajectoryFile, is_trajectory_file, save_trajectory
    from ...io.staging import check_output_file

    check_output_file(args.output, is_trajectory_file, "trajectory file")      # before a minute of design
    cfg = load_excitation_config(args.config, args.node)
    joints = args.joints
    if joints is not None and len(joints) == 1 and "," in joints[0]:
        joints = [j for j in joints[0].split(",") if j]
    joints = joints or (list(cfg.joints) if cfg.joints else None)
    if args.time_limit is not None and not args.time_limit > 0:
        raise ConfigError(f"--time-limit must be positive, got {args.time_limit}")
    if args.max_evals is not None and args.max_evals <= 0:
        raise ConfigError(f"--max-evals must be positive, got {args.max_evals}")
    if args.payload:
        from ._payload import run_design
        return run_design(args, cfg, joints, urdf)
    from ...io.model_loading import closed_chain_from_file
    from ...mechanisms.closed_chain.config import passive_limit_violations
    from ...model.spring import spring_model_from_file  # springs of the config are part of the model
    model = closed_chain_from_file(urdf, args.config, args.node)   # the config's closures: actuated joints
    closed = model is not None
    if closed and joints is not None and set(joints) != set(model.joint_names):
        raise ConfigError("--joints: a closed chain is designed on its actuated joints "
                          f"({', '.join(model.joint_names)})")
    model = model or spring_model_from_file(urdf, joints, args.config, args.node)
    if not closed:       # a misspelt key in a section design does not read is named now, not at identify
        from ...offline.config_check import check_unread_sections
        check_unread_sections(args.config, model, args.node)
    from ...estimation.plausibility import urdf_notes
    for note in urdf_notes(model):
        print(note.line(), flush=True)
    missing = [j for j in model.joint_names if j not in cfg.acceleration_limits]
    if missing:
        raise ConfigError(f"{args.config}: {args.node}.ros__parameters.excitation.acceleration_limits: "
                          f"no limit for joint(s) {', '.join(missing)}")
    limits = LimitSpec.from_model(model, cfg.acceleration_limits, cfg.margins, use_effort=cfg.effort_limits)
    spec = cfg.design_spec(model.joint_names, optimizer=args.optimizer, criterion=args.criterion,
                           family=args.family, max_time=args.time_limit, max_evals=args.max_evals,
                           seed=args.seed)
    if closed:      # the collision model needs the passive joints of every pose: not built for closed chains yet
        print("warning: collisions are NOT checked for a closed chain (its passive joints are not in the collision "
              "model yet); only the joint limits, passive ones included, are", flush=True)
        collision = None
    else:
        collision = build_collision_model(model, cfg.collision, args.package_dir)
        if collision.has_geometry:
            print(collision.describe())
        else:
            warn_no_geometry()
    result = design_excitation(model, limits, spec,
                               collision=collision if collision is not None and collision.has_geometry else None,
                               progress=lambda line: print(f"[design] {line}", flush=True))
    if closed:      # passive joints from the closure solver against their URDF limits
        bad = passive_limit_violations(model, result.trajectory, dt=0.01)
        if bad:
            raise ConfigError("the designed trajectory takes passive joint(s) out of their limits or the "
                              "mechanism out of its workspace: " + "; ".join(
                                  f"{b['joint']} at t = {b['time']:.2f} s" + (f" ({b['reason']})" if "reason" in b
                                                                           else f" ({b['value']:.4g})")
                                  for b in bad))
    save_trajectory(args.output, TrajectoryFile.from_design(result))
    if result.range_note:
        print(result.range_note)
    o = result.optimizer
    print(f"{spec.family} trajectory for {len(model.joint_names)} joints, {spec.optimizer}: "
          f"cond {result.cond:.4g}, logdet {result.logdet:.4g} ({result.base_size} base parameters), "
          f"{o.n_evals} evaluations in {o.wall_time:.1f} s")
    print(f"limits: {result.report.summary()}")
    if result.collision_report is not None:
        print(f"collisions: {result.collision_report.summary()}")
    else:
        warn_no_geometry()
    if not result.cond < NAME_WEAKEST_ABOVE and not closed:
        print(weakest_line(model, result))
    print(f"wrote {args.output}")
    return 0
