"""Standard deviations that hold when the residuals are correlated in time.

The textbook covariance of a least-squares estimate, sigma^2 (W^T W)^-1, assumes
white residuals. Ours are not: efforts are low-pass filtered (neighbouring samples
share most of their noise) and model error is smooth along the trajectory. With a
20 Hz filter at 200 Hz the white formula underestimates the standard deviations
3-6 fold (issue 12).

We use the heteroskedasticity-and-autocorrelation-consistent (HAC, Newey & West
1987) sandwich instead. With weighted rows W_w, weighted residuals r_w and
A = W_w^T W_w, the scores of one sample s are g_s = sum over its rows of W_w[row] r_w[row]
(every joint of a sample, so cross-joint correlation is included), and

    Omega = sum_{|k| <= L} (1 - |k| / (L + 1)) sum_s g_s g_{s+k}^T     (Bartlett kernel)
    Cov   = M / (M - p) * A^-1 Omega A^-1.

The Bartlett weights keep Omega positive semi-definite. The bandwidth L comes from
the data: the residual autocorrelation of every joint is measured (samples missing
from the problem, e.g. inside the friction dead band, are skipped pair-wise) and L
is LAG_FACTOR times the first lag at which every joint's autocorrelation has dropped
to CORR_FLOOR (or 3 / sqrt(rows per joint), the sampling noise of an autocorrelation, if
larger) or below (residuals that stay correlated get the largest bandwidth). For white residuals L = 0 and the result is White's heteroskedasticity
-robust covariance, which matches sigma^2 A^-1 when the noise is homoskedastic.

Hand-written (about 40 lines of numpy) because neither SciPy nor the other
dependencies provide a HAC estimator; statsmodels would be a heavy new dependency
for this alone.
"""
from __future__ import annotations

import tempfile

import numpy as np

from ..util.blas import single_threaded_blas

CORR_FLOOR = 0.05     # autocorrelation below which residuals count as uncorrelated
LAG_FACTOR = 3        # bandwidth = LAG_FACTOR x correlation length (Bartlett weights taper)
MAX_LAG_FRACTION = 0.1  # of the samples, at most
MAX_LAG = 4096          # samples of residual autocorrelation searched at most (20 s at 200 Hz)


def bandwidth_from_autocorrelation(rho: np.ndarray, pairs: int, max_lag: int) -> int:
    """LAG_FACTOR x the first lag at which every joint's autocorrelation (rho: (n, lags + 1),
    lags 0..) is at the floor; rho may stop short of `max_lag` (then residuals correlated
    over all its lags get LAG_FACTOR x its last lag)."""
    # a sample autocorrelation of white noise has std ~ 1/sqrt(pairs): 3 of those is noise
    floor = max(CORR_FLOOR, 3.0 / np.sqrt(max(pairs, 1)))
    below = np.flatnonzero((rho[:, 1:] <= floor).all(axis=0))
    tau = int(below[0]) if below.size else min(rho.shape[1] - 1, max_lag)   # lags 1..tau-1 are correlated
    return int(min(LAG_FACTOR * tau, max_lag))


def hac_covariance(W_w: np.ndarray, r_w: np.ndarray, A_inv: np.ndarray, sample: np.ndarray | None,
                   joint: np.ndarray, n_joints: int) -> tuple[np.ndarray, dict]:
    """HAC covariance of a (weighted) least-squares estimate from its rows in memory; returns
    (cov, info) with info = {hac_lag_samples, std_inflation_median} (the median ratio of the
    HAC standard deviations to the white-noise ones). The rows become one block of the
    per-sample series `HacSeries` takes (a store's rows arrive in chunks: store_hac.py)."""
    M, p = W_w.shape
    if sample is None:                       # a hand-built problem: rows are sample-major
        sample = np.arange(M) // max(n_joints, 1)
    sample, joint = np.asarray(sample, int), np.asarray(joint, int)
    N = int(sample.max()) + 1 if M else 1
    r = np.zeros((N, n_joints))
    mask = np.zeros((N, n_joints), bool)
    r[sample, joint] = r_w
    mask[sample, joint] = True
    G = np.zeros((N, p))
    np.add.at(G, sample, W_w * r_w[:, None])
    with single_threaded_blas():     # a loop of small products: see util/blas.py
        series = HacSeries(n_joints, p, N)
        series.add(r, mask, G)
        return series.covariance(A_inv, M)


