"""The identification problem in compressed form, accumulated chunk by chunk.

For each joint j the kept rows [W_j | y_j | raw_j | P_j] (base regressor, filtered
effort, raw effort, and the structure check's probes, structure_check.py) are reduced by
an incremental QR to their R factor, a square matrix: stacking a chunk's rows under the
previous R and taking the R of that is the QR of all rows so far. The leading
(n_base + 2) block of that R is the R of [W_j | y_j | raw_j] alone (a QR's leading
columns do not see the later ones). The standard regressor is the base one times the
base projection (``W_std = W P``, model/base.py), so its rows are ``R_W P``: the QRs
run on the base columns only (58 of the demo arm's 84). Because Q is orthogonal,

    ||y_j - W_j x||^2 = ||R_j [x; -1; 0]||^2     and     ||raw_j - W_j x||^2 = ||R_j [x; 0; -1]||^2

for every x, so the stacked R_j are a problem with the same least-squares solution,
covariance, condition number and per-joint residual sums as the full one, in
n (n_base + 2) rows whatever the recording's length. `IdentificationProblem.row_counts`
carries the true row counts (degrees of freedom, RMS). OLS, WLS (per-joint weights
scale whole R_j blocks) and the physically consistent estimator (W^T W and W^T y is
all it uses) run on it unchanged; robust IRLS, RLS and the Sobol methods need the rows
and refuse it (`problem.require_rows`); the streaming workflow gives them the rows of
a bounded recording instead.

`accumulate` feeds row runs of `data.stream_filter.ProcessedStore`s through the
friction dead band (`transmission.dead_band_rows`, computed with enough neighbouring
rows that it equals the mask of the whole run) and the regressor; `validate_runs`
computes the validation RMS of row runs the same way.
"""
from __future__ import annotations

import math

import numpy as np

from ..data.signals import ProcessedData, concatenate, decimation_stride
from ..errors import IdentificationError
from ..model.base import BaseParameters
from ..model.robot import RobotModel
from .problem import IdentificationProblem
from .r_factor import r_factor
from .structure_check import n_probes, probe_columns
from .validation import RmsAccumulator, ValidationReport

CHUNK_SAMPLES = 4000
PLOT_POINTS = 10_000     # samples kept for the plots of an identification
FOLD_ROWS = 2000         # rows a joint's blocks gather before they are folded into its R factor


