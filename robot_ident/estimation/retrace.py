"""Does a validation recording retrace the identification's motion?

A recording of the same excitation played again (a common way to get a "second" recording)
holds the states the model was fitted on, give or take noise: its RMS measures repeatability,
not the model on motion it has not seen. On the KUKA LWR4+ recordings of FloBaRoID, runs 1
and 2 are one trajectory twice (every position within 6 mrad): an unconstrained fit that
explains run 1's torques with a flange inertia of 0.3 kg*m^2 (`wls`) validates 1.66x better
on run 2 than the physically consistent one, and 2-5x worse on run 3, another trajectory.

The measure: each validation state's distance to the identification's path in
(position, velocity) space, each coordinate scaled by the identification's range of that
joint, as an RMS over the coordinates. The path is the polyline through the identification's
samples in time order (broken at gaps), so a stride between the stored samples does not
read as distance. KUKA run 2 against run 1: 90 % of the states within 0.03 % of the range;
run 3 against run 1: none; the Panda's held-out blocks against the rest of its recording:
49 % (its excitation repeats after 13.3 s: the block at 18-20 s retraces 4.9-6.5 s within
0.1 %; the hold-out is not checked, only validation recordings).

Written by hand around scipy's KD-tree: the nearest point on a polyline is a few lines.
"""
from __future__ import annotations

import numpy as np

from .compressed import decimated

NEAR = 0.01            # a state within 1 % of the ranges (RMS over coordinates) retraces
RETRACE_FRACTION = 0.5  # a recording whose moving states retrace at least this often earns the note
MOVING = 0.05          # a state moves when its velocities' RMS exceeds this fraction of their ranges: an arm
# parked at a pose it also rested at in the identification is no repeat of its motion
_K = 6                 # nearest segment midpoints examined per state


def retraced_fraction(ident_t, ident_q, ident_qd, valid_q, valid_qd) -> float:
    """The fraction of the moving validation states (valid_q, valid_qd: (M, n)) within NEAR of the
    identification's path (ident_t (N,), ident_q, ident_qd (N, n), in time order per segment)."""
    iq, iqd = np.asarray(ident_q, float), np.asarray(ident_qd, float)
    vq, vqd = np.atleast_2d(np.asarray(valid_q, float)), np.atleast_2d(np.asarray(valid_qd, float))
    if iq.shape[0] < 2 or vq.shape[0] == 0:
        return 0.0
    from scipy.spatial import cKDTree
    keep = np.isfinite(iq).all(axis=1) & np.isfinite(iqd).all(axis=1)
    ident_t, iq, iqd = np.asarray(ident_t, float)[keep], iq[keep], iqd[keep]
    good = np.isfinite(vq).all(axis=1) & np.isfinite(vqd).all(axis=1)
    vq, vqd = vq[good], vqd[good]
    if iq.shape[0] < 2 or vq.shape[0] == 0 or (np.ptp(iq, axis=0) > 1e-3).sum() < 2:
        return 0.0      # one moving joint: its (q, qd) plane fills up, other motions pass through it
    scale = np.r_[np.maximum(np.ptp(iq, axis=0), 1e-3), np.maximum(np.ptp(iqd, axis=0), 1e-3)]
    X = np.hstack([iq, iqd]) / scale
    Y = np.hstack([vq, vqd]) / scale
    n = iq.shape[1]
    Y = Y[np.sqrt(np.mean(Y[:, n:] ** 2, axis=1)) > MOVING]
    if Y.shape[0] == 0:
        return 0.0
    dt = np.diff(ident_t)
    joined = (dt > 0) & (dt <= 3.0 * np.median(dt[dt > 0])) if (dt > 0).any() else np.zeros(dt.size, bool)
    if not joined.any():
        return 0.0
    a, b = X[:-1][joined], X[1:][joined]
    _, idx = cKDTree(0.5 * (a + b)).query(Y, k=min(_K, a.shape[0]))
    idx = np.asarray(idx).reshape(Y.shape[0], -1)
    sa, ab = a[idx], b[idx] - a[idx]                                   # (M, k, 2n)
    s = np.clip(((Y[:, None, :] - sa) * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-30), 0.0, 1.0)
    d = np.linalg.norm(Y[:, None, :] - (sa + s[..., None] * ab), axis=-1).min(axis=1) / np.sqrt(X.shape[1])
    return float(np.mean(d <= NEAR))


def retrace_note(label: str, fraction: float) -> list[str]:
    """The note for validation recording `label` whose states retrace the identification's
    path `fraction` of the time ([] below RETRACE_FRACTION)."""
    if fraction < RETRACE_FRACTION:
        return []
    return [f"note: validation recording {label} retraces the identification's motion ({100 * fraction:.0f} % "
            f"of its moving states within {100 * NEAR:g} % of the motion's range of an identified state: the same "
            "trajectory again?): its RMS measures repeatability, not the model on motion it has not seen; validate "
            "on another trajectory for that"]


def retraced_inputs(model, ident_runs, vprocessed, thr: float, guard: float) -> list[str]:
    """Notes for the validation inputs (`vprocessed`, a data.processing.Processed) whose
    states retrace those of the identification's row runs."""
    ident = decimated(ident_runs, model, thr, guard, max_samples=20_000)[0]
    out = []
    for k, x in enumerate(vprocessed.inputs):
        runs = [(vprocessed.store, a, b) for seg, (a, b) in zip(vprocessed.segments, vprocessed.segment_rows())
                if seg.input == k]
        if runs:
            v = decimated(runs, model, thr, guard)[0]
            out += retrace_note(x.label, retraced_fraction(ident.t, ident.q, ident.qd, v.q, v.qd))
    return out
