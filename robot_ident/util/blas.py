"""BLAS threading for small-matrix loops.

Iterative solvers here (trust-region least squares, GA populations, per-sample RLS)
work on matrices of a few hundred entries per side. Multi-threaded OpenBLAS on such
matrices gains nothing and, on a loaded machine (a robot PC running controllers, or 2
cores shared with other processes), loses a great deal: the physically consistent
solver took 82 s instead of 1.6 s for the same 458 iterations. These loops therefore
run with one BLAS thread (threadpoolctl); large one-shot factorisations keep the
default of the process. (The `robot-ident` program itself starts with one OpenBLAS thread,
`cli.run`, unless the user sets a number: a library caller and the ROS nodes keep theirs.)"""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def single_threaded_blas():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency; degrade gracefully
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