class CompressedAccumulator:
    """Per-joint R factors of [W (base) | y | raw | probes] over the rows outside the dead band."""

    def __init__(self, model: RobotModel, base: BaseParameters, probes: bool = True):
        """`probes`: carry the structure check's probe columns (the cutoff's cross-validation
        does not need them)."""
        if tuple(base.standard_names) != tuple(model.layout.names):
            raise IdentificationError("base parameters were computed for a different parameter layout")
        self.model, self.base = model, base
        self.n_std = model.layout.size
        self.n_par = base.size          # the regressor's columns here: the base parameters
        self.probes = probes
        self.n_cols = self.n_par + 2 + (n_probes(model.n) if probes else 0)
        self._R = [np.zeros((0, self.n_cols)) for _ in range(model.n)]
        self._pending: list[list] = [[] for _ in range(model.n)]    # rows not yet in the R factor
        self._pending_rows = np.zeros(model.n, dtype=np.int64)
        self.counts = np.zeros(model.n, dtype=np.int64)
        self.n_samples = 0
        self.left_out: dict[str, CompressedAccumulator] = {}     # model_error_term's variants

    @property
    def R(self) -> list[np.ndarray]:
        """The per-joint R factors of every row added so far."""
        for j in range(self.model.n):
            self._fold(j)
        return self._R

    def _fold(self, j: int) -> None:
        if self._pending[j]:
            self._R[j] = r_factor(self._R[j], *self._pending[j])
            self._pending[j], self._pending_rows[j] = [], 0

    def add(self, data: ProcessedData, keep: np.ndarray, left_out: dict | None = None) -> None:
        """Rows of `data` where `keep` (N, n) is True; `left_out`: label -> (N, n) masks of the
        rows each variant of `model_error_term` keeps, whose other kept rows go to `self.left_out`."""
        if tuple(data.joint_names) != tuple(self.model.joint_names):
            raise IdentificationError(f"data joints {data.joint_names} differ from the model's "
                                      f"{self.model.joint_names}")
        N, n = data.n_samples, self.model.n
        self.n_samples += N
        if N == 0:
            return
        Ws = self.model.regressor(data.q, data.qd, data.qdd).reshape(N, n, self.n_std)
        self._add_rows(Ws, data, keep, probe_columns(self.model, data) if self.probes else None)
        for label, kept in (left_out or {}).items():
            if label not in self.left_out:
                self.left_out[label] = CompressedAccumulator(self.model, self.base, probes=False)
            self.left_out[label]._add_rows(Ws, data, keep & ~kept, None)

    def _add_rows(self, Ws, data: ProcessedData, keep: np.ndarray, probes) -> None:
        """The kept rows of joint j's standard regressor rows `Ws[:, j]`, their base columns."""
        cols = self.base.independent
        for j in range(self.model.n):
            rows = keep[:, j]
            m = int(rows.sum())
            if not m:
                continue
            block = np.empty((m, self.n_cols))
            block[:, :self.n_par] = Ws[rows, j][:, cols]
            block[:, self.n_par] = data.effort[rows, j]
            block[:, self.n_par + 1] = data.effort_raw[rows, j]
            if probes is not None:
                block[:, self.n_par + 2:] = probes[rows, j, :]
            # small blocks wait: one QR of the R factor per FOLD_ROWS rows, not per block
            self._pending[j].append(block)
            self._pending_rows[j] += m
            if self._pending_rows[j] >= FOLD_ROWS:
                self._fold(j)
            self.counts[j] += m

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(W (base), y, joint) of the stacked R factors: the rows' normal equations per joint
        (`model_error_term` takes these)."""
        lead = [R[:self.n_par + 2, :self.n_par + 2] for R in self.R]
        stack = np.vstack(lead)
        joint = np.concatenate([np.full(r.shape[0], j) for j, r in enumerate(lead)])
        return stack[:, :self.n_par], stack[:, self.n_par], joint.astype(int)

    def problem(self) -> IdentificationProblem:
        model = self.model
        for k, name in enumerate(model.joint_names):
            if self.counts[k] == 0:
                raise IdentificationError(f"joint {name!r} has no sample outside the friction dead band "
                                          "(is it moving at all?)")
        W, y, joint = self.rows()
        return IdentificationProblem(W, y, joint, model.joint_names, self.base.names,
                                     self.n_samples, self.base, W @ self.base.projection, model.layout,
                                     model.nominal.copy(), None,
                                     row_counts=self.counts.copy(), model=model)

    def raw_residual_rms(self, values: np.ndarray) -> np.ndarray:
        """Per joint RMS of raw effort - W x over the kept rows (base values x)."""
        v = np.zeros(self.n_cols)
        v[:self.n_par] = values
        v[self.n_par + 1] = -1.0
        ss = np.array([float(np.sum((R @ v) ** 2)) for R in self.R])
        return np.sqrt(ss / np.maximum(self.counts, 1))


def _guard_rows(store, lo: int, hi: int, guard_s: float) -> int:
    """Rows of a store within `guard_s` seconds of each other, bounded from the smallest step."""
    d = store.read(lo, min(hi, lo + 64))
    if d.n_samples < 2:
        return 2
    step = float(np.min(np.diff(d.t)))
    return int(math.ceil(guard_s / max(step, 1e-9))) + 3


def store_chunks(store, lo: int, hi: int, threshold: float, guard_s: float, chunk: int, model, bands=None):
    """(ProcessedData rows [a, b), moving mask of those rows as part of [lo, hi)); the dead
    band is the model's (on motor velocities for a coupled transmission), as in memory.
    `bands`: label -> (threshold, guard_s) of further masks, yielded third as a dict."""
    from ..model.transmission import dead_band_rows
    guards = [guard_s] + [g for _, g in (bands or {}).values()]
    margin = _guard_rows(store, lo, hi, max(guards)) if max(guards) > 0 else 0
    for a in range(lo, hi, chunk):
        b = min(a + chunk, hi)
        a0, b0 = max(lo, a - margin), min(hi, b + margin)
        d = store.read(a0, b0)
        sl = slice(a - a0, b - a0)
        mask = np.asarray(dead_band_rows(model, d, threshold, guard_s))[sl]
        if bands is None:
            yield d.subset(np.arange(d.n_samples)[sl]), mask
        else:
            yield d.subset(np.arange(d.n_samples)[sl]), mask, {
                k: np.asarray(dead_band_rows(model, d, t, g))[sl] for k, (t, g) in bands.items()}


def run_chunks(runs, threshold: float, guard_s: float, chunk: int, model, bands=None):
    """`store_chunks` over row runs ``(store, lo, hi)`` in turn: each run's dead band is its own."""
    for store, lo, hi in runs:
        yield from store_chunks(store, lo, hi, threshold, guard_s, chunk, model, bands)


