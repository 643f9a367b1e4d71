"""`robot-ident simulate`: the simulated arm follows a trajectory and writes a rosbag2."""
from __future__ import annotations

from ... import defaults
from ...util.progress import Progress
from ._urdf import add_package_dir, add_xacro_arg, urdf_of


def add_parser(sub):
    p = sub.add_parser("simulate", help="simulate the arm following a trajectory and write a rosbag2 folder",
                       description="MuJoCo follows the trajectory (robot-ident design output); the bag holds "
                                   "/joint_states (500 Hz) and the configured current source (1 kHz), with the "
                                   "noise and joint friction of the config's `simulation:` section.")
    p.add_argument("--urdf", required=True, help="robot URDF")
    add_xacro_arg(p)
    p.add_argument("--config", required=True, help="ROS 2 parameter YAML (joints, actuators, simulation)")
    p.add_argument("--trajectory", required=True, help="trajectory YAML from robot-ident design")
    p.add_argument("--output", required=True, help="new rosbag2 folder")
    p.add_argument("--storage", choices=("sqlite3", "mcap"), default=defaults.STORAGE,
                   help="rosbag2 storage (default: %(default)s)")
    p.add_argument("--repetitions", type=int, default=defaults.REPETITIONS,
                   help="times the trajectory is run (default: %(default)s)")
    p.add_argument("--bag-version", type=int, choices=(8, 9), default=defaults.BAG_VERSION,
                   help="rosbag2 metadata version (default: %(default)s; 8 plays on Humble and later, 9 on "
                        "Jazzy's newer rosbag2 only)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    add_package_dir(p, "the collision checks")
    p.add_argument("--push", nargs=6, default=None, metavar=("LINK", "FX", "FY", "FZ", "START", "END"),
                   help="an external force (N, world frame) on LINK's centre of mass from START to END s, which "
                        "the controller is not told about: a contact for robot-ident monitor to find (its joint "
                        "torques' peaks go into the truth file)")
    p.set_defaults(func=run)


def _push(values):
    if values is None:
        return None
    from ...errors import ConfigError
    from ...sim.mujoco_arm import ExternalForce
    try:
        fx, fy, fz, start, end = (float(v) for v in values[1:])
    except ValueError:
        raise ConfigError(f"--push: FX FY FZ START END must be numbers, got {' '.join(values[1:])}") from None
    if not start < end:
        raise ConfigError(f"--push: START ({start:g} s) must come before END ({end:g} s)")
    return ExternalForce(values[0], (fx, fy, fz), start, end)


def run(args) -> int:
    urdf = urdf_of(args)
    from ...offline.bag_workflow import simulate_to_bag
    o = simulate_to_bag(urdf, args.config, args.trajectory, args.output, args.storage, args.repetitions,
                        Progress(quiet=args.quiet), package_dirs=args.package_dir, bag_version=args.bag_version,
                        external=_push(args.push))
    topics = ", ".join(f"{t} ({n} messages)" for t, n in o.topics.items())
    print(f"wrote {o.bag}: {o.duration:.2f} s, {topics}; true parameters in {o.truth_file}")
    return 0
