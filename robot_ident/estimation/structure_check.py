"""Does the model's structure fit the data? A check run after every estimate.

A held-out / in-sample ratio cannot see a structural error (a coupling, a spring or a
gain left out of the config): the model is then equally wrong on both. What can see
it is what the residual follows. Per joint j, the residual of the best fit of the
model's structure (WLS) is regressed on probes the model does not contain:

- its own position q_j: a spring or a balancer the config lacks (``springs:``);
- each other joint's measured effort y_l: a coupling the config lacks or gets wrong
  (``transmissions:``), or two channels crossed;
- each other joint's CAD effort (rigid-body, from the positions): two channels crossed,
  the joint's efforts moving as another joint's should;
- its own regressor with the joint's parameters freed from the other joints'
  (``own``): the joints disagree about the parameters they share, as a torque constant
  or gear ratio wrong on one joint, or a wrong sign of a coupling, makes them;
- its own prediction (``gain``): the slope says by how much the joint's efforts are
  larger or smaller than what the other joints imply.

Every quantity comes from the per-joint R factors of [W_std | y | raw | probes] that
the compressed problem keeps (compressed.py): an inner product of two combinations a,
b of the columns over the rows is (R a) . (R b), so nothing is re-read. A probe
explains a share of the residual's variance (after its mean); a joint *misses
structure* when its residual is a visible part of its effort and one probe explains
most of it, or when its residual is most of its effort whatever it follows
(`judge_structure`).
"""
from __future__ import annotations

import numpy as np

from ..data.signals import ProcessedData
from .r_factor import r_factor


def n_probes(n_joints: int) -> int:
    """Probe columns per joint: a constant, the joint's position, the other joints' measured
    and CAD efforts."""
    return 2 * n_joints


def probe_columns(model, data: ProcessedData) -> np.ndarray:
    """(N, n, 2 n): for joint j, [1, q_j, y_l for l != j, cad_l for l != j] (filtered
    efforts; the CAD model's rigid-body efforts, zeros for a model that has none)."""
    from .gain_check import cad_efforts
    N, n = data.q.shape
    cad = cad_efforts(model, data)
    cad = np.zeros((N, n)) if cad is None else cad
    out = np.empty((N, n, 2 * n))
    out[:, :, 0] = 1.0
    out[:, :, 1] = data.q
    for j in range(n):
        out[:, j, 2:n + 1] = np.delete(data.effort, j, axis=1)
        out[:, j, n + 1:] = np.delete(cad, j, axis=1)
    return out


def _ss_left(A: np.ndarray, r: np.ndarray) -> float:
    """Sum of squares of `r` left after least squares on the columns `A` (rows: any factor
    with the same Gram matrix as the samples')."""
    if A.shape[1] == 0:
        return float(r @ r)
    coef = np.linalg.lstsq(A, r, rcond=None)[0]
    e = r - A @ coef
    return float(e @ e)


def structure_diagnostics(R_factors, n_w: int, x: np.ndarray, joint_names) -> list[dict]:
    """Per joint: {joint, relative_rms (residual / measured effort RMS over the kept rows),
    explained: {probe: share of the centred residual variance}, gain_slope}. `R_factors`:
    per joint the R of [W | y | raw | probes] with W's `n_w` columns and `x` their parameters
    (base, as `compressed.CompressedAccumulator` keeps them, or any other regressor's)."""
    n = len(joint_names)
    out = []
    for j, R in enumerate(R_factors):
        if R.shape[0] == 0:             # a joint without rows (the payload's unused joints)
            continue
        m = R.shape[1]
        v_r = np.zeros(m)
        v_r[:n_w], v_r[n_w] = -x, 1.0
        v_p = np.zeros(m)
        v_p[:n_w] = x
        r, pred, raw = R @ v_r, R @ v_p, R[:, n_w + 1]
        P = R[:, n_w + 2:]
        one = P[:, :1]
        ss0 = _ss_left(one, r)
        ee = float(raw @ raw)
        rel = float(np.sqrt(float(r @ r) / ee)) if ee > 0 else float("nan")
        share = (lambda A: max(0.0, 1.0 - _ss_left(np.column_stack([one, A]), r) / ss0)) if ss0 > 0 else \
            (lambda A: 0.0)
        explained = {"position": share(P[:, 1:2]), "own": share(R[:, :n_w]), "gain": share(pred[:, None])}
        others = [joint_names[k] for k in range(n) if k != j]
        for k, name in enumerate(others):
            explained[f"effort of {name}"] = share(P[:, 2 + k:3 + k])
            explained[f"CAD effort of {name}"] = share(P[:, n + 1 + k:n + 2 + k])
        pc = pred - one[:, 0] * (float(one[:, 0] @ pred) / float(one[:, 0] @ one[:, 0]))
        slope = float(pc @ r) / float(pc @ pc) if float(pc @ pc) > 0 else float("nan")
        out.append({"joint": joint_names[j], "relative_rms": rel, "explained": explained, "gain_slope": slope})
    return out


