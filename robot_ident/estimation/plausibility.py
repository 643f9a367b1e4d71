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
SPIKE_SIGMAS = 10.0        # a spike is further than this many robust sigma from the median of 7 ...
SPIKE_RANGE = 0.05         # ... and than this fraction of the (median-filtered) range
SPIKE_MAX_FRACTION = 0.05  # more "spikes" than this fraction of the samples: noise, not spikes
MEDIAN_WINDOW = 7


def spike_threshold(d_mad: float, smooth_range: float) -> float:
    """The excursion a spike must exceed: max(10 robust sigma, 5 % of the range, 1e-12);
    `d_mad` is the median absolute deviation of the signal minus its median of 7."""
    sigma = 1.4826 * d_mad
    return max(SPIKE_SIGMAS * sigma, SPIKE_RANGE * smooth_range, 1e-12)


def spike_levels(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Per sample of `x` (with `d` = x - its median of 7): the largest threshold at which it
    counts as a spike -- it must stand out by more than the threshold from the median and
    from the samples two before and two after, on the same side (the middle sample of a
    step does not; a spike interpolated onto two grid points does). 0 for the first and
    last two samples."""
    lev = np.zeros(x.size)
    if x.size > 4:
        a, b = x[2:-2] - x[:-4], x[2:-2] - x[4:]
        lev[2:-2] = np.minimum(np.abs(d[2:-2]), np.maximum(np.minimum(a, b), -np.maximum(a, b)))
    return lev


def count_spikes(level: np.ndarray, level_before: np.ndarray, excursion: np.ndarray, thr: float,
                 n_samples: int) -> tuple[int, float]:
    """(count, largest excursion) of the samples whose level exceeds `thr`, a spike on two
    grid points counted once (`level_before`: the previous sample's level); none when more
    than 5 % of the `n_samples` would be spikes (noise, not spikes)."""
    bad = level > thr
    first = bad & ~(level_before > thr)
    n = int(first.sum())
    if n == 0 or n > SPIKE_MAX_FRACTION * n_samples:
        return 0, 0.0
    return n, float(np.max(excursion[first]))


def _spikes(x: np.ndarray) -> tuple[int, float]:
    """Isolated outliers of a 1-D signal: (count, largest excursion). A sample is a spike
    when it is further than max(10 robust sigma, 5 % of the range) from the running
    median of 7 and from the samples two before and after, on the same side. Bursts longer than 2
    samples are not spikes (the median follows them)."""
    if x.size < 9:
        return 0, 0.0
    smooth = medfilt(x, MEDIAN_WINDOW)
    d = x - smooth
    med = float(np.median(d))
    thr = spike_threshold(float(np.median(np.abs(d - med))), float(np.ptp(smooth)))
    lev = spike_levels(x, d)
    return count_spikes(lev, np.concatenate([[0.0], lev[:-1]]), np.abs(d), thr, x.size)


@dataclass
class JointRecordingStats:
    """What `judge_recordings` judges about one joint over all synchronised segments:
    computed from the segments in memory (`recording_stats`) or piece by piece on a
    stream (`estimation.stream_checks`)."""
    spikes_effort: int = 0
    spike_effort: float = 0.0        # largest effort spike excursion
    spikes_position: int = 0
    spike_position: float = 0.0
    peak_effort: float = 0.0         # max |median of 7 of the effort| (a segment < 7 samples: max |effort|)
    q_min: float = np.inf
    q_max: float = -np.inf
    effort_constant: bool = True     # the effort does not change within any segment
    first_effort: float = float("nan")
    velocity_ratio: float | None = None   # median of measured velocity / dq/dt (None: not measurable)


def velocity_ratio_samples(q: np.ndarray, qd: np.ndarray | None, t: np.ndarray) -> np.ndarray | None:
    """The ratios qd / (dq/dt) of one segment's samples where |dq/dt| exceeds 5 % of its
    maximum (None when the segment has no velocities, < 5 samples or < 10 such samples)."""
    if qd is None or q.size < 5:
        return None
    dq = np.gradient(q, t)
    m = velocity_ratio_mask(dq)
    return qd[m] / dq[m] if m.sum() >= 10 else None


def velocity_ratio_mask(dq: np.ndarray, dq_max: float | None = None) -> np.ndarray:
    """The samples the velocity check uses: |dq/dt| > max(5 % of the segment's max |dq/dt|, 1e-6)."""
    top = float(np.max(np.abs(dq))) if dq_max is None else dq_max
    return np.abs(dq) > max(0.05 * top, 1e-6)


def recording_stats(model, segments: Sequence) -> tuple[list[JointRecordingStats], int]:
    """Per joint (model order) statistics of the synchronised segments, and their sample count."""
    joints = model.joint_names
    segs = [s.reorder(joints) for s in segments]
    out = []
    for k in range(len(joints)):
        st = JointRecordingStats()
        sp_e = [_spikes(s.effort[:, k]) for s in segs]
        st.spikes_effort = sum(n for n, _ in sp_e)
        st.spike_effort = max((b for _, b in sp_e), default=0.0)
        sp_q = [_spikes(s.q[:, k]) for s in segs]
        st.spikes_position = sum(n for n, _ in sp_q)
        st.spike_position = max((b for _, b in sp_q), default=0.0)
        st.peak_effort = max(float(np.max(np.abs(medfilt(s.effort[:, k], MEDIAN_WINDOW)))) if s.n_samples >= 7
                             else float(np.max(np.abs(s.effort[:, k]))) for s in segs)
        st.q_min = min(float(np.min(s.q[:, k])) for s in segs)
        st.q_max = max(float(np.max(s.q[:, k])) for s in segs)
        st.effort_constant = all(np.ptp(s.effort[:, k]) == 0 for s in segs)
        st.first_effort = float(segs[0].effort[0, k])
        ratios = [r for s in segs
                  if (r := velocity_ratio_samples(s.q[:, k], None if s.qd is None else s.qd[:, k],
                                                  np.asarray(s.t))) is not None]
        st.velocity_ratio = float(np.median(np.concatenate(ratios))) if ratios else None
        out.append(st)
    return out, int(sum(s.n_samples for s in segs))


def check_recordings(model, segments: Sequence, method: str = "physical",
                     effort_label: str = "effort") -> list[Finding]:
    """Checks on the synchronised segments (efforts already converted): limits, velocity
    against dq/dt, dead channels, spikes. `segments` are `signals.Recording`s."""
    stats, n = recording_stats(model, segments)
    return judge_recordings(model, stats, n, method, effort_label)


def judge_recordings(model, stats: Sequence[JointRecordingStats], n_samples: int, method: str = "physical",
                     effort_label: str = "effort") -> list[Finding]:
    """The findings of `check_recordings` from per-joint statistics (model order) of
    `n_samples` synchronised samples."""
    out: list[Finding] = []
    lim = model.limits
    for k, (j, st) in enumerate(zip(model.joint_names, stats)):
        subj = f"joint {j!r}"
        unit = "N" if model.is_prismatic(j) else "N·m"
        pos_unit = "m" if model.is_prismatic(j) else "rad"
        moves = st.q_max - st.q_min > MOVING
        # spikes first: the other checks use robust statistics, but say what was seen
        n_e, big_e = st.spikes_effort, st.spike_effort
        if n_e:
            sev = "warning" if method == "robust" else "error"
            out.append(Finding(sev, subj, f"{n_e} effort spike(s) of up to {_fmt(big_e)} {unit} "
                                          f"({100 * n_e / n_samples:.2g} % of samples; a glitching current "
                                          "sensor or driver)" + ("; the robust estimator discounts them"
                                                                  if method == "robust" else
                                                                  "; identify with --method robust")))
        n_q = st.spikes_position
        if n_q:
            big_q = st.spike_position
            out.append(Finding("error", subj, f"{n_q} position spike(s) of up to {_fmt(big_q)} {pos_unit} "
                                              "(encoder or driver glitches); they corrupt the accelerations"))
        # effort limit, on the median-filtered efforts: a few spikes are reported above, not here
        L = float(lim.effort[k])
        if np.isfinite(L) and L > 0:
            peak = st.peak_effort
            if peak > EFFORT_WARN * L:
                sev = "error" if peak > EFFORT_ERROR * L else "warning"
                out.append(Finding(sev, subj, f"efforts reach {_fmt(peak)} {unit}, {peak / L:.3g} x the URDF "
                                              f"effort limit {_fmt(L)} {unit} (torque constant, gear ratio or "
                                              f"{effort_label} unit wrong?)"))
        # position limits
        lo, hi = float(lim.lower[k]), float(lim.upper[k])
        if np.isfinite(lo) and np.isfinite(hi) and hi > lo:
            qmin, qmax = st.q_min, st.q_max
            over = max(lo - qmin, qmax - hi)
            if over > POSITION_MARGIN:
                far = over > 0.5 * (hi - lo)
                cause = ("degrees instead of radians, an encoder offset, or another robot's URDF?" if far
                         else "a calibration offset or limits tighter than the hardware's")
                out.append(Finding("error" if far else "warning", subj,
                                   f"positions span [{_fmt(qmin)}, {_fmt(qmax)}] {pos_unit}, outside the URDF "
                                   f"limits [{_fmt(lo)}, {_fmt(hi)}] by {_fmt(over)} ({cause})"))
        # dead or constant effort channel
        if moves and st.effort_constant:
            out.append(Finding("error", subj, f"the {effort_label} is constant ({_fmt(st.first_effort)}) while "
                                              "the joint moves: an unplugged or dead channel, or the wrong "
                                              "interface"))
        # velocity against dq/dt
        if st.velocity_ratio is not None and moves:
            r = st.velocity_ratio
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
def gain_columns(model, data, pred=None) -> np.ndarray | None:
    """(N, n, 6): per sample and joint [1, qd, tanh(qd / scale), qdd, prediction, effort],
    the prediction by default the CAD model's rigid-body efforts (None: no model to predict)."""
    if pred is None:
        if hasattr(model, "rnea"):
            pred = model.rnea(data.q, data.qd, data.qdd)
        elif hasattr(model, "efforts"):          # closed chains: the nominal model's efforts
            pred = model.efforts(data.q, data.qd, data.qdd)
        else:
            return None
    qd = data.qd
    scale = model.friction.coulomb_velocity_scale
    return np.stack([np.ones_like(qd), qd, np.tanh(qd / scale), data.qdd, pred, data.effort], axis=2)


def projected_slope(A: np.ndarray, n_rows: int | None = None) -> tuple[float, float]:
    """(slope, partial correlation) of the last column of `A` regressed on the fifth with the
    first four projected out (least squares). `A` may be the samples' rows or any matrix with
    the same Gram matrix (an R factor of them, `n_rows` then the number of samples: it sets
    the rank cut-off as `numpy.linalg.lstsq` sets it on the rows)."""
    F = A[:, :4]
    rcond = np.finfo(float).eps * max(A.shape[0] if n_rows is None else n_rows, 4)
    proj = lambda y: y - F @ np.linalg.lstsq(F, y, rcond=rcond)[0]  # noqa: E731
    p, y = proj(A[:, 4]), proj(A[:, 5])
    pp, yy = float(p @ p), float(y @ y)
    if pp <= 0 or yy <= 0:
        return float("nan"), 0.0
    return float(p @ y) / pp, float(p @ y) / np.sqrt(pp * yy)


def gain_slopes(model, data, pred=None) -> dict:
    """Per joint: (slope, partial correlation) of the measured effort regressed on a
    prediction (default: the CAD model's rigid-body efforts) with offset, viscous,
    Coulomb and armature (qdd) terms (`data`: `signals.ProcessedData`)."""
    cols = gain_columns(model, data, pred)
    if cols is None:
        return {}
    return {j: projected_slope(cols[:, k, :]) for k, j in enumerate(model.joint_names)}


def check_gains(model, data, skip: Sequence[str] = ()) -> list[Finding]:
    """Gain / direction check against the CAD model (see the module doc)."""
    return judge_gains(gain_slopes(model, data), skip)


def judge_gains(slopes: dict, skip: Sequence[str] = ()) -> list[Finding]:
    """The findings of `check_gains` from `gain_slopes`' joint -> (slope, partial correlation)."""
    out = []
    for j, (a, r) in slopes.items():
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
    from ..model.pseudo_inertia import pseudo_inertia
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
