"""Excitation-design benchmark: every optimiser on the same problem and budget.

    python bench/excitation.py [--time-a 30] [--time-b 10] [--seeds 1] [--evals N] [--cpu]

Problems (Panda from example-robot-data, fingers locked, finite Fourier series of
source B with 5 harmonics, wf = 0.2*pi rad/s, URDF position and velocity limits,
acceleration limits from the config below, margins 0.05 rad / 5 %):

  (a)  7 arm joints, 69 base parameters (inertial + armature, Coulomb, viscous, offset)
  (b)  first 3 joints, same parameter blocks (25 base parameters)
  (b') first 3 joints, rigid-body parameters only (source B's setting; it reports
       cond 9.47 after 100 QGA generations for its own arm and parameter set)

With collision constraints (issues 11, 25; ``--problems ur5,panda-col,jaco2,xarm7``): the
UR5 (meshes, acceleration limits 5/5/6/8/8/8 rad/s^2), the Panda (7 joints), the Kinova
JACO2 (continuous joints 1, 4, 6: +-pi) and the xArm7, SLSQP, Fourier family, floor at the
base plane, margin 3 cm, designed without and with the collision constraints; reported:
cond, wall and CPU time (on a shared machine the CPU time is the one-core figure), the
closest pair of robot_ident's dense (1 ms) check and the closest pair on the original
meshes by the tests' independent checker (test/collision_oracle.py).

Each optimiser gets the same wall-time budget per problem (with --cpu the same CPU-time
budget, the one-core figure on a shared machine; with --evals the same evaluation
budget, a gradient counting as 3n + 1 evaluations). ``slsqp`` is the default minimax
descent, ``slsqp:surrogate`` the previous default (smooth p-norm surrogate, polish on a
4x grid). Reported per run: evaluations used, wall and CPU time, cond and log-det of the base regressor on 1000 uniform
samples of the period (not the 100 optimisation samples), and the dense (1 ms) limit
check. BLAS is pinned to one thread so the optimisers' timings are comparable on the
2-core machine.
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import sysconfig  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from robot_ident.model.base import BaseParameters  # noqa: E402
from robot_ident.excitation.config import load_excitation_config  # noqa: E402
from robot_ident.excitation.constraints import LimitSpec  # noqa: E402
from robot_ident.excitation.designer import design_excitation  # noqa: E402
from robot_ident.model.robot import FrictionOptions, RobotModel  # noqa: E402

PANDA = tuple(f"panda_joint{i}" for i in range(1, 8))

CONFIG = """\
robot_ident:
  ros__parameters:
    joints: [panda_joint1, panda_joint2, panda_joint3, panda_joint4, panda_joint5, panda_joint6, panda_joint7]
    excitation:
      family: fourier
      criterion: cond
      harmonics: 5
      base_frequency: 0.6283185307179586
      margins: {position: 0.05, velocity: 0.05, acceleration: 0.05}
      # Franka Emika Panda datasheet joint acceleration limits [rad/s^2]
      acceleration_limits: {panda_joint1: 15.0, panda_joint2: 7.5, panda_joint3: 10.0, panda_joint4: 12.5,
                            panda_joint5: 15.0, panda_joint6: 20.0, panda_joint7: 20.0}
      samples: 100
      constraint_points: 100
