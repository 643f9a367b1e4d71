"""A model-error term in the standard deviations: how far the estimate moves when the samples
where the friction law is least sure are left out, beyond what the noise explains.

The autocorrelation-consistent covariance (uncertainty.py) holds for noise, and for model
error as far as it shows in the residuals. Model error that the parameters absorb does not
show there. On the MuJoCo pipeline (bench/physical.py) a third of the squared error was
such a bias, the same sign on every seed, largest on the joint terms: wrist_3's Coulomb
friction at -3.1 sigma, shoulder_lift's viscous friction at -2.7, the armatures at +2.5.
Its source is the friction law: MuJoCo's friction, like a real joint's (stiction, Stribeck),
is not Coulomb + viscous near rest, and the fit bends the parameters to it. One sigma then
held 47 % of the errors, where it should hold 68 %.

Two variants leave out the rows where the law is least sure: those within `GUARD_FACTOR` x
the reversal guard of a velocity reversal, and those slower than `SPEED_FACTOR` x the
moving threshold. Each is solved with the main fit's joint weights from the normal
equations less the rows it leaves out (W^T W and W^T y are all it takes, so rows in memory
and a compressed problem's R factors go through the same code). Its shift d = x_v - x is
part noise, part model error. The noise part has, per parameter, the variance

    Var_noise(d_k) = C_kk (B_kk / A^-1_kk - 1),     A = the main normal matrix, B = the variant's inverse,

(Hausman 1978: the difference of an efficient estimator and a less efficient one, each
variance scaled by the main covariance C's inflation over the white-noise formula). The
physical estimate takes its WLS level's shifts (and their noise) through its own response to
that level, the gain that carries the WLS covariance into its own: where the CAD prior
holds a parameter, the shift is held too (unmapped, the KUKA LWR4+'s lwr_2 Ixy got 1200x its
sigma, a direction the data barely see). What
is left, max(0, d_k^2 - Var_noise(d_k)), summed over the variants (in quadrature, as
independent systematic sources), is added to each parameter's variance: on clean data (the
model's law, filtered noise) it is about 0 and the standard deviations are the noise's; on
the MuJoCo pipeline one sigma holds 60-65 % of the errors (bench/physical.py,
test/test_model_error_term.py). It measures model error of the friction law near rest, not other
kinds (an unmodelled flexibility, a wrong kinematic parameter): result.yaml says so.

Hand-written: a few normal-equation solves on the problem's own rows; no library states it.
"""
from __future__ import annotations

import numpy as np

GUARD_FACTOR = 4.0        # x the reversal guard (1 / cutoff): the variant leaves out more around reversals
SPEED_FACTOR = 4.0        # x the moving threshold: the variant leaves out slow rows
MAX_CONDITION = 1e12      # a variant whose rows no longer determine the parameters is left out


def variants(threshold: float, guard_s: float) -> dict[str, tuple[float, float]]:
    """label -> (moving threshold, reversal guard) of each variant."""
    guard = GUARD_FACTOR * guard_s if guard_s > 0 else 0.1
    speed = SPEED_FACTOR * threshold if threshold > 0 else 0.1
    return {f"reversal guard {guard:.3g} s": (threshold, guard),
            f"moving threshold {speed:.3g}": (speed, guard_s)}


def left_out_rows(model, data, problem, threshold: float, guard_s: float) -> dict:
    """label -> (W, y, joint) of the rows in memory of `problem` (built from `data`) that each
    variant leaves out."""
    from ..model.transmission import dead_band_rows
    out = {}
    for label, (t, g) in variants(threshold, guard_s).items():
        gone = ~np.asarray(dead_band_rows(model, data, t, g))[problem.sample_of_row, problem.joint_of_row]
        out[label] = (problem.W[gone], problem.y[gone], problem.joint_of_row[gone])
    return out


def normal_equations(W: np.ndarray, y: np.ndarray, joint: np.ndarray, weights: np.ndarray):
    """(W_w^T W_w, W_w^T y_w) of rows (or R-factor rows) weighted by their joint's weight."""
    w = np.asarray(weights, float)[np.asarray(joint, int)]
    Ww = W * w[:, None]
    return Ww.T @ Ww, Ww.T @ (y * w)


