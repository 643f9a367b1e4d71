"""`robot-ident identify`: rosbag2 recordings and/or tables in, a result folder out."""
from __future__ import annotations

from ... import defaults
from ...errors import ConfigError
from ...util.progress import Progress
from ._urdf import add_package_dir, add_xacro_arg, urdf_of


def add_parser(sub):
    p = sub.add_parser("identify", help="identify the model from rosbag2 recordings or tables",
                       description="Reads joint states and currents (or efforts) from the bags and tables, "
                                   "synchronises them, converts currents to efforts, checks them, identifies, "
                                   "validates on the held-out samples (--holdout*, --validate-bag) and writes "
                                   "OUTPUT/result.yaml, OUTPUT/identified.urdf (methods with standard parameters) "
                                   "and plots. Give at least one --bag or --table; --urdf is needed unless "
                                   "--payload --result.")
    p.add_argument("--bag", action="append", default=[],
                   help="rosbag2 folder (sqlite3 or mcap); repeat for several recordings (each its own segments)")
    p.add_argument("--table", action="append", default=[],
                   help="CSV or NPZ table (layout: docs/user-guide.md, 'Several recordings, tables and arrays'); "
                        "repeatable")
    p.add_argument("--validate-bag", action="append", default=[], metavar="PATH",
                   help="a whole recording (bag or table) kept for validation only; repeatable")
    p.add_argument("--urdf", help="robot URDF (CAD values are the prior and the fallback); required unless "
                                  "--payload --result")
    add_xacro_arg(p)
    add_package_dir(p, "the physical bounds' link geometry")
    p.add_argument("--config", required=True, help="ROS 2 parameter YAML")
    p.add_argument("--output", required=True, help="result folder")
    p.add_argument("--method", default=None,
                   help="estimator: ols, wls, robust, rls, physical, sobol-ga or sobol-ls (default: "
                        f"identification.method of the config, else {defaults.METHOD})")
    p.add_argument("--holdout", type=float, default=None,
                   help="the last fraction of all samples (in input order) kept for validation (default: "
                        f"identification.holdout of the config, else {defaults.HOLDOUT:g}; 0 with --validate-bag)")
    p.add_argument("--holdout-window", default=None, metavar="T0:T1",
                   help="hold out the samples T0..T1 s from the start of each recording")
    p.add_argument("--holdout-every", type=int, default=None, metavar="K",
                   help="hold out every K-th segment (or block, see --holdout-block)")
    p.add_argument("--holdout-block", type=float, default=None, metavar="S",
                   help="with --holdout-every: cut segments into blocks of S seconds")
    p.add_argument("--cutoff", default=None, metavar="HZ|auto",
                   help="low-pass cutoff; default: identification.filter.cutoff_hz of the config, else "
                        "chosen from the data (cross-validated) and reported")
    p.add_argument("--force", action="store_true",
                   help="identify even when the plausibility checks refuse the input (an output folder "
                        "robot_ident did not write is never replaced)")
    p.add_argument("--payload", action="store_true",
                   help="identify a payload on the config's payload.frame with the arm known (--result or --urdf)")
    p.add_argument("--result", help="with --payload: the arm's result folder (else the URDF's CAD values)")
    p.add_argument("--frame",
                   help="with --payload: link the payload is fixed to (default: payload.frame of the config, else "
                        f"{defaults.PAYLOAD_FRAME})")
    p.add_argument("--refit-friction", action="store_true",
                   help="with --payload --result: re-estimate the moving joints' friction and armature too")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def _holdout(args):
    """The --holdout* options as a data.holdout.Holdout, or None."""
    from ...data.holdout import Holdout

    chosen = [x is not None for x in (args.holdout, args.holdout_window, args.holdout_every)]
    if sum(chosen) > 1:
        raise ConfigError("choose one of --holdout, --holdout-window and --holdout-every")
    if args.holdout_block is not None and args.holdout_every is None:
        raise ConfigError("--holdout-block needs --holdout-every")
    if args.holdout_window is not None:
        try:
            t0, t1 = (float(v) for v in args.holdout_window.split(":"))
        except ValueError:
            raise ConfigError(f"--holdout-window must be T0:T1 in seconds, got {args.holdout_window!r}") from None
        return Holdout(window=(t0, t1))
    if args.holdout_every is not None:
        return Holdout(every=args.holdout_every, block_s=args.holdout_block)
    if args.holdout is not None:
        return Holdout(fraction=args.holdout)
    return None


def _cutoff(value) -> float | None:
    if value is None or value == "auto":
        return None
    try:
        c = float(value)
    except ValueError:
        raise ConfigError(f"--cutoff must be a frequency in Hz or 'auto', got {value!r}") from None
    if not c > 0:
        raise ConfigError(f"--cutoff must be positive, got {value!r}")
    return c


def run(args) -> int:
    from ...estimation import ESTIMATORS
    from ...offline.bag_workflow import format_validation
    from ...offline.inputs import identify_inputs

    urdf = urdf_of(args)
    if args.method is not None and args.method not in ESTIMATORS:
        raise ConfigError(f"--method {args.method!r} is not an estimator; choose one of "
                          f"{', '.join(sorted(ESTIMATORS))}")
    if args.payload:
        from ._payload import run_identify
        if len(args.bag) != 1 or args.table or args.validate_bag:
            raise ConfigError("identify --payload takes exactly one --bag (no --table or --validate-bag)")
        unsupported = [o for o, v in (("--method", args.method), ("--cutoff", args.cutoff),
                                      ("--holdout-window", args.holdout_window),
                                      ("--holdout-every", args.holdout_every)) if v is not None]
        if unsupported:
            raise ConfigError(f"identify --payload does not take {', '.join(unsupported)}")
        return run_identify(args, urdf)
    if args.urdf is None:
        raise ConfigError("--urdf is required (except with --payload --result)")
    if not args.bag and not args.table:
        raise ConfigError("give at least one recording: --bag PATH or --table PATH")
    cutoff = _cutoff(args.cutoff)
    holdout = _holdout(args)
    o = identify_inputs(list(args.bag) + list(args.table), urdf, args.config, args.output,
                        validate_inputs=args.validate_bag, method=args.method, holdout=holdout,
                        cutoff_hz=cutoff, force_auto_cutoff=args.cutoff == "auto",
                        progress=Progress(quiet=args.quiet), plots=not args.no_plots, force=args.force,
                        package_dirs=args.package_dir)
    summary = o.summary
    r = o.result
    print(summary)
    print(f"method {r.method}: {r.n_samples} samples, {r.n_rows} equations, {len(r.values)} base parameters, "
          f"condition number {r.condition_number:.1f}")
    if r.quality is not None and not r.quality["good"]:
        from ...estimation.conditioning import quality_reasons
        print("model quality: NOT A GOOD MODEL (" + "; ".join(quality_reasons(r.quality)) + "); see the warning above "
              "and model_quality in result.yaml")
    n_warn = sum(1 for w in o.warnings if not w.startswith("note:"))
    if n_warn:
        print(f"{n_warn} warning(s) (also in result.yaml under input_checks)")
    if o.validation is not None:
        in_sample = [r.extra["raw_residual_rms"][j] for j in r.joint_names]
        o.validation.noise_ratio = o.validation.rms / in_sample
        print("validation on the held-out data (ratio: held-out RMS over in-sample RMS,\n"
              "both against the raw measured effort; about 1 when the model holds on new data):")
        print(format_validation(o.validation, ratio_label="ratio"))
    files = sorted(p.name for p in o.output.iterdir() if not p.name.startswith("."))
    print(f"result folder: {o.output}/ ({', '.join(files)})")
    return 0
