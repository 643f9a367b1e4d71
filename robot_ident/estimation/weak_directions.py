"""Which combination of base parameters a motion determines least, and why: named in
words for `identify` (from the estimate's covariance), `design` (from the designed
trajectory's regressor), result.yaml and the report.

The cause is one of two:

* **excitation**: a motion within the joint limits separates the combination (random
  states within the limits, the motion the base reduction itself uses, tell its terms
  apart): another design would determine it;
* **structure**: no motion separates it: the terms' columns cancel to within
  STRUCTURE_RATIO in every state -- a URDF or model matter (an angle rounded off a right
  angle, two axes nearly parallel), which no excitation fixes.

The measure: for the direction's parameter step ``d`` (standard units), the RMS of
``W d`` over random states against the RMS it would have if its terms did not cancel,
``sqrt(sum_i (d_i rms(W_i))^2)``. A combination kept by the base reduction (rank
tolerance 1e-8) yet below STRUCTURE_RATIO is a near-degeneracy of the structure (the
xArm7 with "1.5708": 5e-5 against 3.3 for the next singular value).
"""
from __future__ import annotations

import numpy as np

STRUCTURE_RATIO = 1e-3
MAIN_SHARE = 0.25          # a term is named when its weight is at least this share of the largest
RANDOM_STATES = 300


def join_terms(terms) -> str:
    """The terms of a direction in words: "a, b and c", or "a from the rest" alone."""
    return ", ".join(terms[:-1]) + f" and {terms[-1]}" if len(terms) > 1 else f"{terms[0]} from the rest"


def name_terms(names, vector) -> tuple[list[str], list[float], str]:
    """The main terms of a direction (sign: the largest positive), their weights and the words."""
    k = np.argsort(-np.abs(vector))
    main = [int(i) for i in k[:3] if abs(vector[i]) >= MAIN_SHARE * abs(vector[k[0]])]
    sign = np.sign(vector[main[0]])
    terms = [names[i] for i in main]
    return terms, [float(vector[i] * sign) for i in main], join_terms(terms)


def motion_separation(model, base, step: np.ndarray, seed: int = 0) -> float:
    """How well motion within the limits separates the base-parameter step `step`: RMS of
    its effect over random states over the RMS without cancellation (1: no cancellation)."""
    rng = np.random.default_rng(seed)
    lo, hi = model.limits.lower.copy(), model.limits.upper.copy()
    lo[~np.isfinite(lo)] = -np.pi
    hi[~np.isfinite(hi)] = np.pi
    q = rng.uniform(lo, hi, size=(RANDOM_STATES, model.n))
    qd = rng.uniform(-2.0, 2.0, size=(RANDOM_STATES, model.n))
    qdd = rng.uniform(-10.0, 10.0, size=(RANDOM_STATES, model.n))
    W = base.regressor(model.regressor(q, qd, qdd))
    col = np.sqrt(np.mean(W ** 2, axis=0))
    apart = np.sqrt(np.sum((step * col) ** 2))
    return float(np.sqrt(np.mean((W @ step) ** 2)) / apart) if apart > 0 else 1.0


def cause(model, base, step: np.ndarray) -> dict:
    """``{cause, separation, advice}`` for a direction (a base-parameter step)."""
    s = motion_separation(model, base, step)
    if s < STRUCTURE_RATIO:
        return {"cause": "structure", "separation": s,
                "advice": f"no motion within the joint limits separates them (they cancel to {s:.1g} in any "
                          "motion): a URDF or model matter -- an angle rounded off a right angle, two nearly "
                          "parallel axes -- that no excitation fixes"}
    return {"cause": "excitation", "separation": s,
            "advice": "another excitation would separate them (robot-ident design)"}


def from_covariance(result, column_rms=None, effort_rms=None, model=None) -> dict | None:
    """The combination of base parameters the data determine least, in terms of what it does
    to the predicted efforts: the top eigenvector of the covariance scaled by each
    parameter's effect (column RMS / effort RMS), its main terms named; with `model`, its cause."""
    cov = getattr(result, "covariance", None)
    if cov is None or not np.all(np.isfinite(cov)):
        return None
    scale = (np.asarray(column_rms, float) / effort_rms if column_rms is not None and effort_rms
             else 1.0 / np.maximum(np.abs(result.values), 1e-12))
    cs = cov * np.outer(scale, scale)
    w, v = np.linalg.eigh(0.5 * (cs + cs.T))
    top = v[:, -1]
    terms, weights, text = name_terms(result.names, top)
    share = 100 * np.sqrt(max(w[-1], 0.0))
    out = {"parameters": terms, "weights": weights, "effort_change_per_std_percent": float(share),
           "text": text + f" (together they move the predicted efforts by {share:.2g} % of their RMS per standard "
                          "deviation)"}
    if model is not None:
        out.update(cause(model, result.base, top / np.where(scale > 0, scale, 1.0)))
    return out


def from_regressor(W: np.ndarray, model, base) -> dict:
    """The combination a trajectory's base regressor `W` (rows, p) determines least: its
    smallest singular direction with the columns at unit RMS, named, with its cause."""
    col = np.sqrt(np.mean(W ** 2, axis=0))
    col = np.where(col > 0, col, 1.0)
    _, sv, vt = np.linalg.svd(W / col, full_matrices=False)
    low = vt[-1]
    terms, weights, text = name_terms(base.names, low)
    return {"parameters": terms, "weights": weights, "text": text,
            "singular_value_ratio": float(sv[-1] / sv[0]), **cause(model, base, low / col)}
