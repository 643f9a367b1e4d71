"""`robot-ident monitor`: an identified model over a recording -- external torques, contacts, model health."""
from __future__ import annotations

from ... import defaults
from ...util.progress import Progress
from ._urdf import add_xacro_arg, urdf_of


def add_parser(sub):
    p = sub.add_parser("monitor", help="external torques, contact events and model health of a recording",
                       description="Runs a result's model over a recording as the monitor node does next to the "
                                   "arm: a generalised-momentum observer estimates the external joint torques, "
                                   "contacts are where they leave the no-contact band (the result's residual RMS "
                                   "times --threshold, and at least 4.5 times its held-out residual as the observer "
                                   "passes it), and the model's health (residual, friction drift, payload "
                                   "change) is judged. Writes OUTPUT/events.yaml, monitor.npz, monitor.png "
                                   "and monitor.html.")
    p.add_argument("--bag", required=True, help="rosbag2 folder (or CSV/NPZ table) to monitor")
    p.add_argument("--result", required=True, help="result folder written by robot-ident identify")
    p.add_argument("--output", required=True, help="new folder (or a monitor folder to replace)")
    p.add_argument("--urdf", default=None, help="URDF (default: RESULT/model.urdf)")
    add_xacro_arg(p)
    p.add_argument("--config", default=None, help="parameter YAML (default: RESULT/config.yaml)")
    p.add_argument("--gain", type=float, default=None,
                   help=f"observer gain K [1/s]: a step is seen at 1 - exp(-K t) (default {defaults.MONITOR_GAIN:g})")
    p.add_argument("--threshold", type=float, default=None,
                   help=f"contact threshold in multiples of each joint's band (default {defaults.MONITOR_THRESHOLD:g})")
    p.add_argument("--calibration", type=float, default=None, metavar="SECONDS",
                   help="seconds at the start that learn the observer's own noise; keep them free of contact "
                        f"(default {defaults.MONITOR_CALIBRATION_S:g})")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    from dataclasses import replace
    urdf = urdf_of(args)

    from ...monitor.observer import ObserverSettings
    from ...offline.monitor_workflow import monitor_bag
    s = ObserverSettings()
    given = (("gain", args.gain), ("threshold", args.threshold), ("calibration_s", args.calibration))
    s = replace(s, **{k: v for k, v in given if v is not None})
    o = monitor_bag(args.bag, args.result, args.output, urdf=urdf, config_path=args.config, settings=s,
                    progress=Progress(quiet=args.quiet))
    level = o.health.get("level", "OK")
    print(f"monitored {o.duration:.2f} s ({o.samples} samples); model health "
          + (level if level != "n/a" else f"not judged ({o.health.get('note')})"))
    if not o.events:
        print("no contact")
    for e in o.events:
        d = e.as_dict()
        print(f"contact on {d['joint']}: {d['start']:.3f}-{d['end']:.3f} s, peak {d['peak']:+.4g}"
              + (" (still on at the end)" if e.open else ""))
    print(f"wrote {o.output}/events.yaml, monitor.npz, monitor.png, monitor.html")
    return 0
