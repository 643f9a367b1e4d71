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
    p.add_argument("--urdf", required=True, help="robot URDF (CAD values are the prior and the fallback)")
    p.add_argument("--config", required=True, help="ROS 2 parameter YAML")
    p.add_argument("--output", required=True, help="result folder")
    p.add_argument("--method", choices=sorted(ESTIMATORS), default=None,
                   help="estimator (default: identification.method of the config, else wls)")
    p.add_argument("--holdout", type=float, default=None,
                   help="fraction of the recording's end kept for validation (default: config, else 0.2)")
    p.add_argument("--force", action="store_true",
                   help="identify even when the plausibility checks refuse the input, and replace an output "
                        "folder that is not a robot_ident result")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    o = identify_bag(args.bag, args.urdf, args.config, args.output, args.method, args.holdout,
                     Progress(quiet=args.quiet), plots=not args.no_plots, force=args.force)
    r = o.result
    print(o.sync_summary)
    print(f"method {r.method}: {r.n_samples} samples, {r.n_rows} equations, {len(r.values)} base parameters, "
          f"condition number {r.condition_number:.1f}")
    if r.quality is not None and not r.quality["good"]:
        print("model quality: NOT A GOOD MODEL (" + "; ".join(r.quality["reasons"]) + "); see the warning above "
              "and model_quality in result.yaml")
    if o.warnings:
        print(f"{len(o.warnings)} warning(s) (also in result.yaml under input_checks)")
    if o.validation is not None:
        in_sample = [r.extra["raw_residual_rms"][j] for j in r.joint_names]
        o.validation.noise_ratio = o.validation.rms / in_sample
        print("validation on the held-out end of the recording (ratio: held-out RMS over in-sample RMS,\n"
              "both against the raw measured effort; about 1 when the model holds on new data):")
        print(format_validation(o.validation, ratio_label="ratio"))
    files = sorted(p.name for p in o.output.iterdir() if not p.name.startswith("."))
    print(f"result folder: {o.output}/ ({', '.join(files)})")
    return 0