# Thresholds, from the faults and the public logs of real arms (bench/structure.py): on the
# four real logs no probe but `own` explains more than 0.30 of a joint's residual and `own`
# at most 0.85 (Panda joint 5); where a missing spring, a coupling's sign, a 1.3x torque
# constant on one joint or crossed channels are seen through `own`, it reaches 0.96-1.00.
PROBE_SHARE = 0.5        # a named probe (position, another joint's effort) explains this much ...
OWN_SHARE = 0.95         # ... or the joint's own terms freed from the others this much ...
MIN_REMOVED = 0.01       # ... and it would remove this fraction of the joint's effort RMS
UNEXPLAINED = 0.75       # a residual this large a fraction of the effort RMS whatever it follows (the model
                         # explains under 44 % of the effort's variance; real logs: at most 0.51, a light
                         # wrist whose torque is mostly sensor noise)


def _removed(rel: float, share: float) -> float:
    """The part of the effort RMS a probe explaining `share` of a residual of `rel` x the
    effort RMS would remove."""
    return rel * (1.0 - np.sqrt(max(0.0, 1.0 - share)))


def judge_structure(diagnostics: list[dict]) -> list[dict]:
    """The joints whose residual follows something the model lacks:
    [{joint, cause, probe, share, relative_rms, gain}], the named probe first."""
    out = []
    for d in diagnostics:
        rel, ex = d["relative_rms"], d["explained"]
        if not np.isfinite(rel):
            continue
        named = {k: v for k, v in ex.items() if k != "own" and k != "gain"}
        probe = max(named, key=named.get) if named else None
        if probe is not None and named[probe] >= PROBE_SHARE and _removed(rel, named[probe]) >= MIN_REMOVED:
            other = probe.rpartition("effort of ")[2]
            cause = ("a spring or balancer that springs: lacks or places wrong" if probe == "position" else
                     f"crossed channels (its efforts move as joint {other!r}'s should), or a gain error the fit "
                     "spreads" if probe.startswith("CAD")
                     else f"a coupling with joint {other!r} that transmissions: lacks or gets wrong, crossed "
                          "current channels, or a gain error the fit spreads")
            out.append({"joint": d["joint"], "probe": probe, "share": named[probe], "relative_rms": rel,
                        "cause": cause, "gain": 1.0 + d["gain_slope"]})
        elif ex["own"] >= OWN_SHARE and _removed(rel, ex["own"]) >= MIN_REMOVED:
            out.append({"joint": d["joint"], "probe": "own", "share": ex["own"], "relative_rms": rel,
                        "cause": "the joints disagree about the parameters they share -- a torque constant, gear "
                                 "ratio or direction wrong on one of them or another joint, a coupling or spring the "
                                 "config lacks, or crossed channels", "gain": 1.0 + d["gain_slope"]})
        elif rel >= UNEXPLAINED:
            out.append({"joint": d["joint"], "probe": "none", "share": 0.0, "relative_rms": rel,
                        "cause": "the model explains little of its effort -- crossed or mislabelled channels, a "
                                 "torque constant far off, or a joint whose effort is mostly noise",
                        "gain": 1.0 + d["gain_slope"]})
    return out


