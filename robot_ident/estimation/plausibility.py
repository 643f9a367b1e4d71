"""Plausibility checks run before identifying: input that would give a confident wrong
answer is named, with its likely cause, instead of being fitted.

Each check yields a `Finding` whose `line()` starts with ``warning:`` and names the
joint or topic and the likely cause (the same text goes to the command line and to
the identification node's diagnostics). Findings of severity ``error`` make
`enforce` refuse (`PlausibilityError`) unless forced.

=====================================  ==========  ===========================================
check                                  severity    threshold
=====================================  ==========  ===========================================
efforts beyond the URDF effort limit   warning     peak (median of 7) > 1.5 x limit
                                       error       > 3 x limit
positions outside the URDF limits      warning     > 0.05 rad (m) outside
                                       error       > half the range outside (degrees?)
velocity against dq/dt                 error       median ratio < 0 (sign) or off 1 by > 25 %
constant / dead effort channel         error       no change while the joint moves
gain / direction (CAD regression)      warning     slope outside [0.67, 1.5]
                                       error       slope < 0 or < 1/3 (above: the effort limit
                                                   check; a missing payload also raises it)
effort spikes                          error       (warning with method robust)
position spikes                        error
unidentified joints that move          error       a URDF joint not in `joints:` moving > 0.01
=====================================  ==========  ===========================================

The gain check regresses each joint's measured effort on the effort the CAD model
predicts (Pinocchio, nominal parameters) with offset, viscous and Coulomb terms
absorbing the unknown friction; it is judged only where the CAD prediction explains
the effort (partial correlation >= 0.5), so friction-dominated joints are skipped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.signal import medfilt

from ..errors import RobotIdentError

EFFORT_WARN, EFFORT_ERROR = 1.5, 3.0
POSITION_MARGIN = 0.05
VELOCITY_TOLERANCE = 0.25
GAIN_WARN = (0.67, 1.5)
GAIN_ERROR = (1 / 3, 3.0)
MIN_PARTIAL_CORRELATION = 0.5
MOVING = 0.01            # rad or m: a joint moving less than this is "not moving"


class PlausibilityError(RobotIdentError):
    """The input looks implausible (see the warning lines); --force goes on anyway."""


@dataclass(frozen=True)
class Finding:
    severity: str        # 'warning' or 'error'
    subject: str         # "joint 'elbow'" or "topic '/joint_states'"
    text: str            # what was seen and the likely cause

    def line(self) -> str:
        return f"warning: {self.subject}: {self.text}"


def _fmt(x: float) -> str:
    return f"{x:.3g}"


# ------------------------------------------------------------------------ raw checks
def _spikes(x: np.ndarray) -> tuple[int, float]:
    """Isolated outliers of a 1-D signal: (count, largest excursion). A sample is a spike
    when it is further than max(10 robust sigma, 5 % of the range) from the running
    median of 7 and from the samples two before and after, on the same side. Bursts longer than 2
    samples are not spikes (the median follows them)."""
    if x.size < 9:
        return 0, 0.0
    smooth = medfilt(x, 7)
    d = x - smooth
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d))))
    thr = max(10.0 * sigma, 0.05 * float(np.ptp(smooth)), 1e-12)
    bad = np.abs(d) > thr
    # a spike stands out from the samples two before and two after, on the same side (the
    # middle sample of a step does not; a spike interpolated onto two grid points does)
    up = np.zeros_like(bad)
    a, b = x[2:-2] - x[:-4], x[2:-2] - x[4:]
    up[2:-2] = ((a > thr) & (b > thr)) | ((a < -thr) & (b < -thr))
    bad &= up
    bad[1:] &= ~bad[:-1]           # a spike on two grid points counts once
    n = int(bad.sum())
    if n == 0 or n > 0.05 * x.size:
        return 0, 0.0
    return n, float(np.max(np.abs(d[bad])))


def check_recordings(model, segments: Sequence, method: str = "physical",
                     effort_label: str = "effort") -> list[Finding]:
    """Checks on the synchronised segments (efforts already converted): limits, velocity
    against dq/dt, dead channels, spikes. `segments` are `signals.Recording`s."""
    out: list[Finding] = []
    joints = model.joint_names
    lim = model.limits
    t_all = [np.asarray(s.reorder(joints).t) for s in segments]
    segs = [s.reorder(joints) for s in segments]
    q = np.vstack([s.q for s in segs])
    e = np.vstack([s.effort for s in segs])
    for k, j in enumerate(joints):
        subj = f"joint {j!r}"
        unit = "N" if model.is_prismatic(j) else "N·m"
        pos_unit = "m" if model.is_prismatic(j) else "rad"
        moves = float(np.ptp(q[:, k])) > MOVING
        # spikes first: the other checks use robust statistics, but say what was seen
        n_e = sum(_spikes(s.effort[:, k])[0] for s in segs)
        big_e = max((_spikes(s.effort[:, k])[1] for s in segs), default=0.0)
        if n_e:
            sev = "warning" if method == "robust" else "error"
            out.append(Finding(sev, subj, f"{n_e} effort spike(s) of up to {_fmt(big_e)} {unit} "
                                          f"({100 * n_e / e.shape[0]:.2g} % of samples; a glitching current "
                                          "sensor or driver)" + ("; the robust estimator discounts them"
                                                                  if method == "robust" else
                                                                  "; identify with --method robust")))
        n_q = sum(_spikes(s.q[:, k])[0] for s in segs)
        if n_q:
            big_q = max(_spikes(s.q[:, k])[1] for s in segs)
            out.append(Finding("error", subj, f"{n_q} position spike(s) of up to {_fmt(big_q)} {pos_unit} "
                                              "(encoder or driver glitches); they corrupt the accelerations"))
        # effort limit (99.9th percentile: robust to a few spikes)
        L = float(lim.effort[k])
        if np.isfinite(L) and L > 0:
            # on the median-filtered efforts: a few spikes are reported above, not here
            peak = max(float(np.max(np.abs(medfilt(s.effort[:, k], 7)))) if s.n_samples >= 7
                       else float(np.max(np.abs(s.effort[:, k]))) for s in segs)
            if peak > EFFORT_WARN * L:
                sev = "error" if peak > EFFORT_ERROR * L else "warning"
                out.append(Finding(sev, subj, f"efforts reach {_fmt(peak)} {unit}, {peak / L:.3g} x the URDF "
                                              f"effort limit {_fmt(L)} {unit} (torque constant, gear ratio or "
                                              f"{effort_label} unit wrong?)"))
        # position limits
        lo, hi = float(lim.lower[k]), float(lim.upper[k])
        if np.isfinite(lo) and np.isfinite(hi) and hi > lo:
            qmin, qmax = float(np.min(q[:, k])), float(np.max(q[:, k]))
            over = max(lo - qmin, qmax - hi)
            if over > POSITION_MARGIN:
                far = over > 0.5 * (hi - lo)
                cause = ("degrees instead of radians, an encoder offset, or another robot's URDF?" if far
                         else "a calibration offset or limits tighter than the hardware's")
                out.append(Finding("error" if far else "warning", subj,
                                   f"positions span [{_fmt(qmin)}, {_fmt(qmax)}] {pos_unit}, outside the URDF "
                                   f"limits [{_fmt(lo)}, {_fmt(hi)}] by {_fmt(over)} ({cause})"))
        # dead or constant effort channel
        if moves and all(np.ptp(s.effort[:, k]) == 0 for s in segs):
            out.append(Finding("error", subj, f"the {effort_label} is constant ({_fmt(e[0, k])}) while the joint "
                                              "moves: an unplugged or dead channel, or the wrong interface"))
        # velocity against dq/dt
        ratios = []
        for s, t in zip(segs, t_all):
            if s.qd is None or s.n_samples < 5:
                continue
            dq = np.gradient(s.q[:, k], t)
            m = np.abs(dq) > max(0.05 * float(np.max(np.abs(dq))), 1e-6)
            if m.sum() >= 10:
                ratios.append(s.qd[m, k] / dq[m])
        if ratios and moves:
            r = float(np.median(np.concatenate(ratios)))
            if r < 0:
                out.append(Finding("error", subj, f"the measured velocity has the opposite sign of dq/dt "
                                                  f"(ratio {r:.3g}): a flipped velocity sign in the driver"))
            elif abs(r) < 0.05:
                out.append(Finding("error", subj, "the measured velocity stays (nearly) zero while the position "
                                                  "changes: the driver publishes zeros; set identification.filter."
                                                  "use_measured_velocity: false to differentiate the positions"))
            elif abs(r - 1.0) > VELOCITY_TOLERANCE:
                out.append(Finding("error", subj, f"the measured velocity is {r:.3g} x dq/dt (degrees/s, rpm or "
                                                  "a gear ratio on the velocity only?)"))
    return out


# ------------------------------------------------------------------- model checks
def gain_slopes(model, data, pred=None) -> dict:
    """Per joint: (slope, partial correlation) of the measured effort regressed on a
    prediction (default: the CAD model's rigid-body efforts) with offset, viscous,
    Coulomb and armature (qdd) terms (`data`: `signals.ProcessedData`)."""
    if pred is None:
        if hasattr(model, "rnea"):
            pred = model.rnea(data.q, data.qd, data.qdd)
        elif hasattr(model, "efforts"):          # closed chains: the nominal model's efforts
            pred = model.efforts(data.q, data.qd, data.qdd)
        else:
            return {}
    out = {}
    scale = model.friction.coulomb_velocity_scale
    for k, j in enumerate(model.joint_names):
        qd = data.qd[:, k]
        F = np.column_stack([np.ones_like(qd), qd, np.tanh(qd / scale), data.qdd[:, k]])
        proj = lambda y: y - F @ np.linalg.lstsq(F, y, rcond=None)[0]  # noqa: E731
        p, y = proj(pred[:, k]), proj(data.effort[:, k])
        pp, yy = float(p @ p), float(y @ y)
        if pp <= 0 or yy <= 0:
            out[j] = (float("nan"), 0.0)
            continue
        out[j] = (float(p @ y) / pp, float(p @ y) / np.sqrt(pp * yy))
    return out


def check_gains(model, data, skip: Sequence[str] = ()) -> list[Finding]:
    """Gain / direction check against the CAD model (see the module doc)."""
    out = []
    for j, (a, r) in gain_slopes(model, data).items():
        if j in skip or not np.isfinite(a) or abs(r) < MIN_PARTIAL_CORRELATION:
            continue
        subj = f"joint {j!r}"
        if a < 0:
            out.append(Finding("error", subj, f"the measured effort runs against the CAD model's (slope {a:.3g}): "
                                              "a flipped direction (sign of the torque constant, gear ratio or "
                                              "joint axis)"))
        elif a < GAIN_ERROR[0]:
            out.append(Finding("error", subj, f"the measured effort is only {a:.3g} x the CAD model's: the torque "
                                              "constant or gear ratio is too small by about that factor"))
        elif a > GAIN_WARN[1]:
            # Larger than predicted can also be a payload or tool missing from the URDF, so this
            # side is only a warning; a gain far too high shows as efforts beyond the limits.
            out.append(Finding("warning", subj, f"the measured effort is {a:.3g} x the CAD model's (torque "
                                                "constant or gear ratio too large, or a payload / tool missing "
                                                "from the URDF?)"))
        elif a < GAIN_WARN[0]:
            out.append(Finding("warning", subj, f"the measured effort is {a:.3g} x the CAD model's (torque "
                                                "constant or gear ratio too small, or CAD masses too large?)"))
    return out


def check_unidentified_motion(model, other_ranges: dict, topic: str) -> list[Finding]:
    """Joints of the URDF that are not identified but move in the bag (the model locks
    them). `other_ranges`: joint -> (min, max) position in the joint-state topic."""
    import pinocchio as pin
    try:
        full = pin.buildModelFromXML(model.urdf_xml)
        movable = {full.names[i] for i in range(1, full.njoints)}
    except Exception:   # the model was built from it already; be safe
        movable = set()
    out = []
    for j, (lo, hi) in sorted(other_ranges.items()):
        if j in model.joint_names or j not in movable or not hi - lo > MOVING:
            continue
        at = model.locked_positions.get(j, 0.0)
        out.append(Finding("error", f"joint {j!r}",
                           f"moves over [{_fmt(lo)}, {_fmt(hi)}] in topic {topic!r} but is not in `joints:`; the "
                           f"model locks it at {_fmt(at)} (add it to joints, or record with it still)"))
    return out


def check_cad(model, method: str) -> list[Finding]:
    """The URDF's inertial values, which the physically consistent estimators take as prior,
    start and bounds: a negative mass or an impossible inertia is refused for them (a
    warning for the others); a body without mass is a warning."""
    from .physical import pseudo_inertia
    layout = getattr(model, "layout", None)
    if layout is None or not hasattr(layout, "body_joints"):
        return []
    physical = method in ("physical", "sobol-ga", "sobol-ls")
    out = []
    for j in layout.body_joints:
        ph = np.asarray(model.nominal[layout.inertial_slice(j)], float)
        if not np.isfinite(ph).all():
            continue
        if ph[0] < 0 or (ph[0] > 0 and np.linalg.eigvalsh(pseudo_inertia(ph)).min() < -1e-12 * max(ph[0], 1.0)):
            what = f"mass {ph[0]:.4g} kg" if ph[0] < 0 else "an inertia no body can have"
            out.append(Finding("error" if physical else "warning", f"joint {j!r}",
                               f"the URDF gives the body it moves {what}: fix its <inertial>"
                               + ("; the physically consistent estimate takes it as prior and bounds (or use "
                                  "--method wls)" if physical else "")))
        elif ph[0] == 0 and physical:
            out.append(Finding("warning", f"joint {j!r}", "the URDF gives the body it moves no mass (no "
                                                          "<inertial>?): its physical bounds come from defaults"))
    return out


def enforce(findings: Sequence[Finding], force: bool = False) -> None:
    """Raise `PlausibilityError` (one line) when a finding is an error, unless `force`."""
    errors = [f for f in findings if f.severity == "error"]
    if errors and not force:
        first = errors[0]
        more = f" (and {len(errors) - 1} more, see the warnings)" if len(errors) > 1 else ""
        raise PlausibilityError(f"implausible input: {first.subject}: {first.text}{more}; "
                                "pass --force to identify anyway")