def _solve(A: np.ndarray, b: np.ndarray):
    """(x, A^-1) in the scaled basis, or None where A is near singular."""
    s = np.sqrt(np.clip(np.diag(A), 1e-300, None))
    As = A / np.outer(s, s)
    if not np.all(np.isfinite(As)) or np.linalg.cond(As) > MAX_CONDITION:
        return None
    inv = np.linalg.inv(As) / np.outer(s, s)
    return inv @ b, inv


def model_error_variance(main, left_out: dict, weights: np.ndarray, covariance: np.ndarray,
                         gain: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """(variance (p,) to add, info). `main`: (W, y, joint) of the fit's rows; `left_out`: label ->
    (W, y, joint) of the rows each variant leaves out; `weights` (n,): the joints' weights of the
    weighted least-squares fit; `covariance`: its (noise) covariance, whose inflation over the
    white-noise formula scales the noise part; `gain` (p, p): how the reported estimate moves per
    move of that fit (the physical estimate's response to its data term; None: it is that fit)."""
    A, b = normal_equations(*main, weights)
    full = _solve(A, b)
    p = A.shape[0]
    add, shifts, skipped = np.zeros(p), {}, []
    if full is None:
        return add, {"model_error": "not computed: the fit's rows do not determine the parameters"}
    x, A_inv = full
    D = np.sqrt(np.clip(np.diag(covariance), 0.0, None) / np.diag(A_inv))     # HAC over white, per parameter
    G = np.eye(p) if gain is None else np.asarray(gain, float)
    c = np.clip(np.diag(G @ covariance @ G.T), 0.0, None)
    for label, rows in left_out.items():
        Ae, be = normal_equations(*rows, weights)
        sub = _solve(A - Ae, b - be)
        if sub is None:
            skipped.append(label)
            continue
        xv, B = sub
        d = G @ (xv - x)
        noise = np.clip(np.einsum("ij,jk,ik->i", G * D, B - A_inv, G * D), 0.0, None)
        excess = np.clip(d * d - noise, 0.0, None)
        shifts[label] = float(np.median(np.sqrt(excess / np.maximum(c, 1e-300))))
        add = add + excess                       # in quadrature, as independent systematic sources
    info = {"model_error_variants": {k: round(v, 4) for k, v in shifts.items()}}
    if skipped:
        info["model_error_variants_left_out"] = skipped
    return add, info


LEAST_SQUARES = ("ols", "wls", "physical")     # fits of every row with its joint's weight


def add_model_error(result, main, left_out: dict) -> None:
    """The term into `result` (rows as `model_error_variance` takes them; the fit's joint
    weights 1 / joint_sigma): covariance (diagonal: its correlations are not known), std,
    and `extra` (the noise-only standard deviations kept as `std_noise`). Only for the
    LEAST_SQUARES fits: a robust fit's rows weigh what it decided (spikes discounted), and the
    variants solved with every row would measure the spikes, not the friction law."""
    if result.method not in LEAST_SQUARES:
        result.extra["model_error"] = f"not estimated for method {result.method} (its own row weights)"
        return
    fit = result.data_fit if result.data_fit is not None else result       # physical: its WLS level
    cov = np.asarray(fit.covariance, float)
    sigma = np.asarray(fit.joint_sigma, float)
    if cov.shape != (len(result.values),) * 2 or not np.all(np.isfinite(cov)) or not np.all(sigma > 0):
        return
    add, info = model_error_variance(main, left_out, 1.0 / sigma, cov, result.data_gain)
    result.extra["std_noise"] = [float(v) for v in result.std]
    cov = np.array(result.covariance, float)          # a copy: the fit's own covariance stays as it was
    cov[np.diag_indices_from(cov)] += add
    result.covariance = cov
    result.std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.sqrt(add) / np.where(result.std > 0, result.std, np.nan)
    result.extra.update(info)
    result.extra["model_error_share_median"] = float(np.nanmedian(share)) if np.isfinite(share).any() else 0.0
