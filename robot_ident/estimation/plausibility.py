"""Plausibility checks run before identifying: input that would give a confident wrong
answer is named, with its likely cause, instead of being fitted.

Each check yields a `Finding` whose `line()` starts with ``warning:`` (``note:`` for
what was seen and handled) and names the joint or topic and the likely cause (the same
text goes to the command line and to the identification node's diagnostics). Findings
of severity ``error`` make `enforce` refuse (`PlausibilityError`) unless forced. The
statistics are accumulated chunk by chunk (estimation/recording_checks.py,
estimation/gain_check.py); this module judges them.

=====================================  ==========  ===========================================
check                                  severity    threshold
=====================================  ==========  ===========================================
efforts beyond the URDF effort limit   warning     peak (median of 7) > 1.5 x limit
                                       error       > 3 x limit
positions outside the URDF limits      warning     > 0.05 rad (m) outside
                                       error       > half the range outside (degrees?)
velocity against dq/dt                 error       median ratio < 0 (sign) or off 1 by > 25 %
                                       warning     shifted by >= 20 ms (cross-correlation; by
                                                   default the positions are differentiated)
constant / dead effort channel         error       no change while the joint moves
gain / direction (CAD regression)      warning     slope outside [0.67, 1.5]
                                       error       slope < 0 or < 1/3 (above: the effort limit
                                                   check; a missing payload also raises it)
effort / position spikes               note        spike energy <= the channel's noise energy
  (> max(10 robust sigma, 5 % of       warning     amplitude ratio sqrt(spikes / noise) <= 3
  the range) from the median of 7)     error       > 3 (a warning with method robust)
unidentified joints that move          error       a URDF joint not in `joints:` moving > 0.01
=====================================  ==========  ===========================================

A spike is judged by what it can do to the estimate: filtering, differentiation and
least squares are linear, so isolated spikes reach the parameters as the channel's own
noise does, and their effect compares with the noise's by the ratio of energies. Heavy-
tailed sensor noise (a torque sensor's rare 10-sigma samples) is kept with a note; a
glitch of 1e4 A or 100 rad outweighs the noise by orders of magnitude and is refused.

The gain check regresses each joint's measured effort on the effort the CAD model
predicts (Pinocchio, nominal parameters) with offset, viscous and Coulomb terms
absorbing the unknown friction; it is judged only where the CAD prediction explains
the effort (partial correlation >= 0.5), so friction-dominated joints are skipped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import RobotIdentError
from .gain_check import COM_UNCERTAINTY

EFFORT_WARN, EFFORT_ERROR = 1.5, 3.0
POSITION_MARGIN = 0.05
VELOCITY_TOLERANCE = 0.25
VELOCITY_LAG_S = 0.02    # a measured velocity shifted this much against dq/dt is not used by default
GAIN_WARN = (0.67, 1.5)
# against an identified model explaining a joint almost fully: the same arm 0.94-1.01 (KUKA, UR10e,
RESULT_GAIN_WARN, RESULT_CORRELATION = (0.85, 1.18), 0.99   # demo), the demo arm with 1.3x masses 1.24-1.25
GAIN_ERROR = (1 / 3, 3.0)
MIN_PARTIAL_CORRELATION = 0.5
MOVING = 0.01            # rad or m: a joint moving less than this is "not moving"


class PlausibilityError(RobotIdentError):
    """The input looks implausible (see the warning lines); --force goes on anyway."""


@dataclass(frozen=True)
class Finding:
    severity: str        # 'note' (said, nothing wrong), 'warning' or 'error'
    subject: str         # "joint 'elbow'" or "topic '/joint_states'"
    text: str            # what was seen and the likely cause

    def line(self) -> str:
        return f"{'note' if self.severity == 'note' else 'warning'}: {self.subject}: {self.text}"


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


@dataclass(frozen=True)
class SpikeCount:
    """The spikes of one signal of one segment: how many (a spike on two grid points counts
    once), the largest excursion, and the sums over the flagged samples of the squared
    and of the absolute excursions."""
    count: int = 0
    largest: float = 0.0
    energy: float = 0.0
    abs_sum: float = 0.0
    samples: int = 0          # flagged samples (a spike on two grid points: 2)


def count_spikes(level: np.ndarray, level_before: np.ndarray, excursion: np.ndarray, thr: float,
                 n_samples: int) -> SpikeCount:
    """The samples whose level exceeds `thr` (`level_before`: the previous sample's level);
    none when more than 5 % of the `n_samples` would be spikes (noise, not spikes)."""
    bad = level > thr
    first = bad & ~(level_before > thr)
    n = int(first.sum())
    if n == 0 or n > SPIKE_MAX_FRACTION * n_samples:
        return SpikeCount()
    e = excursion[bad]
    return SpikeCount(n, float(np.max(excursion[first])), float(e @ e), float(e.sum()), int(bad.sum()))


def noise_sigma(mad: float, abs_sum: float, n: int, spikes: SpikeCount) -> float:
    """The robust sigma of a signal's noise (its deviations from the median of 7): the larger
    of the MAD's and the mean absolute deviation's Gaussian-consistent sigma, the flagged
    samples left out of the mean (the MAD alone is 0 on a quantised signal that mostly
    equals its median)."""
    mean_abs = (abs_sum - spikes.abs_sum) / max(n - spikes.samples, 1)
    return max(1.4826 * mad, 1.2533 * max(mean_abs, 0.0))


@dataclass
class JointRecordingStats:
    """What `judge_recordings` judges about one joint over all synchronised segments,
    accumulated piece by piece (`estimation.recording_checks.RecordingChecks`; a segment in
    memory is one piece)."""
    spikes_effort: int = 0
    spike_effort: float = 0.0        # largest effort spike excursion
    spike_effort_energy: float = 0.0   # sum of the flagged samples' squared excursions
    effort_noise_energy: float = 0.0   # sum over segments of samples x noise sigma^2
    spikes_position: int = 0
    spike_position: float = 0.0
    spike_position_energy: float = 0.0
    position_noise_energy: float = 0.0
    peak_effort: float = 0.0         # max |median of 7 of the effort| (a segment < 7 samples: max |effort|)
    q_min: float = np.inf
    q_max: float = -np.inf
    effort_constant: bool = True     # the effort does not change within any segment
    first_effort: float = float("nan")
    velocity_ratio: float | None = None   # median of measured velocity / dq/dt (None: not measurable)
    velocity_lag_s: float | None = None   # lag of the measured velocity behind dq/dt (cross-correlation)
    velocity_lag_correlation: float = 0.0  # the correlation at that lag
    effort_diff_sq: float = 0.0      # sum of squared first differences of the effort (within segments)
    effort_diff2_sq: float = 0.0     # ... of squared second differences
    diff_count: int = 0              # the first differences, and the time they span
    diff_time: float = 0.0


def velocity_ratio_mask(dq: np.ndarray, dq_max: float | None = None) -> np.ndarray:
    """The samples the velocity check uses: |dq/dt| > max(5 % of the segment's max |dq/dt|, 1e-6)."""
    top = float(np.max(np.abs(dq))) if dq_max is None else dq_max
    return np.abs(dq) > max(0.05 * top, 1e-6)


SPIKE_NOTE, SPIKE_ERROR = 1.0, 3.0   # energy ratio (amplitude): spikes / the channel's noise


def _spike_finding(what: str, unit: str, n: int, largest: float, energy: float, noise_energy: float,
                   n_samples: int, method: str, subj: str, cause: str) -> Finding:
    """Spikes judged by what they can do to the estimate. The low-pass, differentiation and
    least squares are linear: isolated spikes reach the estimate as the channel's noise
    does, so their effect compares with the noise's by the ratio of their energies.
    Amplitude ratio r = sqrt(spike energy / noise energy): up to 1 they add less error than
    the noise already does (a note: heavy-tailed sensor noise, kept), up to 3 a warning,
    beyond an error (a warning with the robust estimator, which discounts them)."""
    sigma = float(np.sqrt(noise_energy / max(n_samples, 1)))
    r = float(np.sqrt(energy / noise_energy)) if noise_energy > 0 else float("inf")
    sig = f", {largest / sigma:.3g} sigma of the channel's noise" if sigma > 0 else ""
    head = (f"{n} {what} spike(s) of up to {_fmt(largest)} {unit} ({100 * n / n_samples:.2g} % of samples{sig})")
    ratio = (f"{r:.3g} x the channel's noise in amplitude" if np.isfinite(r) else
             "on a channel without noise")
    if r <= SPIKE_NOTE:
        return Finding("note", subj, f"{head} weigh {ratio}: heavy-tailed sensor noise, kept (the low-pass "
                                     "averages them)")
    robust = method == "robust"
    sev = "warning" if robust or r <= SPIKE_ERROR else "error"
    tail = ("the robust estimator discounts them" if robust else
            "they bias the estimate like that much extra noise; identify with --method robust"
            if sev == "warning" else "identify with --method robust")
    return Finding(sev, subj, f"{head} weigh {ratio} ({cause}); {tail}")


def judge_recordings(model, stats: Sequence[JointRecordingStats], n_samples: int, method: str = "physical",
                     effort_label: str = "effort", velocity: str = "auto") -> list[Finding]:
    """The recording findings from per-joint statistics (model order) of `n_samples`
    synchronised samples. `velocity`: the measured velocity's use -- 'auto' (used unless it
    lags dq/dt), 'measured' (used) or 'positions' (not used)."""
    out: list[Finding] = []
    lim = model.limits
    for k, (j, st) in enumerate(zip(model.joint_names, stats)):
        subj = f"joint {j!r}"
        unit = "N" if model.is_prismatic(j) else "N·m"
        pos_unit = "m" if model.is_prismatic(j) else "rad"
        moves = st.q_max - st.q_min > MOVING
        # spikes first: the other checks use robust statistics, but say what was seen
        if st.spikes_effort:
            out.append(_spike_finding("effort", unit, st.spikes_effort, st.spike_effort, st.spike_effort_energy,
                                      st.effort_noise_energy, n_samples, method, subj,
                                      "a glitching current sensor or driver"))
        if st.spikes_position:
            out.append(_spike_finding("position", pos_unit, st.spikes_position, st.spike_position,
                                      st.spike_position_energy, st.position_noise_energy, n_samples, method, subj,
                                      "encoder or driver glitches; they corrupt the accelerations"))
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
            elif velocity_lagging(st) and velocity != "positions":
                lag = st.velocity_lag_s
                what = (f"lags dq/dt by {1e3 * lag:.3g} ms" if lag > 0 else f"leads dq/dt by {-1e3 * lag:.3g} ms")
                then = ("the differentiated positions are used instead (identification.filter."
                        "use_measured_velocity: true keeps it)" if velocity == "auto" else
                        "kept, as identification.filter.use_measured_velocity: true asks (auto or false would "
                        "differentiate the positions)")
                out.append(Finding("warning", subj, f"the measured velocity {what} (correlation "
                                                    f"{st.velocity_lag_correlation:.2f}; a filtered or delayed "
                                                    f"estimate?): {then}"))
    return out


def effort_smoothness_hz(st: JointRecordingStats) -> float | None:
    """The frequency the effort looks like at the sample level: fs / (2 pi) x RMS(second
    difference) / RMS(first difference). A sinusoid of f gives f; white sensor noise gives
    about 0.28 fs (sqrt 3 / (2 pi)), so any raw log sits high; a log low-passed before it
    was saved has no noise left and sits near its filter. None without differences."""
    if st.diff_count < 10 or st.diff_time <= 0 or st.effort_diff_sq <= 0:
        return None
    fs = st.diff_count / st.diff_time
    return float(fs / (2 * np.pi) * np.sqrt(st.effort_diff2_sq / st.effort_diff_sq))


PREFILTERED_FS_FRACTION = 0.05    # below this x the sample rate on every moving joint: filtered before it was saved


def judge_prefiltered(stats, effort_label: str = "effort") -> list[Finding]:
    """A note when every moving joint's effort is smooth at the sample level (no sensor noise
    left): the log was low-passed before it was saved (FloBaRoID's KUKA recordings, about
    2 Hz); above that frequency the filter cutoff chosen from the data changes nothing."""
    found = []
    for st in stats:
        if st.q_max - st.q_min > MOVING:
            f = effort_smoothness_hz(st)
            if f is None:
                return []
            found.append((f, st.diff_count / st.diff_time))
    if not found or any(f >= PREFILTERED_FS_FRACTION * fs for f, fs in found):
        return []
    return [Finding("note", "recording", f"the {effort_label}s are smooth at the sample level on every moving joint "
                                         f"(as a sinusoid of at most {max(f for f, _ in found):.2g} Hz, no sensor "
                                         "noise left): low-pass filtered before it was saved? What it removed is "
                                         "gone; a higher filter cutoff costs nothing")]


def velocity_lagging(st: JointRecordingStats) -> bool:
    """The measured velocity is shifted against dq/dt by VELOCITY_LAG_S or more (cross-
    correlation peak >= 0.5): its friction and inertia terms would be computed at another time."""
    return (st.velocity_lag_s is not None and st.velocity_lag_correlation >= 0.5
            and abs(st.velocity_lag_s) >= VELOCITY_LAG_S)


# ------------------------------------------------------------------- model checks
def off_prediction(slopes: dict) -> list[tuple[str, float]]:
    """(joint, slope) where measured efforts do not follow an identified result's prediction: slope
    outside GAIN_WARN where it explains them (partial correlation >= MIN_PARTIAL_CORRELATION),
    outside RESULT_GAIN_WARN where it explains them almost fully (>= RESULT_CORRELATION)."""
    band = {True: RESULT_GAIN_WARN, False: GAIN_WARN}
    return [(j, a) for j, (a, r) in slopes.items() if abs(r) >= MIN_PARTIAL_CORRELATION
            and not band[abs(r) >= RESULT_CORRELATION][0] <= a <= band[abs(r) >= RESULT_CORRELATION][1]]


def judge_gains(slopes: dict, skip: Sequence[str] = (), tool: tuple | None = None,
                uncertain: dict | None = None) -> list[Finding]:
    """The gain findings from joint -> (slope, partial correlation) (`gain_check.GainCheck`).
    `tool`: (the slopes with a tool on the last body fitted alongside, its 10 inertial
    parameters, the last body's joint): efforts above the CAD model's that a tool of
    positive mass explains are a note naming the tool, not a gain warning. `uncertain`:
    joint -> how many times its CAD prediction a centre-of-mass error of the CAD can change
    (`GainCheck.uncertain`): an error or warning there becomes a note."""
    out = []
    unsure = uncertain or {}

    def add(severity: str, j: str, text: str) -> None:
        if severity != "note" and j in unsure:
            severity, text = "note", (f"{text.split(':')[0]}; but a {1000 * COM_UNCERTAINTY:g} mm error of the "
                                      "CAD's centres of mass changes what it predicts on this joint (beyond its own "
                                      f"inertia and friction) by up to {unsure[j]:.2g} x: its gain and direction "
                                      "are not judged")
        out.append(Finding(severity, f"joint {j!r}", text))

    t_slopes, pi, body = tool if tool is not None else ({}, None, "")
    has_tool = pi is not None and pi[0] > 0
    explained = []
    for j, (a, r) in slopes.items():
        if j in skip or not np.isfinite(a) or abs(r) < MIN_PARTIAL_CORRELATION:
            continue
        if a < -GAIN_ERROR[1]:
            # A flip with a CAD of the right size gives about -1; far beyond -3 the CAD predicts
            # almost nothing here beyond the joint's own inertia and friction (`uncertain` says why).
            add("note", j, f"the measured effort runs against the CAD model's at {-a:.3g} x its size: the CAD "
                           "predicts almost nothing on this joint beyond its own inertia and friction (a centre "
                           "of mass near its axis?), so its direction is not judged")
        elif a < 0:
            add("error", j, f"the measured effort runs against the CAD model's (slope {a:.3g}): a flipped "
                            "direction (sign of the torque constant, gear ratio or joint axis)")
        elif a < GAIN_ERROR[0]:
            add("error", j, f"the measured effort is only {a:.3g} x the CAD model's: the torque constant or gear "
                            "ratio is too small by about that factor")
        elif a > GAIN_WARN[1]:
            # Larger than predicted can also be a payload or tool missing from the URDF, so this
            # side is only a warning (or a note when a tool on the last body explains it); a gain
            # far too high shows as efforts beyond the limits.
            b, rb = t_slopes.get(j, (float("nan"), 0.0))
            if has_tool and (not np.isfinite(b) or abs(rb) < MIN_PARTIAL_CORRELATION or b <= GAIN_WARN[1]):
                explained.append(j)
                continue
            add("warning", j, f"the measured effort is {a:.3g} x the CAD model's (torque constant or gear ratio "
                              "too large, or a payload / tool missing from the URDF?)")
        elif a < GAIN_WARN[0]:
            add("warning", j, f"the measured effort is {a:.3g} x the CAD model's (torque constant or gear ratio "
                              "too small, or CAD masses too large?)")
    if explained:
        com = np.asarray(pi[1:4]) / pi[0]
        out.append(Finding("note", "joint " + ", ".join(map(repr, explained)),
                           f"the efforts exceed the CAD model's as a tool of about {pi[0]:.2g} kg on the body "
                           f"joint {body!r} moves would (centre of mass [{', '.join(f'{c + 0.0:.3f}' for c in com)}] m "
                           "in its frame): a payload the URDF lacks; identification estimates it with that body"))
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


def urdf_notes(model) -> list[Finding]:
    """What reading the URDF changed (`model.urdf_text.snap_rounded_angles`), as a note."""
    from ..model.urdf_text import snapped_angles
    what = snapped_angles(getattr(model, "urdf_xml", "") or "")
    if not what:
        return []
    return [Finding("note", f"URDF {getattr(model, 'urdf_label', '')}".strip(),
                    f"{what} taken as exact multiples of pi/2 (vendor rounding: left as written, they keep "
                    "parameters apart that no motion separates)")]


def check_cad(model, method: str) -> list[Finding]:
    """The URDF's inertial values, which the physically consistent estimators take as prior,
    start and bounds: a negative mass or an impossible inertia is refused for them (a
    warning for the others); a body without mass is a warning. First, what reading the
    URDF changed (`urdf_notes`)."""
    from ..model.pseudo_inertia import pseudo_inertia
    layout = getattr(model, "layout", None)
    if layout is None or not hasattr(layout, "body_joints"):
        return urdf_notes(model)
    physical = method in ("physical", "sobol-ga", "sobol-ls")
    out = urdf_notes(model)
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


def enforce(findings: Sequence[Finding], force: bool = False, hint: str = "pass --force to identify anyway") -> None:
    """Raise `PlausibilityError` (one line, ending with `hint`) when a finding is an error, unless `force`."""
    errors = [f for f in findings if f.severity == "error"]
    if errors and not force:
        first = errors[0]
        more = f" (and {len(errors) - 1} more, see the warnings)" if len(errors) > 1 else ""
        raise PlausibilityError(f"implausible input: {first.subject}: {first.text}{more}; {hint}")
