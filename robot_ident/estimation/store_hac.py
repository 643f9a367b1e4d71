"""The autocorrelation-consistent (HAC) covariance of a compressed problem, from its rows
re-read out of the processed store, in bounded memory.

A compressed problem (estimation.compressed) keeps only R factors, which give the
least-squares solution but not the residuals' time series that the HAC covariance of
estimation/uncertainty.py needs. `StoreRowSource` is attached to such a problem
(``IdentificationProblem.rows``); once the estimator has its solution x and joint
weights, it re-reads the problem's samples from the store, chunk by chunk, with the
same dead band, and computes exactly what `uncertainty.hac_covariance` computes on the
rows:

1. pass over the store: weighted residuals r_w = w_j (y - W x) of the kept rows, the
   per-sample scores g_s = sum_j w_j W[s, j] r_w[s, j] (written to a temporary file),
   and per joint the lagged sums of the zero-filled residual e and of its mask m
   (sum e_t e_t+k, e_t m_t+k, m_t e_t+k, m_t m_t+k for k = 0..K), from which the
   mean-removed autocorrelation of `uncertainty.residual_autocorrelation` follows
   exactly; they are accumulated block by block against a tail of the K previous
   samples (FFT correlation, scipy.signal.correlate);
2. the bandwidth L from that autocorrelation (`uncertainty.bandwidth_from_autocorrelation`,
   the same rule);
3. pass over the scores file: Omega = sum_{|k| <= L} (1 - |k| / (L + 1)) sum_s g_s g_s+k^T
   with a tail of L scores.

Memory: a chunk of rows, K + chunk residuals per joint and L + chunk scores; the scores
file takes p x 8 bytes per sample on disk (the store takes (1 + 5 n) x 8). The lags
searched stop at K = min(10 % of the samples (as in memory), MAX_LAG) samples: residuals
still correlated beyond MAX_LAG get the bandwidth 3 MAX_LAG, and the result says so.
"""
from __future__ import annotations

import tempfile

import numpy as np
from scipy.signal import correlate

from ..util.blas import single_threaded_blas
from .compressed import CHUNK_SAMPLES, store_chunks
from .uncertainty import (
    MAX_LAG_FRACTION,
    bandwidth_from_autocorrelation,
    hac_from_omega,
)

MAX_LAG = 4096           # samples of residual autocorrelation searched (20 s at 200 Hz)


class _LaggedSums:
    """sum_t a_t b_t+k for k = 0..K over a series that arrives in blocks (a, b: (B, n))."""

    def __init__(self, K: int, n: int):
        self.K = K
        self.sum = np.zeros((n, K + 1))
        self._tail_a = np.zeros((K, n))

    def add(self, a_block: np.ndarray, b_block: np.ndarray) -> None:
        K = self.K
        ext = np.vstack([self._tail_a, a_block])          # (K + B, n): a_t for t in [start - K, end)
        for j in range(a_block.shape[1]):
            # out[K - k] = sum_i ext[K - k + i] b[i] = sum_s a_(s-k) b_s
            out = correlate(ext[:, j], b_block[:, j], mode="valid", method="auto")
            self.sum[j] += out[::-1]
        self._tail_a = ext[-K:] if K else ext[:0]