INPUTS_RATIO = 3.0       # one input's residual this many times another's on a joint ...
INPUTS_SHARE = 0.2       # ... and at least this share of its effort RMS: the inputs disagree


def judge_inputs(joints, labels, rms, relative) -> list[dict]:
    """Joints on which the identification inputs disagree: the fitted model's residual RMS
    (`rms`, (inputs, n), N*m or N) in one input INPUTS_RATIO times another's and INPUTS_SHARE of
    its effort RMS (`relative`) -- one model cannot fit both (a plain and a coupled arm's bags,
    another robot, payload or transmission). Absolute residuals: the same sensors give the same
    noise in a slow and a fast input, where relative ones differ with the motion."""
    out = []
    rms, relative = np.asarray(rms, float), np.asarray(relative, float)
    for j, name in enumerate(joints):
        col = rms[:, j]
        if not np.isfinite(col).all() or len(col) < 2:
            continue
        hi, lo = int(np.argmax(col)), int(np.argmin(col))
        f = _disagreement(name, col[hi], col[lo], relative[hi, j],
                          f"its residual is {col[hi] / max(col[lo], 1e-300):.3g} x as large in {labels[hi]} "
                          f"({100 * relative[hi, j]:.3g} % of its effort RMS) as in {labels[lo]}")
        if f:
            out.append(f)
    return out


def _disagreement(joint: str, large: float, small: float, relative: float, what: str) -> dict | None:
    """An "inputs" finding when residual `large` is INPUTS_RATIO times `small` and INPUTS_SHARE
    of the effort RMS (`relative`): one model cannot fit the inputs compared."""
    if not (large >= INPUTS_RATIO * max(small, 1e-300) and relative >= INPUTS_SHARE):
        return None
    return {"joint": joint, "probe": "inputs", "share": float(large / max(small, 1e-300)),
            "relative_rms": float(relative),
            "cause": f"the identification inputs disagree: {what} -- another robot, transmission, payload or "
                     "config in one of them: one model cannot fit them all"}


def judge_own_fits(joints, labels, rms, relative, own_rms, own_structure) -> list[dict]:
    """Joints on which an identification input, fitted alone, is explained INPUTS_RATIO times
    better than by the fit of all inputs while that fit leaves INPUTS_SHARE of its effort
    RMS (`rms`, `relative`: the joint fit's residual per input; `own_rms`: each input's own
    fit's, None where it could not be fitted alone), or that alone misses structure
    (`own_structure`: its findings) -- the joint fit is a compromise between inputs one model
    cannot share."""
    out, seen = [], set()
    rms, relative = np.asarray(rms, float), np.asarray(relative, float)
    for i, label in enumerate(labels):
        for f in own_structure[i]:
            if f["joint"] not in seen:
                seen.add(f["joint"])
                out.append({**f, "probe": "inputs",
                            "cause": f"{label} alone misses structure on this joint ({f['cause']}): it does not "
                                     "belong with the other inputs under this config"})
        if own_rms[i] is None:
            continue
        for j, name in enumerate(joints):
            mine = float(own_rms[i][j])
            if name in seen or not (np.isfinite(mine) and np.isfinite(rms[i, j])):
                continue
            f = _disagreement(name, rms[i, j], mine, relative[i, j],
                              f"fitted alone, {label} leaves {mine:.3g} on this joint, fitted with the others "
                              f"{rms[i, j]:.3g} ({100 * relative[i, j]:.3g} % of its effort RMS)")
            if f:
                seen.add(name)
                out.append(f)
    return out


