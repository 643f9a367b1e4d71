"""Validation by RMS (source A step 6): predicted versus measured effort per joint.

The prediction uses the processed (filtered) states; it is compared with the effort
*as measured* (``ProcessedData.effort_raw``), so a perfect model scores the effort
noise: ``rms / noise_std`` close to 1 is the best achievable figure.

Next to the relative RMS (``rms / RMS(measured)``, which exceeds 100 % on a joint
whose effort stays near zero however good the fit) the report gives the NRMS:
``rms`` over the joint's effort limit from the URDF, or, when the URDF has none,
over the measured effort range (max - min); ``nrms_reference`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.signals import ProcessedData
from ..errors import SignalError
from ..model.robot import RobotModel
from ..model.transmission import dead_band_rows


@dataclass
class ValidationReport:
    joint_names: tuple[str, ...]
    rms: np.ndarray              # (n,) RMS of measured - predicted [N*m or N]
    relative_rms: np.ndarray     # (n,) rms / RMS(measured)
    noise_ratio: np.ndarray | None  # (n,) rms / effort noise std, when the noise is known
    max_abs_error: np.ndarray    # (n,)
    n_samples: np.ndarray        # (n,) samples used per joint
    moving_threshold: float | None
    t: np.ndarray                # sample times
    measured: np.ndarray         # (N, n) measured effort
    predicted: np.ndarray        # (N, n)
    nrms: np.ndarray | None = None          # (n,) rms / nrms_scale
    nrms_scale: np.ndarray | None = None    # (n,) effort limit or measured range [N*m or N]
    nrms_reference: tuple[str, ...] = ()    # per joint: 'effort_limit' or 'effort_range'

    def as_dict(self) -> dict:
        out = {}
        for k, j in enumerate(self.joint_names):
            d = {"rms": float(self.rms[k]), "relative_rms": float(self.relative_rms[k]),
                 "max_abs_error": float(self.max_abs_error[k]), "samples": int(self.n_samples[k])}
            if self.noise_ratio is not None:
                d["rms_over_noise_std"] = float(self.noise_ratio[k])
            if self.nrms is not None:
                d["nrms"] = float(self.nrms[k])
                d["nrms_reference"] = self.nrms_reference[k]
                d["nrms_scale"] = float(self.nrms_scale[k])
            out[j] = d
        return out


def rms_report(t, measured, predicted, joint_names, mask=None, noise_std=None,
               moving_threshold=None, effort_limit=None) -> ValidationReport:
    """Per-joint RMS of measured - predicted over the samples where mask is True; NRMS
    against `effort_limit` (per joint; a non-positive or non-finite entry falls back on
    the measured effort range)."""
    measured = np.asarray(measured, float)
    predicted = np.asarray(predicted, float)
    if measured.shape != predicted.shape:
        raise SignalError(f"measured {measured.shape} and predicted {predicted.shape} efforts differ in shape")
    mask = np.ones(measured.shape, bool) if mask is None else np.asarray(mask, bool)
    n = measured.shape[1]
    rms, rel, mx, cnt, span = (np.zeros(n) for _ in range(5))
    for k in range(n):
        m = mask[:, k]
        if not m.any():
            raise SignalError(f"no validation sample left for joint {joint_names[k]!r} "
                              f"(moving threshold {moving_threshold})")
        e = measured[m, k] - predicted[m, k]
        rms[k] = np.sqrt(np.mean(e ** 2))
        ref = np.sqrt(np.mean(measured[m, k] ** 2))
        rel[k] = rms[k] / ref if ref > 0 else np.inf
        mx[k] = np.max(np.abs(e))
        cnt[k] = m.sum()
        span[k] = np.ptp(measured[m, k])
    ratio = None if noise_std is None else rms / np.asarray(noise_std, float)
    nrms, scale, refs = nrms_of(rms, effort_limit, span)
    return ValidationReport(tuple(joint_names), rms, rel, ratio, mx, cnt.astype(int), moving_threshold,
                            np.asarray(t), measured, predicted, nrms, scale, refs)


def nrms_of(rms: np.ndarray, effort_limit, effort_range: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple]:
    """(NRMS, its scale, reference per joint): RMS over the effort limit, or over the measured
    effort range where the limit is not positive and finite."""
    n = len(rms)
    limit = (np.full(n, np.nan) if effort_limit is None
             else np.broadcast_to(np.asarray(effort_limit, float), (n,)))
    use_limit = np.isfinite(limit) & (limit > 0)
    scale = np.where(use_limit, limit, np.asarray(effort_range, float))
    refs = tuple("effort_limit" if u else "effort_range" for u in use_limit)
    with np.errstate(divide="ignore"):
        nrms = np.where(scale > 0, rms / np.where(scale > 0, scale, 1.0), np.inf)
    return nrms, scale, refs


def validate(result, model: RobotModel, data: ProcessedData, moving_threshold: float | None = None,
             noise_std=None, reversal_guard_s: float = 0.0) -> ValidationReport:
    """Validate an identification result on held-out processed data (outside the
    friction dead band when `moving_threshold` is given)."""
    predicted = result.predict(model, data.q, data.qd, data.qdd)
    mask = None if moving_threshold is None else dead_band_rows(model, data, moving_threshold, reversal_guard_s)
    return rms_report(data.t, data.effort_raw, predicted, data.joint_names, mask, noise_std, moving_threshold,
                      effort_limit=model.limits.effort)