def correlation_lag(r: np.ndarray, sample: np.ndarray, joint: np.ndarray, n_joints: int) -> int:
    """The HAC bandwidth in samples of residual rows r (row k: sample[k], joint[k])."""
    sample, joint = np.asarray(sample, int), np.asarray(joint, int)
    N = int(sample.max()) + 1 if sample.size else 1
    e = np.zeros((N, n_joints))
    mask = np.zeros((N, n_joints), bool)
    e[sample, joint] = r
    mask[sample, joint] = True
    series = HacSeries(n_joints, 0, N)
    series.add(e, mask, np.zeros((N, 0)))
    return series.bandwidth()[0]


class HacSeries:
    """The HAC covariance from a problem's per-sample series as they arrive in blocks of
    consecutive samples: the weighted residuals r (0 outside the problem's rows), the mask
    of the rows, and the scores g_s = sum_j w_j W[s, j] r_w[s, j]. Per joint the lagged
    sums of the zero-filled residual e and of its mask m (sum e_t e_t+k, e_t m_t+k,
    m_t e_t+k, m_t m_t+k for k = 0..K) give the mean-removed autocorrelation exactly
    (pairs where either sample is missing skipped); the scores go to a temporary file for
    the Bartlett sum. The lags searched stop at K = min(MAX_LAG_FRACTION of the samples,
    `max_lag`): residuals still correlated beyond get the bandwidth LAG_FACTOR x K, and the
    result says so. Memory: K + `LAG_BLOCK` samples of residuals and masks per joint, and
    L + a block of scores."""

    def __init__(self, n: int, p: int, n_samples: int, max_lag: int = MAX_LAG):
        self.n, self.p = n, p
        self.K = int(min(max(1, int(MAX_LAG_FRACTION * n_samples)), max_lag))
        self.sums = {key: _LaggedSums(self.K, n) for key in ("ee", "em", "me", "mm")}
        self.r_sum, self.rr, self.counts = np.zeros(n), 0.0, np.zeros(n, dtype=np.int64)
        self.last_sample, self.done = -1, 0
        self._f = tempfile.TemporaryFile(prefix="robot_ident_scores_") if p else None    # p = 0: bandwidth only

    def add(self, r: np.ndarray, mask: np.ndarray, g: np.ndarray) -> None:
        if self._f is not None:
            self._f.write(np.ascontiguousarray(g, dtype="<f8").tobytes())
        m = mask.astype(float)
        self.sums["ee"].add(r, r)
        self.sums["em"].add(r, m)
        self.sums["me"].add(m, r)
        self.sums["mm"].add(m, m)
        self.r_sum += r.sum(axis=0)
        self.rr += float(np.sum(r * r))
        self.counts += mask.sum(axis=0)
        kept = np.flatnonzero(mask.any(axis=1))
        if kept.size:
            self.last_sample = self.done + int(kept[-1])
        self.done += r.shape[0]

    def bandwidth(self) -> tuple[int, int, int]:
        """(L, lags searched, lags the rule would search): the bandwidth of the series added."""
        max_lag = max(1, int(MAX_LAG_FRACTION * (self.last_sample + 1)))
        mu = self.r_sum / np.maximum(self.counts, 1)
        s = self.sums
        num = (s["ee"].sum - mu[:, None] * (s["em"].sum + s["me"].sum) + (mu * mu)[:, None] * s["mm"].sum)
        cnt = np.maximum(np.round(s["mm"].sum), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            cov = np.where(cnt > 10, num / cnt, 0.0)
            rho = np.where(cov[:, :1] > 0, cov / cov[:, :1], 0.0)
        searched = min(max_lag, self.K)
        return bandwidth_from_autocorrelation(rho[:, :searched + 1], int(self.counts.min()), max_lag), searched, \
            max_lag

    def covariance(self, A_inv: np.ndarray, n_rows: int) -> tuple[np.ndarray, dict]:
        """(cov, info) of the series added; closes the scores file."""
        try:
            L, searched, max_lag = self.bandwidth()
            omega = _omega(self._f, self.done, self.p, L)
        finally:
            self._f.close()
        cov, info = hac_from_omega(omega, A_inv, n_rows, self.rr, L)
        if searched < max_lag:
            info["hac_lags_searched"] = int(searched)
        return cov, info


LAG_BLOCK = 8192     # samples gathered before a block's lagged sums: the K-sample tail is transformed again per block


class _LaggedSums:
    """sum_t a_t b_t+k for k = 0..K over a series that arrives in blocks (a, b: (B, n)).

    The blocks are gathered to `LAG_BLOCK` samples; each gathered block's sums with the
    K samples of `a` before it are a correlation of all n columns at once by real FFTs
    (numpy.fft), long enough that none wraps around."""

    def __init__(self, K: int, n: int):
        self.K = K
        self._sum = np.zeros((n, K + 1))
        self._tail_a = np.zeros((K, n))
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_rows = 0

    def add(self, a_block: np.ndarray, b_block: np.ndarray) -> None:
        for lo in range(0, a_block.shape[0], LAG_BLOCK):    # a long block in pieces: FFTs of at most 2 x 8192
            a = np.array(a_block[lo:lo + LAG_BLOCK], float)   # copies: kept a while
            self._pending.append((a, np.array(b_block[lo:lo + LAG_BLOCK], float)))
            self._pending_rows += a.shape[0]
            if self._pending_rows >= LAG_BLOCK:
                self._flush()

    @property
    def sum(self) -> np.ndarray:
        """(n, K + 1): column k the sums at lag k of every sample added."""
        self._flush()
        return self._sum

    def _flush(self) -> None:
        if not self._pending:
            return
        K = self.K
        a = np.vstack([self._tail_a] + [x for x, _ in self._pending])    # a_t for t in [start - K, end)
        b = np.vstack([y for _, y in self._pending])
        self._pending, self._pending_rows = [], 0
        # >= K + B: lag l <= K of row i < B reads a[l + i], no wrap; a power of 2: an awkward
        # length (13 088) took 9 x as long in numpy's FFT
        n_fft = 1 << (a.shape[0] - 1).bit_length()
        # out[l] = sum_i a[l + i] b[i] = sum_s a_(s - (K - l)) b_s
        out = np.fft.irfft(np.fft.rfft(a, n_fft, axis=0) * np.conj(np.fft.rfft(b, n_fft, axis=0)), n_fft, axis=0)
        self._sum += out[K::-1].T
        self._tail_a = a[a.shape[0] - K:]


def _omega(f, n_samples: int, p: int, L: int, block: int = 5_000) -> np.ndarray:
    """Bartlett-weighted sum of lagged score products over the scores file,

        sum_{|k| <= L} (1 - |k| / (L + 1)) sum_s g_s g_(s+k)^T  =  H^T H / (L + 1),

    H's rows the sums of L + 1 consecutive scores (the series padded with L zeros at each
    end): lag k lies in L + 1 - |k| of those windows. One product over the samples instead
    of one per lag, and positive semi-definite by construction. Each block's window sums
    are differences of its running sum, which starts again in every block."""
    omega = np.zeros((p, p))
    tail = np.zeros((L, p))
    f.seek(0)
    for a in range(0, n_samples + L, block):          # the last L windows reach into the zero padding
        m = min(block, n_samples + L - a)
        real = max(0, min(m, n_samples - a))
        G = np.zeros((m, p))
        G[:real] = np.frombuffer(f.read(real * p * 8), dtype="<f8").reshape(real, p)
        H = G                                        # the windows ending at each sample of the block
        if L:
            ext = np.vstack([tail, G])               # (L + m, p): the L scores before the block, then it
            c = np.zeros((L + m + 1, p))
            np.cumsum(ext, axis=0, out=c[1:])
            H = c[L + 1:] - c[:m]
            tail = ext[m:]
        omega += H.T @ H
    return omega / (L + 1.0)


def hac_from_omega(omega: np.ndarray, A_inv: np.ndarray, n_rows: int, rss: float, lag: int) -> tuple[np.ndarray, dict]:
    """The sandwich M / (M - p) A^-1 Omega A^-1 and its info (bandwidth `lag`, median
    inflation over the white-noise standard deviations from the residual sum `rss`)."""
    M, p = n_rows, A_inv.shape[0]
    cov = (M / max(M - p, 1)) * (A_inv @ omega @ A_inv)
    cov = 0.5 * (cov + cov.T)
    white = rss / max(M - p, 1) * np.diag(A_inv)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.sqrt(np.clip(np.diag(cov), 0, None) / white)
    ratio = ratio[np.isfinite(ratio)]
    return cov, {"hac_lag_samples": int(lag),
                 "std_inflation_median": float(np.median(ratio)) if ratio.size else float("nan")}
