"""`robot-ident identify`: a rosbag2 recording in, a result folder out."""
from __future__ import annotations

from ...estimation import ESTIMATORS
from ...offline.bag_workflow import format_validation, identify_bag
from ...util.progress import Progress


def add_parser(sub):
    p = sub.add_parser("identify", help="identify the model from a rosbag2 recording",
                       description="Reads joint states and currents (or efforts) from the bag, synchronises "
                                   "them, converts currents to efforts, identifies, validates on the held-out "
                                   "tail and writes DIR/result.yaml, DIR/identified.urdf (physically consistent "
                                   "methods) and plots.")
    p.add_argument("--bag", required=True, help="rosbag2 folder (sqlite3 or mcap)")
    p.add_argument("--urdf", help="robot URDF (CAD values are the prior and the fallback); required unless "
                                  "--payload --result")
    p.add_argument("--config", required=True, help="ROS 2 parameter YAML")
    p.add_argument("--output", required=True, help="result folder")
    p.add_argument("--method", choices=sorted(ESTIMATORS), default=None,
                   help="estimator (default: identification.method of the config, else wls)")
    p.add_argument("--holdout", type=float, default=None,
                   help="fraction of the recording's end kept for validation (default: config, else 0.2)")
    p.add_argument("--payload", action="store_true",
                   help="identify a payload on the config's payload.frame with the arm known (--result or --urdf)")
    p.add_argument("--result", help="with --payload: the arm's result folder (else the URDF's CAD values)")
    p.add_argument("--frame", help="with --payload: link the payload is fixed to (default: payload.frame, tool0)")
    p.add_argument("--refit-friction", action="store_true",
                   help="with --payload --result: re-estimate the moving joints' friction and armature too")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.payload:
        from ._payload import run_identify
        return run_identify(args)
    if args.urdf is None:
        from ...errors import ConfigError
        raise ConfigError("--urdf is required (except with --payload --result)")
    o = identify_bag(args.bag, args.urdf, args.config, args.output, args.method, args.holdout,
                     Progress(quiet=args.quiet), plots=not args.no_plots)
    r = o.result
    print(o.sync_summary)
    print(f"method {r.method}: {r.n_samples} samples, {r.n_rows} equations, {len(r.values)} base parameters, "
          f"condition number {r.condition_number:.1f}")
    if o.validation is not None:
        in_sample = [r.extra["raw_residual_rms"][j] for j in r.joint_names]
        o.validation.noise_ratio = o.validation.rms / in_sample
        print("validation on the held-out end of the recording (ratio: held-out RMS over in-sample RMS,\n"
              "both against the raw measured effort; about 1 when the model holds on new data):")
        print(format_validation(o.validation, ratio_label="ratio"))
    files = sorted(p.name for p in o.output.iterdir() if not p.name.startswith("."))
    print(f"result folder: {o.output}/ ({', '.join(files)})")
    return 0
