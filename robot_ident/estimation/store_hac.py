"""The autocorrelation-consistent (HAC) covariance of a compressed problem, from its rows
re-read out of the processed store, in bounded memory.

A compressed problem (estimation.compressed) keeps only R factors, which give the
least-squares solution but not the residuals' time series that the HAC covariance needs.
`StoreRowSource` is attached to such a problem (``IdentificationProblem.rows``); once the
estimator has its solution x and joint weights, it re-reads the problem's samples from
the store, chunk by chunk, with the same dead band, and feeds the weighted residuals, the
rows' mask and the scores to `uncertainty.HacSeries`: the one implementation, which rows
in memory go through as one block.
"""
from __future__ import annotations

import numpy as np

from ..util.blas import single_threaded_blas
from .compressed import CHUNK_SAMPLES, run_chunks, run_rows
from .uncertainty import MAX_LAG, HacSeries


class StoreRowSource:
    """Row runs ``(store, lo, hi)`` of `ProcessedStore`s as a compressed problem was built
    from them (same dead band as `compressed.accumulate`)."""

    def __init__(self, runs, model, base, threshold: float, guard_s: float,
                 chunk: int = CHUNK_SAMPLES // 2, max_lag: int = MAX_LAG):
        self.runs = list(runs)
        self.model, self.base = model, base
        self.threshold, self.guard_s = float(threshold), float(guard_s)
        self.chunk, self.max_lag = int(chunk), int(max_lag)

    def hac_covariance(self, x: np.ndarray, joint_weights: np.ndarray, A_inv: np.ndarray,
                       n_rows: int) -> tuple[np.ndarray, dict]:
        """(cov, info) as `uncertainty.hac_covariance` gives for the weighted rows
        W_w = w_j W, r_w = w_j (y - W x) of this problem: the same `HacSeries`, fed chunk by chunk."""
        model, base = self.model, self.base
        n, p = model.n, len(x)
        w = np.asarray(joint_weights, float)
        series = HacSeries(n, p, run_rows(self.runs), self.max_lag)
        with single_threaded_blas():       # a loop of small products: see util/blas.py
            for d, mask in run_chunks(self.runs, self.threshold, self.guard_s, self.chunk, model):
                N = d.n_samples
                Wb = base.regressor(model.regressor(d.q, d.qd, d.qdd)).reshape(N, n, p)
                r = np.where(mask, (d.effort - Wb @ x) * w, 0.0)          # (N, n) weighted, 0 outside
                series.add(r, mask, np.einsum("snp,sn->sp", Wb * w[None, :, None], r))
            return series.covariance(A_inv, n_rows)