class StoreRowSource:
    """Rows [lo, hi) of a `ProcessedStore` as a compressed problem was built from them
    (same dead band as `compressed.accumulate`)."""

    def __init__(self, store, lo: int, hi: int, model, base, threshold: float, guard_s: float,
                 chunk: int = CHUNK_SAMPLES // 2, max_lag: int = MAX_LAG):
        self.store, self.lo, self.hi = store, int(lo), int(hi)
        self.model, self.base = model, base
        self.threshold, self.guard_s = float(threshold), float(guard_s)
        self.chunk, self.max_lag = int(chunk), int(max_lag)

    def hac_covariance(self, x: np.ndarray, joint_weights: np.ndarray, A_inv: np.ndarray,
                       n_rows: int) -> tuple[np.ndarray, dict]:
        """(cov, info) as `uncertainty.hac_covariance` gives for the weighted rows
        W_w = w_j W, r_w = w_j (y - W x) of this problem."""
        model, base = self.model, self.base
        n, p = model.n, len(x)
        w = np.asarray(joint_weights, float)
        N_range = self.hi - self.lo
        K = int(min(max(1, int(MAX_LAG_FRACTION * N_range)), self.max_lag))
        sums = {key: _LaggedSums(K, n) for key in ("ee", "em", "me", "mm")}
        r_sum, rr, counts = np.zeros(n), 0.0, np.zeros(n, dtype=np.int64)
        last_sample = -1
        with tempfile.TemporaryFile(prefix="robot_ident_scores_") as f:
            done = 0
            for d, mask in store_chunks(self.store, self.lo, self.hi, self.threshold, self.guard_s, self.chunk,
                                        model):
                N = d.n_samples
                Ws = model.regressor(d.q, d.qd, d.qdd)
                Wb = base.regressor(Ws).reshape(N, n, p)
                r = np.where(mask, (d.effort - Wb @ x) * w, 0.0)          # (N, n) weighted, 0 outside
                g = np.einsum("snp,sn->sp", Wb * w[None, :, None], r)
                f.write(np.ascontiguousarray(g, dtype="<f8").tobytes())
                m = mask.astype(float)
                sums["ee"].add(r, r)
                sums["em"].add(r, m)
                sums["me"].add(m, r)
                sums["mm"].add(m, m)
                r_sum += r.sum(axis=0)
                rr += float(np.sum(r * r))
                counts += mask.sum(axis=0)
                kept = np.flatnonzero(mask.any(axis=1))
                if kept.size:
                    last_sample = done + int(kept[-1])
                done += N
            N_used = last_sample + 1                 # as uncertainty: sample.max() + 1
            max_lag = max(1, int(MAX_LAG_FRACTION * N_used))
            mu = r_sum / np.maximum(counts, 1)
            num = (sums["ee"].sum - mu[:, None] * (sums["em"].sum + sums["me"].sum)
                   + (mu * mu)[:, None] * sums["mm"].sum)
            cnt = np.maximum(np.round(sums["mm"].sum), 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                cov = np.where(cnt > 10, num / cnt, 0.0)
                rho = np.where(cov[:, :1] > 0, cov / cov[:, :1], 0.0)
            searched = min(max_lag, K)
            L = bandwidth_from_autocorrelation(rho[:, :searched + 1], int(counts.min()), max_lag)
            with single_threaded_blas():       # a loop of small products: see util/blas.py
                omega = self._omega(f, done, p, L)
        cov, info = hac_from_omega(omega, A_inv, n_rows, rr, L)
        if searched < max_lag:
            info["hac_lags_searched"] = int(searched)
        return cov, info

    @staticmethod
    def _omega(f, n_samples: int, p: int, L: int, block: int = 5_000) -> np.ndarray:
        """Bartlett-weighted sum of lagged score products over the scores file."""
        omega = np.zeros((p, p))
        tail = np.zeros((0, p))
        f.seek(0)
        for a in range(0, n_samples, block):
            m = min(block, n_samples - a)
            G = np.frombuffer(f.read(m * p * 8), dtype="<f8").reshape(m, p)
            omega += G.T @ G
            ext = np.vstack([tail, G])
            t = tail.shape[0]
            for k in range(1, L + 1):
                if k > t + m - 1:
                    break
                # pairs (s - k, s) with s in this block and s - k anywhere before it
                s0 = max(0, k - t)                      # first s in the block with s - k inside ext
                C = ext[t + s0 - k:t + m - k].T @ G[s0:]
                omega += (1.0 - k / (L + 1.0)) * (C + C.T)
            tail = ext[-L:] if L else ext[:0]
        return omega