def run_rows(runs) -> int:
    return sum(hi - lo for _, lo, hi in runs)


def accumulate(runs, model: RobotModel, base: BaseParameters, threshold: float,
               guard_s: float, chunk: int = CHUNK_SAMPLES, progress=None, plot_points: int = PLOT_POINTS):
    """The compressed problem of the row runs ``(store, lo, hi)`` (with the rows each of
    `model_error_term.variants` leaves out, `acc.left_out`), and every k-th sample of them
    (at most `plot_points`) for the plots."""
    from .model_error_term import variants
    total = run_rows(runs)
    acc = CompressedAccumulator(model, base)
    every = max(1, -(-total // plot_points))
    picks = []
    for d, mask, kept in run_chunks(runs, threshold, guard_s, chunk, model, variants(threshold, guard_s)):
        acc.add(d, mask, kept)
        first = (-(acc.n_samples - d.n_samples) % every)
        picks.append(d.subset(np.arange(first, d.n_samples, every)))
        if progress is not None:
            progress(acc.n_samples, total)
    from ..data.signals import concatenate
    return acc, concatenate(picks)


def validate_runs(result, model: RobotModel, runs, threshold: float, guard_s: float,
                  noise_std=None, chunk: int = CHUNK_SAMPLES, plot_points: int = PLOT_POINTS,
                  progress=None) -> ValidationReport:
    """`validation.validate` on the row runs ``(store, lo, hi)``, chunk by chunk; the report's
    time series hold every k-th sample (at most `plot_points`), the figures all."""
    total = run_rows(runs)
    acc = RmsAccumulator(model.joint_names, every=-(-total // plot_points))
    for d, mask in run_chunks(runs, threshold, guard_s, chunk, model):
        acc.add(d.t, d.effort_raw, result.predict(model, d.q, d.qd, d.qdd), mask, d.effort)
        if progress is not None:
            progress(acc.done, total)
    return acc.report(noise_std, threshold, model.limits.effort)


def decimated(runs, model, threshold, guard_s, max_samples: int = 3000, block: int = CHUNK_SAMPLES) -> tuple:
    """(data, moving) of every s-th sample of the row runs, block by block (the dead band
    judged at full rate within each run; memory independent of the runs' length)."""
    s = decimation_stride(run_rows(runs), max_samples)
    kept, masks, done = [], [], 0
    for d, mask in run_chunks(runs, threshold, guard_s, block, model):
        idx = np.arange(-done % s, d.n_samples, s)
        done += d.n_samples
        if idx.size:
            kept.append(d.subset(idx))
            masks.append(mask[idx])
    return concatenate(kept), np.concatenate(masks)
