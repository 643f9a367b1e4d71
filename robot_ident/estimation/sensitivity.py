"""Sobol global sensitivity analysis (source A step 5) and the parameter classes.

Inputs are sampled with SALib's Saltelli/Sobol scheme (`SALib.sample.sobol.sample`,
first and total order: N * (D + 2) rows laid out per base point as
``[A, AB_1 .. AB_D, B]``). For a scalar output the indices are SALib's
(`SALib.analyze.sobol.analyze`). The model output here is a *vector* (the effort of
every joint at every sample), for which SALib has no estimator, so the indices are
aggregated over outputs as in Gamboa et al. (2014): each output's numerator and
variance are summed before dividing, which weights outputs by their variance. The
estimators are the ones SALib uses, vectorised over outputs:
first order (Saltelli 2010) ``mean(f_B (f_ABj - f_A)) / V``, total order (Jansen 1999)
``mean((f_A - f_ABj)^2) / (2 V)``.

Classification (source A): parameters ranked by total index; the top 30 % are
``high``, the bottom 20 % ``zero``, the rest ``low`` (fractions configurable).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..errors import ConfigError

CLASSES = ("high", "low", "zero")


@dataclass
class SobolIndices:
    names: tuple[str, ...]
    S1: np.ndarray
    ST: np.ndarray
    n_evaluations: int

    def as_dict(self) -> dict:
        return {n: {"S1": float(a), "ST": float(b)} for n, a, b in zip(self.names, self.S1, self.ST)}


def _salib_problem(names, lower, upper) -> dict:
    lower = np.asarray(lower, float)
    upper = np.asarray(upper, float)
    if lower.shape != (len(names),) or upper.shape != lower.shape:
        raise ConfigError(f"sensitivity ranges must have {len(names)} entries")
    bad = np.flatnonzero(~(upper > lower))
    if bad.size:
        raise ConfigError(f"sensitivity range of {names[bad[0]]!r} is empty: [{lower[bad[0]]}, {upper[bad[0]]}]")
    return {"num_vars": len(names), "names": list(names), "bounds": np.column_stack([lower, upper]).tolist()}


def sobol_indices(fn: Callable[[np.ndarray], np.ndarray], names: Sequence[str], lower, upper,
                  n: int = 1024, seed: int = 0) -> SobolIndices:
    """First-order and total Sobol indices of fn over independent uniform inputs.

    fn maps an (N, D) input matrix to (N,) or (N, K) outputs (vectorised)."""
    # SALib (and scipy.stats with it) is imported here: every identification imports this
    # module, and the import costs ~0.3 s that only the Sobol methods need.
    from SALib.analyze import sobol as sobol_analyze
    from SALib.sample import sobol as sobol_sample
    names = tuple(names)
    problem = _salib_problem(names, lower, upper)
    X = sobol_sample.sample(problem, n, calc_second_order=False, seed=seed)
    Y = np.asarray(fn(X), float)
    D = len(names)
    if Y.ndim == 1:
        res = sobol_analyze.analyze(problem, Y, calc_second_order=False, num_resamples=100, seed=seed)
        return SobolIndices(names, np.asarray(res["S1"]), np.asarray(res["ST"]), X.shape[0])
    step = D + 2
    A = Y[0::step]
    B = Y[step - 1::step]
    var = np.var(np.concatenate([A, B], axis=0), axis=0)          # per output
    total_var = var.sum()
    if total_var <= 0:
        return SobolIndices(names, np.zeros(D), np.zeros(D), X.shape[0])
    S1 = np.empty(D)
    ST = np.empty(D)
    for j in range(D):
        ABj = Y[j + 1::step]
        S1[j] = np.sum(np.mean(B * (ABj - A), axis=0)) / total_var
        ST[j] = 0.5 * np.sum(np.mean((A - ABj) ** 2, axis=0)) / total_var
    return SobolIndices(names, S1, ST, X.shape[0])


def classify(total_indices: np.ndarray, high_fraction: float = 0.3, zero_fraction: float = 0.2) -> np.ndarray:
    """Array of 'high' / 'low' / 'zero' by rank of the total index (ties: stable order)."""
    if not (0 <= high_fraction <= 1 and 0 <= zero_fraction <= 1 and high_fraction + zero_fraction <= 1):
        raise ConfigError(f"sensitivity class fractions must be in [0, 1] and sum to <= 1, got "
                          f"high {high_fraction}, zero {zero_fraction}")
    D = len(total_indices)
    order = np.argsort(-np.asarray(total_indices), kind="stable")
    n_high = int(round(high_fraction * D))
    n_zero = int(round(zero_fraction * D))
    out = np.full(D, "low", dtype=object)
    out[order[:n_high]] = "high"
    if n_zero:
        out[order[D - n_zero:]] = "zero"
    return out
