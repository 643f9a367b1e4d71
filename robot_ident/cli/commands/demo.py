"""`robot-ident demo`: the whole loop on the built-in simulated arm."""
from __future__ import annotations

from ... import defaults
from ...errors import ConfigError
from ...util.progress import Progress

# What each --robot leaves unused: given with another value than its default, it is refused
# by name rather than silently ignored.
UNUSED = {"demo_arm": ("velocity_noise",),
          "space": ("output", "noise", "method", "periods", "no_plots"),
          "hybrid5": ("velocity_noise", "no_plots"),
          "palletiser": ("noise", "method", "velocity_noise")}
DEFAULTS = {"output": defaults.DEMO_OUTPUT, "noise": defaults.DEMO_NOISE, "method": defaults.METHOD,
            "periods": defaults.DEMO_PERIODS, "no_plots": False,
            "velocity_noise": 0.001}


def add_parser(sub):
    p = sub.add_parser("demo", help="identify the built-in simulated arm end to end (no hardware, no ROS)",
                       description="Simulate the demo arm in MuJoCo, identify it and validate on a held-out "
                                   "trajectory; prints a per-joint table and writes a result folder.")
    p.add_argument("--output", default=DEFAULTS["output"],
                   help="result folder (default: %(default)s; --robot palletiser: robot_ident_palletiser)")
    p.add_argument("--noise", type=float, default=DEFAULTS["noise"],
                   help="effort noise std as a fraction of each joint's effort RMS (default: %(default)s)")
    p.add_argument("--method", default=DEFAULTS["method"],
                   help="estimator: ols, wls, robust, rls, physical, sobol-ga or sobol-ls (default: %(default)s)")
    p.add_argument("--periods", type=int, default=DEFAULTS["periods"],
                   help="10 s excitation periods used for identification (default: %(default)s)")
    p.add_argument("--seed", type=int, default=defaults.DEMO_SEED, help="random seed (default: %(default)s)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--robot", choices=("demo_arm", "space", "hybrid5", "palletiser"), default="demo_arm",
                   help="demo_arm: the fixed-base arm (default); space: a free-floating space robot, base then "
                        "grasped payload identified from momentum conservation (LS and GA); hybrid5: source A's "
                        "5-DOF hybrid machining robot (closed chain, virtual work; WLS and Sobol + GA); palletiser: "
                        "a palletiser with a shoulder balancer spring, identified with and without the spring, and "
                        "the stiffness that minimises the peak shoulder torque of a pick-and-place cycle")
    p.add_argument("--velocity-noise", type=float, default=DEFAULTS["velocity_noise"],
                   help="--robot space: velocity noise std as a fraction of each signal's RMS (default: %(default)s)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from ...demos.serial_arm import DemoSetup, format_summary, run_demo
    from ...estimation.pipeline import IdentificationSettings

    robot = getattr(args, "robot", "demo_arm")
    unused = [k for k in UNUSED[robot] if getattr(args, k, DEFAULTS[k]) != DEFAULTS[k]]
    if unused:
        raise ConfigError(f"demo --robot {robot} does not use " + ", ".join("--" + k.replace("_", "-") for k in unused)
                          + " (see robot-ident demo --help)")
    if robot == "space":
        return run_space(args)
    if getattr(args, "robot", "demo_arm") == "hybrid5":
        return run_hybrid(args)
    if getattr(args, "robot", "demo_arm") == "palletiser":
        from ...demos.palletiser import run_palletiser_cli
        return run_palletiser_cli(args)
    if not args.noise >= 0:
        raise ConfigError(f"--noise must be >= 0, got {args.noise}")
    if args.periods < 1:
        raise ConfigError(f"--periods must be >= 1, got {args.periods}")
    setup = DemoSetup(effort_noise=args.noise, identification_periods=args.periods, seed=args.seed,
                      settings=IdentificationSettings(method=args.method))
    outcome = run_demo(args.output, setup, Progress(quiet=args.quiet), plots=not args.no_plots)
    print(format_summary(outcome))
    return 0


def run_space(args) -> int:
    from ...demos.space import SpaceDemoSetup, format_space_summary, run_space_demo
    if not args.velocity_noise >= 0:
        raise ConfigError(f"--velocity-noise must be >= 0, got {args.velocity_noise}")
    outcome = run_space_demo(SpaceDemoSetup(noise=args.velocity_noise, seed=args.seed), Progress(quiet=args.quiet))
    print(format_space_summary(outcome))
    return 0


def run_hybrid(args) -> int:
    from ...demos.hybrid import HybridDemoSetup, format_hybrid_summary, run_hybrid_demo, write_hybrid_results
    if not args.noise >= 0:
        raise ConfigError(f"--noise must be >= 0, got {args.noise}")
    if args.periods < 1:
        raise ConfigError(f"--periods must be >= 1, got {args.periods}")
    methods = ("wls", "sobol-ga", "sobol-ls")
    if args.method not in methods:
        methods += (args.method,)
    setup = HybridDemoSetup(effort_noise=args.noise, segments=2 * args.periods, seed=args.seed, methods=methods)
    outcome = run_hybrid_demo(setup, Progress(quiet=args.quiet))
    if args.output:
        write_hybrid_results(args.output, outcome)
    print(format_hybrid_summary(outcome))
    return 0