"""

OPTIMIZERS = ("slsqp", "slsqp:surrogate", "ga", "pso", "qga")


def panda_urdf() -> Path:
    rel = Path("cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf")
    candidates = []
    try:
        import example_robot_data  # noqa: F401
        candidates.append(Path(example_robot_data.__file__).resolve().parents[3] / rel)
    except ImportError:
        pass
    for base in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]):
        candidates.append(Path(base) / rel)
    candidates.append(Path(sys.prefix) / "share/example-robot-data/robots/panda_description/urdf/panda.urdf")
    for c in candidates:
        if c.is_file():
            return c
    raise SystemExit("Panda URDF of example-robot-data not found; pip install example-robot-data")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-a", type=float, default=30.0, help="wall budget per optimiser, problem (a) [s]")
    ap.add_argument("--time-b", type=float, default=10.0, help="wall budget per optimiser, problems (b) [s]")
    ap.add_argument("--evals", type=int, default=None, help="equal evaluation budget instead of wall time")
    ap.add_argument("--seeds", type=int, default=1, help="seeds per optimiser (median reported)")
    ap.add_argument("--optimizers", default=",".join(OPTIMIZERS),
                    help="comma separated; name:form picks an slsqp form (slsqp:surrogate = the previous "
                         "default descent)")
    ap.add_argument("--cpu", action="store_true",
                    help="time budgets in CPU seconds of this process (fair on a shared machine)")
    ap.add_argument("--problems", default="a,b,b'",
                    help="a, b, b', ur5, panda-col, jaco2, xarm7 (comma separated)")
    ap.add_argument("--time-ur5", type=float, default=120.0, help="wall budget, UR5 with collisions [s]")
    ap.add_argument("--time-panda", type=float, default=60.0,
                    help="wall budget, Panda, JACO2 and xArm7 with collisions [s]")
    ap.add_argument("--collision-only", action="store_true",
                    help="ur5 / panda-col: skip the design without collision constraints")
    args = ap.parse_args(argv)

    urdf = panda_urdf()
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = Path(tmp) / "excitation.yaml"
        cfg_path.write_text(CONFIG)
        cfg = load_excitation_config(cfg_path)

    problems = {
        "a": ("(a) Panda 7 joints", PANDA, FrictionOptions(), args.time_a),
        "b": ("(b) Panda joints 1-3", PANDA[:3], FrictionOptions(), args.time_b),
        "b'": ("(b') joints 1-3, rigid body only", PANDA[:3],
               FrictionOptions(armature=False, coulomb=False, viscous=False, offset=False), args.time_b),
    }
    print(f"URDF: {urdf}")
    print(f"budget: {'%d evaluations' % args.evals if args.evals else 'equal CPU time' if args.cpu else 'equal wall time'}, "
          f"seeds: {args.seeds}, BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS')}")
    for key in args.problems.split(","):
        if key in COLLISION_PROBLEMS:
            collision_problem(key, cfg, args)
            continue
        title, joints, friction, t_budget = problems[key]
        model = RobotModel(urdf, joints, friction=friction)
        base = BaseParameters.from_model(model)
        limits = LimitSpec.from_model(model, cfg.acceleration_limits, cfg.margins)
        budget = (f"{args.evals} evals" if args.evals else f"{t_budget:g} s")
        print(f"\n{title}: {base.size} base parameters, {cfg.spec_kwargs['harmonics']} harmonics, "
              f"wf = 0.2*pi rad/s, budget {budget} per run")
        print(f"{'optimiser':<16} {'evals':>8} {'wall s':>7} {'cpu s':>7} {'cond':>8} {'log-det':>9} "
              f"{'start cond':>10}  {'dense check':<12}")
        from dataclasses import replace
        for label in args.optimizers.split(","):
            name, _, form = label.partition(":")
            rows = []
            for seed in range(args.seeds):
                spec = cfg.design_spec(joints, optimizer=name, seed=seed,
                                       max_time=None if args.evals else t_budget)
                spec = replace(spec, cpu_time=args.cpu,
                               optimizer_options=dict(spec.optimizer_options, **({"form": form} if form else {})))
                if args.evals:
                    spec = replace(spec, max_evals=args.evals, max_time=None)
                t0, c0 = time.perf_counter(), time.process_time()
                res = design_excitation(model, limits, spec, base=base)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                rows.append((res.cond, res.logdet, res.optimizer.n_evals, wall, cpu,
                             float(np.exp(res.optimizer.initial_f)), res.report.valid))
            rows.sort(key=lambda r: r[0])
            cond, logdet, evals, wall, cpu, cstart, ok = rows[len(rows) // 2]
            spread = f" [{rows[0][0]:.1f}-{rows[-1][0]:.1f}]" if len(rows) > 1 else ""
            print(f"{label:<16} {evals:>8d} {wall:>7.1f} {cpu:>7.1f} {cond:>8.2f} {logdet:>9.2f} {cstart:>10.1f}  "
                  f"{'pass' if all(r[6] for r in rows) else 'FAIL':<12}{spread}", flush=True)
    return 0


UR5_ACC = {"shoulder_pan_joint": 5.0, "shoulder_lift_joint": 5.0, "elbow_joint": 6.0, "wrist_1_joint": 8.0,
           "wrist_2_joint": 8.0, "wrist_3_joint": 8.0}
# arm: (folder, URDF, joints or None, acceleration limits, SRDF the independent check honours)
ARMS = {
    "ur5": ("ur_description/urdf", "ur5_robot.urdf", None, UR5_ACC, None),
    "panda-col": ("panda_description/urdf", "panda.urdf", PANDA, None, "panda_description/srdf/panda.srdf"),
    "jaco2": ("kinova_description/robots", "kinova.urdf", tuple(f"j2s6s200_joint_{i}" for i in range(1, 7)),
              [3.0] * 6, None),
    "xarm7": ("xarm_description/urdf", "xarm7.urdf", tuple(f"joint{i}" for i in range(1, 8)), [8.0] * 7, None),
}
COLLISION_PROBLEMS = tuple(ARMS)


def collision_problem(key, panda_cfg, args):
    """One arm of example-robot-data with its meshes, a floor at its base plane, margin 3 cm:
    cond, time, robot_ident's dense check, and the closest pair on the ORIGINAL meshes by the
    independent checker of the tests (test/collision_oracle.py: every non-adjacent link pair
    not disabled by the vendor's SRDF, and the floor, every 1 ms)."""
    from dataclasses import replace

    from robot_ident.excitation.collision import CollisionModel, CollisionSpec, check_collisions
    from robot_ident.excitation.designer import DesignSpec
    sys.path.insert(0, str(ROOT / "test"))
    from collision_oracle import trajectory_clearance

    robots = panda_urdf().parents[2]
    share = robots.parents[1]
    folder, name, joints, acc, srdf = ARMS[key]
    urdf = robots / folder / name
    model = RobotModel(urdf, joints)
    limits = LimitSpec.from_model(model, acc or panda_cfg.acceleration_limits, panda_cfg.margins)
    budget = {"ur5": args.time_ur5, "panda-col": args.time_panda}.get(key, args.time_panda)
    t0 = time.process_time()
    cm = CollisionModel(model, CollisionSpec(package_dirs=(str(share),)))
    t_model = time.process_time() - t0
    base = BaseParameters.from_model(model)
    print(f"\n{key} ({len(model.joint_names)} joints), collisions: {base.size} base parameters, fourier, 5 harmonics, "
          f"budget {budget:g} {'CPU ' if args.cpu else ''}s; collision model {t_model:.1f} s CPU")
    print(cm.describe())
    print(f"{'constraints':<12} {'wall s':>7} {'cpu s':>7} {'cond':>9}  dense check (1 ms) / original meshes "
          "(independent)")
    for with_col in ((True,) if args.collision_only else (False, True)):
        spec = replace(DesignSpec(family="fourier", max_time=budget, seed=0), cpu_time=args.cpu)
        t0, c0 = time.perf_counter(), time.process_time()
        res = design_excitation(model, limits, spec, base=base, collision=cm if with_col else None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rep = check_collisions(res.trajectory, cm, 1e-3)
        clear = trajectory_clearance(urdf, model.joint_names, res.trajectory, package_dirs=(str(share),), floor=0.0,
                                     srdf=None if srdf is None else robots / srdf, only_below=0.1)
        (la, lb), (d, t) = min(clear.items(), key=lambda kv: kv[1][0])
        print(f"{'with' if with_col else 'without':<12} {wall:>7.1f} {cpu:>7.1f} {res.cond:>9.2f}  "
              f"{'pass' if rep.valid else 'FAIL'}: closest {rep.closest_pair} {rep.closest_distance:.4f} m; "
              f"meshes: {'contact' if d <= 0 else 'no contact'}, closest {la} - {lb} {d:.4f} m at t={t:.3f} s; "
              f"limits {'pass' if res.report.valid else 'FAIL'}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
