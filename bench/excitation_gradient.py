"""Cost of one excitation-criterion evaluation on the Panda (7 joints, 69 base parameters).

    python bench/excitation_gradient.py [--samples 100] [--repeat 30]

Prints CPU milliseconds (BLAS pinned to one thread) per call of:
  * one Pinocchio computeJointTorqueRegressor (the floor of everything else);
  * the criterion value (one regressor per sample);
  * the state gradient of log cond / the p-norm surrogate, the reference path
    (4-D dY, fancy-indexed base columns, einsum) and the adjoint path (fast_gradient.py),
    with their largest relative difference;
  * the gradients of the 20 extreme log-eigenvalues used by the minimax descent.
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from excitation import PANDA, panda_urdf  # noqa: E402

from robot_ident.excitation.constraints import LimitSpec, Margins  # noqa: E402
from robot_ident.excitation.fast_gradient import eigen_log_gradients  # noqa: E402
from robot_ident.excitation.parameterisation import FourierParameters  # noqa: E402
from robot_ident.excitation.problem import ExcitationProblem  # noqa: E402
from robot_ident.model.base import BaseParameters  # noqa: E402
from robot_ident.model.robot import RobotModel  # noqa: E402

ACC = dict(zip(PANDA, (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)))


def cpu_ms(fn, repeat):
    fn()
    t0 = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - t0) / repeat * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args(argv)
    import pinocchio as pin

    model = RobotModel(panda_urdf(), PANDA)
    base = BaseParameters.from_model(model)
    limits = LimitSpec.from_model(model, ACC, Margins(0.05, 0.05, 0.05))
    param = FourierParameters(PANDA, 0.2 * np.pi, 5)
    pr = ExcitationProblem(model, base, param, limits, "cond", n_samples=args.samples, n_constraint=100)
    x = pr.random_start(np.random.default_rng(0))
    q, qd, qdd = pr.states(x)
    ev, r = pr.evaluator, args.repeat
    n = model.n
    print(f"Panda, {base.size} base parameters, {args.samples} samples, {3 * n + 1} regressors per sample "
          "for a gradient; CPU ms per call:")
    pm, pd = model.model, model.model.createData()
    t_pin = cpu_ms(lambda: pin.computeJointTorqueRegressor(pm, pd, q[0], qd[0], qdd[0]), 2000)
    print(f"  Pinocchio regressor, one sample        {t_pin * 1e3:8.2f} us "
          f"(x {args.samples * (3 * n + 1)} = {t_pin * args.samples * (3 * n + 1):.1f} ms per gradient)")
    print(f"  value (log cond)                       {cpu_ms(lambda: pr.value(x), r):8.2f}")
    for smooth, label in ((16.0, "surrogate p=16"), (0.0, "log cond")):
        ref = ev.objective_with_state_gradient(q, qd, qdd, "cond", None, smooth, adjoint=False)[1]
        adj = ev.objective_with_state_gradient(q, qd, qdd, "cond", None, smooth)[1]
        t_ref = cpu_ms(lambda smooth=smooth: ev.objective_with_state_gradient(q, qd, qdd, "cond", None, smooth,
                                                                adjoint=False), r)
        t_adj = cpu_ms(lambda smooth=smooth: ev.objective_with_state_gradient(q, qd, qdd, "cond", None, smooth), r)
        diff = np.abs(adj - ref).max() / np.abs(ref).max()
        print(f"  gradient {label:<15} reference dY   {t_ref:8.2f}   adjoint {t_adj:8.2f}   "
              f"(x{t_ref / t_adj:.1f}, max rel. diff {diff:.1e})")
    p = base.size
    idx = np.r_[np.arange(p - 10, p), np.arange(10)]
    print(f"  20 extreme log-eigenvalue gradients    {cpu_ms(lambda: eigen_log_gradients(ev, q, qd, qdd, idx), r):8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
