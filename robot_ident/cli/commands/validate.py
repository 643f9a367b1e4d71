"""`robot-ident validate`: a result folder checked against another recording."""
from __future__ import annotations

from ...util.progress import Progress
from ._urdf import add_xacro_arg, urdf_of


def add_parser(sub):
    p = sub.add_parser("validate", help="per-joint RMS of a result on another rosbag2 recording",
                       description="Predicts the efforts of the bag with the identified parameters of RESULT and "
                                   "prints per-joint RMS and relative RMS; writes RESULT/validation.yaml.")
    p.add_argument("--bag", required=True, help="rosbag2 folder (or CSV/NPZ table) not used for the identification")
    p.add_argument("--result", required=True, help="result folder written by robot-ident identify")
    p.add_argument("--urdf", default=None, help="URDF (default: RESULT/model.urdf)")
    add_xacro_arg(p)
    p.add_argument("--config", default=None, help="parameter YAML (default: RESULT/config.yaml)")
    p.add_argument("--output", default=None, help="validation YAML to write (default: RESULT/validation.yaml)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    urdf = urdf_of(args)
    from ...offline.bag_workflow import format_validation, validate_bag
    o = validate_bag(args.bag, args.result, urdf, args.config, Progress(quiet=args.quiet), output=args.output)
    print("ratio: RMS on this bag over the identification's in-sample RMS (about 1 when the model holds)")
    print(format_validation(o.report, ratio_label="ratio"))
    print(f"wrote {o.output}")
    return 0