def structure_warning(found: list[dict]) -> str | None:
    """One ``warning:`` line for `judge_structure`'s joints (None: nothing found): the joints
    with a named probe one by one, those whose own terms disagree with the others' together."""
    if not found:
        return None
    parts = []
    for f in (f for f in found if f["probe"] == "none"):
        parts.append(f"joint {f['joint']!r}: its residual is {100 * f['relative_rms']:.3g} % of its effort RMS: "
                     f"{f['cause']}")
    for f in (f for f in found if f["probe"] == "inputs"):
        parts.append(f"joint {f['joint']!r}: {f['cause']}")
    for f in (f for f in found if f["probe"] not in ("own", "none", "inputs")):
        other = f["probe"].rpartition("effort of ")[2]
        what = ("its own position" if f["probe"] == "position" else
                f"joint {other!r}'s CAD effort" if f["probe"].startswith("CAD") else f"joint {other!r}'s effort")
        parts.append(f"joint {f['joint']!r}: {100 * f['share']:.0f} % of its residual ({100 * f['relative_rms']:.3g} % "
                     f"of its effort RMS) follows {what}: {f['cause']}")
    own = [f for f in found if f["probe"] == "own"]
    if own:
        parts.append(("joint " if len(own) == 1 else "joints ") + ", ".join(repr(f["joint"]) for f in own)
                     + ": " + ", ".join(f"{100 * f['share']:.0f} %" for f in own)
                     + " of the residual (" + ", ".join(f"{100 * f['relative_rms']:.3g} %" for f in own)
                     + " of the effort RMS) would vanish with each joint's terms freed from the other joints': "
                     + own[0]["cause"])
    return ("warning: identification: the model misses structure the data show (a config error, not noise; a "
            "held-out / in-sample ratio cannot see it, both are equally wrong): " + "; ".join(parts)
            + "; identified.urdf is NOT a good model until the config matches the arm")


def check_structure(result, acc, problem) -> None:
    """The diagnostics of the best fit of the structure (WLS on `problem`, the compressed
    problem of the accumulator `acc`) into ``result.extra['structure']``, and the joints
    that miss structure into ``result.extra['structure_findings']`` (conditioning.assess_quality)."""
    from .least_squares import wls_values
    diag = structure_diagnostics(acc.R, acc.n_par, wls_values(problem), acc.model.joint_names)
    result.extra["structure"], result.extra["structure_findings"] = diag, judge_structure(diag)


def check_structure_rows(result, model, data: ProcessedData, problem) -> None:
    """`check_structure` of a problem held as rows (`problem.build_problem` of `data`): its
    standard regressor rows, no regressor recomputed."""
    from .least_squares import wls_values
    if result.method.startswith("robust"):     # the outliers the robust estimate discounts are not structure
        problem = _without_outliers(problem, result.values)
    x_std = problem.base.standard_from_base(wls_values(problem))
    diag, found = structure_of_rows(model, data, problem.sample_of_row, problem.joint_of_row, problem.W_standard,
                                    problem.y, x_std)
    result.extra["structure"], result.extra["structure_findings"] = diag, found


OUTLIER_SIGMAS = 10.0    # rows further than this many robust sigma from the robust fit are outliers


def _without_outliers(problem, values):
    """The rows of `problem` within `OUTLIER_SIGMAS` robust sigma (per joint, 1.4826 MAD) of
    the fit `values`: a spike or stick-slip burst the robust estimator discounts."""
    from dataclasses import replace

    from .robust import robust_scale
    r = problem.y - problem.W @ values
    s = robust_scale(r, problem.joint_of_row, len(problem.joint_names))
    keep = np.abs(r) <= OUTLIER_SIGMAS * s[problem.joint_of_row]
    return replace(problem, W=problem.W[keep], y=problem.y[keep], joint_of_row=problem.joint_of_row[keep],
                   sample_of_row=problem.sample_of_row[keep], W_standard=problem.W_standard[keep])


def structure_of_rows(model, data: ProcessedData, sample, joint, A: np.ndarray, y: np.ndarray,
                      x: np.ndarray) -> tuple[list[dict], list[dict]]:
    """(diagnostics, joints that miss structure) of a problem held as rows (the payload's, the
    row-based estimators'): row i is joint `joint[i]` at sample `sample[i]` of `data`, y = A x
    the fitted equation; the probes are the samples' and the effort RMS the raw effort's."""
    probes = probe_columns(model, data)
    R = []
    for j in range(model.n):
        rows = joint == j
        block = np.column_stack([A[rows], y[rows], data.effort_raw[sample[rows], j], probes[sample[rows], j, :]])
        R.append(r_factor(block))
    diag = structure_diagnostics(R, A.shape[1], x, model.joint_names)
    return diag, judge_structure(diag)
