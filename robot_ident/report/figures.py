"""The numbers behind each figure of the report: pure functions of result.yaml,
samples.npz and the CAD parameters, no plotting (report/plots.py draws them)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

WELL_DETERMINED_PERCENT = 5.0     # the demo summary's "well-determined" threshold
UNDETERMINED_PERCENT = 100.0      # std larger than the value: the data do not fix it


def position_unit(effort_unit: str) -> str:
    return "m" if effort_unit == "N" else "rad"


def velocity_unit(effort_unit: str) -> str:
    return position_unit(effort_unit) + "/s"


# ----------------------------------------------------------------------- friction
def friction_curve(qd, coulomb: float, viscous: float, velocity_scale: float) -> np.ndarray:
    """The identified friction model: Fc * tanh(qd / s) + Fv * qd."""
    qd = np.asarray(qd, float)
    return coulomb * np.tanh(qd / velocity_scale) + viscous * qd


@dataclass
class FrictionFit:
    joint: str
    unit: str
    qd: np.ndarray              # samples (all)
    friction_effort: np.ndarray  # measured - (predicted - friction curve): what friction must explain
    moving: np.ndarray          # samples the identification used
    curve_qd: np.ndarray
    curve: np.ndarray
    coulomb: float
    viscous: float
    bin_centres: np.ndarray     # velocity bins with >= min_count moving samples
    bin_means: np.ndarray       # mean of (friction_effort - curve) per bin
    scatter_rms: float          # RMS of friction_effort - curve over moving samples
    systematic_rms: float       # count-weighted RMS of the bin means: structure the curve misses
    noise_floor: float          # what the bin means would show from scatter alone
    amplitude: float            # RMS of the curve over the moving samples

    @property
    def misfit_percent(self) -> float:
        """Systematic misfit as a percentage of the friction effort's RMS."""
        return 100.0 * self.systematic_rms / self.amplitude if self.amplitude > 0 else math.inf

    @property
    def within_noise(self) -> bool:
        return self.systematic_rms <= 2.0 * self.noise_floor


def friction_fit(joint: str, qd, measured, predicted, moving, coulomb: float, viscous: float,
                 velocity_scale: float, unit: str = "N·m", bins: int = 24, min_count: int = 10) -> FrictionFit:
    """Measured effort minus the model's rigid-body part (everything but Coulomb and viscous
    friction: inertia, gravity, armature, offset) against velocity, with the identified
    curve and its binned misfit."""
    qd = np.asarray(qd, float)
    measured = np.asarray(measured, float)
    predicted = np.asarray(predicted, float)
    moving = np.asarray(moving, bool)
    fr = friction_curve(qd, coulomb, viscous, velocity_scale)
    y = measured - (predicted - fr)
    r = y - fr
    vmax = float(np.max(np.abs(qd))) if qd.size else 1.0
    grid = np.linspace(-vmax, vmax, 401)
    rm, qm = r[moving], qd[moving]
    edges = np.linspace(-vmax, vmax, bins + 1)
    idx = np.clip(np.digitize(qm, edges) - 1, 0, bins - 1)
    counts = np.bincount(idx, minlength=bins)
    sums = np.bincount(idx, weights=rm, minlength=bins)
    keep = counts >= min_count
    means = sums[keep] / counts[keep]
    centres = 0.5 * (edges[:-1] + edges[1:])[keep]
    scatter = float(np.sqrt(np.mean(rm ** 2))) if rm.size else math.nan
    if keep.any():
        w = counts[keep] / counts[keep].sum()
        systematic = float(np.sqrt(np.sum(w * means ** 2)))
        sq = np.bincount(idx, weights=rm ** 2, minlength=bins)[keep] / counts[keep] - means ** 2
        noise_floor = float(np.sqrt(np.sum(w * np.maximum(sq, 0.0) / counts[keep])))
    else:
        systematic = noise_floor = math.nan
    amp = float(np.sqrt(np.mean(fr[moving] ** 2))) if moving.any() else math.nan
    return FrictionFit(joint, unit, qd, y, moving, grid, friction_curve(grid, coulomb, viscous, velocity_scale),
                       float(coulomb), float(viscous), centres, means, scatter, systematic, noise_floor, amp)


def worst_friction_joint(fits: list[FrictionFit]) -> str | None:
    """The joint with the largest misfit among those above the noise (among all when none is)."""
    ok = [f for f in fits if math.isfinite(f.misfit_percent)]
    pool = [f for f in ok if not f.within_noise] or ok
    return max(pool, key=lambda f: f.misfit_percent).joint if pool else None


# ----------------------------------------------------------------------- errors
@dataclass
class ErrorHistogram:
    joint: str
    unit: str
    edges: np.ndarray
    counts: np.ndarray
    expected: np.ndarray        # counts a zero-mean Gaussian of std `noise_std` would give
    rms: float
    mean: float
    noise_std: float | None
    n: int

    @property
    def ratio(self) -> float | None:
        return self.rms / self.noise_std if self.noise_std else None


def error_histogram(joint: str, error, noise_std: float | None, unit: str = "N·m", bins: int = 40) -> ErrorHistogram:
    """Histogram of prediction errors (measured - predicted) with the counts expected from
    white noise of the given std over the same bins."""
    from scipy.special import ndtr  # the normal CDF (scipy.stats takes seconds to import)
    e = np.asarray(error, float)
    e = e[np.isfinite(e)]
    half = max(float(np.max(np.abs(e))) if e.size else 1.0, 4.0 * (noise_std or 0.0)) or 1.0
    edges = np.linspace(-half, half, bins + 1)
    counts, _ = np.histogram(e, edges)
    if noise_std and noise_std > 0:
        expected = e.size * np.diff(ndtr(edges / noise_std))
    else:
        expected = np.full(bins, np.nan)
    rms = float(np.sqrt(np.mean(e ** 2))) if e.size else math.nan
    return ErrorHistogram(joint, unit, edges, counts, expected, rms, float(np.mean(e)) if e.size else math.nan,
                          noise_std, int(e.size))


# ----------------------------------------------------------------------- parameters
def short_name(name: str, width: int = 28) -> str:
    terms = name.split(" + ")
    head = terms[0] if len(terms[0]) <= width else terms[0][: width - 1] + "…"
    return head + (f" (+{len(terms) - 1} terms)" if len(terms) > 1 else "")


@dataclass
class RelativeStdChart:
    index: np.ndarray           # base-parameter indices, least determined first
    labels: list
    relative_std: np.ndarray    # percent (inf where the value is 0 or the std is not finite)
    threshold: float
    undetermined: float

    def least_determined(self, k: int = 3) -> list[int]:
        return [int(i) for i in self.index[:k]]

    @property
    def n_well(self) -> int:
        return int(np.sum(self.relative_std < self.threshold))

    @property
    def n_undetermined(self) -> int:
        return int(np.sum(~(self.relative_std < self.undetermined)))


def relative_std_chart(base_parameters: list[dict]) -> RelativeStdChart:
    """Base parameters sorted by relative standard deviation, largest (worst) first."""
    def rel(p):
        try:
            v = float(p["relative_std_percent"])
        except (TypeError, ValueError):
            return math.inf
        return v if math.isfinite(v) else math.inf
    r = np.array([rel(p) for p in base_parameters], float)
    order = np.argsort(-np.where(np.isfinite(r), r, np.finfo(float).max), kind="stable")
    labels = [f"#{i} {short_name(base_parameters[i]['name'])}" for i in order]
    return RelativeStdChart(order, labels, r[order], WELL_DETERMINED_PERCENT, UNDETERMINED_PERCENT)


@dataclass
class BodyComparison:
    body: str
    mass: tuple                 # (cad, identified) kg
    com: tuple                  # (cad (3,), identified (3,)) m, in the joint frame
    principal: tuple            # (cad (3,), identified (3,)) kg m^2 about the centre of mass, ascending
    bounds_active: list
    determined: dict = None     # mass / com / inertia -> True when the data fix it by itself (None: unknown)

    @property
    def mass_change_percent(self) -> float:
        c, i = self.mass
        return 100.0 * (i - c) / c if c else math.inf

    @property
    def com_shift_mm(self) -> float:
        return 1000.0 * float(np.linalg.norm(np.asarray(self.com[1]) - np.asarray(self.com[0])))

    @property
    def principal_change_percent(self) -> np.ndarray:
        c, i = (np.asarray(a, float) for a in self.principal)
        with np.errstate(divide="ignore", invalid="ignore"):
            return 100.0 * (i - c) / np.abs(c)


def _body_values(values: dict, body: str) -> np.ndarray:
    keys = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")   # Pinocchio's order
    return np.array([float(values[f"{body}.{k}"]) for k in keys])


def body_inertia(pi: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, centre of mass, principal inertias about it, ascending) from Pinocchio's
    10 dynamic parameters; a non-positive mass gives nan for the centre and inertias."""
    import pinocchio as pin
    m = float(pi[0])
    if not m > 0:
        return m, np.full(3, np.nan), np.full(3, np.nan)
    inertia = pin.Inertia.FromDynamicParameters(np.asarray(pi, float))
    return m, np.array(inertia.lever), np.linalg.eigvalsh(np.array(inertia.inertia))


_INERTIAL = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")


def body_comparisons(cad: dict, identified: dict, bodies, bounds_active: dict | None = None,
                     determined: set | None = None) -> list[BodyComparison]:
    """Per body, CAD against identified mass, centre of mass and principal inertias (values
    are dicts of standard-parameter name -> value, names as in result.yaml). `determined`:
    the standard parameters the data fix by themselves (see determined_standard)."""
    out = []
    for b in bodies:
        mc, cc, pc = body_inertia(_body_values(cad, b))
        mi, ci, pi = body_inertia(_body_values(identified, b))
        det = None
        if determined is not None:
            has = [f"{b}.{k}" in determined for k in _INERTIAL]
            det = {"mass": has[0], "com": all(has[:4]), "inertia": all(has)}
        out.append(BodyComparison(b, (mc, mi), (cc, ci), (pc, pi), list((bounds_active or {}).get(b, [])), det))
    return out


def determined_standard(base_reduction: dict, base_parameters: list, threshold: float = WELL_DETERMINED_PERCENT) \
        -> set:
    """Standard parameters the data determine by themselves: kept columns into which no
    other column is regrouped (their base parameter is the standard parameter alone) and
    whose relative std is below the threshold. Every other standard parameter (regrouped,
    or unseen) is the estimator's choice among values that fit the data equally well."""
    names = list(base_reduction["standard_names"])
    beta = np.asarray(base_reduction["beta"], float).reshape(len(base_reduction["independent"]), -1)
    out = set()
    for k, i in enumerate(base_reduction["independent"]):
        alone = beta.shape[1] == 0 or not np.any(beta[k] != 0.0)
        try:
            rel = float(base_parameters[k]["relative_std_percent"])
        except (TypeError, ValueError, IndexError, KeyError):
            rel = math.inf
        if alone and rel < threshold:
            out.add(names[i])
    return out


def cad_comparable(base_reduction: dict) -> list[bool]:
    """Per base parameter: does the URDF hold it (an inertial parameter not regrouped with an
    armature, friction or offset, which the URDF has not)?"""
    names = list(base_reduction["standard_names"])
    ind = np.asarray(base_reduction["independent"], int)
    dep = np.asarray(base_reduction["dependent"], int)
    beta = np.asarray(base_reduction["beta"], float).reshape(ind.size, dep.size)
    actuator_dep = np.array([names[i].rsplit(".", 1)[1] not in _INERTIAL for i in dep], bool)
    return [names[i].rsplit(".", 1)[1] in _INERTIAL and not (dep.size and np.any((beta[k] != 0) & actuator_dep))
            for k, i in enumerate(ind)]


def base_changes_by_body(cad: dict, base_reduction: dict, base_parameters: list, bodies) -> dict | None:
    """What the data do determine, per body: for each base parameter whose leading standard
    parameter is one of the body's inertial parameters, (index, symmetric change from the
    CAD's base value in %, well determined?); a base parameter regrouped with an actuator term
    (the first joint's Izz + armature) is left out: the URDF has no armature, so its change
    would measure the armature, not the body. The symmetric change
    100 (id - cad) / max(|id|, |cad|) lies in [-200, 200] and stays readable for products of
    inertia whose CAD value is ~0. The CAD's base values are the CAD standard parameters
    projected with the result's own reduction. None when the CAD lacks a standard parameter
    of the layout."""
    names = list(base_reduction["standard_names"])
    if any(n not in cad for n in names):
        return None
    theta = np.array([cad[n] for n in names])
    ind = np.asarray(base_reduction["independent"], int)
    dep = np.asarray(base_reduction["dependent"], int)
    beta = np.asarray(base_reduction["beta"], float).reshape(ind.size, dep.size)
    phi_cad = theta[ind] + (beta @ theta[dep] if dep.size else 0.0)
    out = {b: [] for b in bodies}
    actuator_dep = np.array([names[i].rsplit(".", 1)[1] not in _INERTIAL for i in dep], bool)
    for k, i in enumerate(ind):
        body, sym = names[i].rsplit(".", 1)
        if body not in out or sym not in _INERTIAL:      # actuator parameters have no CAD value
            continue
        if dep.size and np.any((beta[k] != 0) & actuator_dep):
            continue        # regrouped with an armature (or friction): its change measures that, not the body
        v = float(base_parameters[k]["value"])
        try:
            rel = float(base_parameters[k]["relative_std_percent"])
        except (TypeError, ValueError):
            rel = math.inf
        scale = max(abs(v), abs(phi_cad[k]))
        change = 100.0 * (v - phi_cad[k]) / scale if scale > 0 else 0.0
        out[body].append((k, change, rel < WELL_DETERMINED_PERCENT))
    return out


def active_bounds(result: dict) -> dict | None:
    """Per-body active physical bounds from result.yaml, wherever the plausibility work puts
    them (`standard_parameters.bounds_active`, or a `bounds_active` entry per body under
    `bodies` / `standard_parameters.bodies`); None when the result has none."""
    sp = result.get("standard_parameters") or {}
    found = None
    for src in (sp.get("bounds_active"), result.get("bounds_active")):
        if isinstance(src, dict):
            found = {str(b): v for b, v in src.items()}
    for holder in (result.get("bodies"), sp.get("bodies")):
        if isinstance(holder, dict):
            for b, entry in holder.items():
                if isinstance(entry, dict) and "bounds_active" in entry:
                    found = found or {}
                    found[str(b)] = entry["bounds_active"]
    if found is None:
        return None

    def as_list(v):
        if v in (None, False, [], {}):
            return []
        if isinstance(v, dict):
            return [str(k) for k, on in v.items() if on]
        if isinstance(v, (list, tuple)):
            return [str(x) for x in v]
        return [str(v)]
    return {b: as_list(v) for b, v in found.items()}


# ----------------------------------------------------------------------- excitation
@dataclass
class Coverage:
    joint: str
    unit: str                   # position unit
    position_edges: np.ndarray
    position_counts: np.ndarray
    velocity_edges: np.ndarray
    velocity_counts: np.ndarray
    lower: float
    upper: float
    velocity_limit: float
    range_used_percent: float   # (max - min) of the samples over (upper - lower); nan without limits
    peak_velocity_percent: float


def coverage(joint: str, q, qd, lower: float, upper: float, velocity_limit: float, unit: str = "rad",
             bins: int = 30) -> Coverage:
    """Position and velocity histograms of one joint over its limits (over the data's own
    range where a limit is infinite); every sample falls in a bin."""
    q = np.asarray(q, float)
    qd = np.asarray(qd, float)
    lo = lower if math.isfinite(lower) else float(q.min())
    hi = upper if math.isfinite(upper) else float(q.max())
    lo, hi = min(lo, float(q.min())), max(hi, float(q.max()))
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    vl = velocity_limit if math.isfinite(velocity_limit) and velocity_limit > 0 else float(np.max(np.abs(qd)))
    vl = max(vl, float(np.max(np.abs(qd)))) or 1.0
    pe = np.linspace(lo, hi, bins + 1)
    ve = np.linspace(-vl, vl, bins + 1)
    pc, _ = np.histogram(q, pe)
    vc, _ = np.histogram(qd, ve)
    span = upper - lower
    used = 100.0 * float(q.max() - q.min()) / span if math.isfinite(span) and span > 0 else math.nan
    peak = (100.0 * float(np.max(np.abs(qd))) / velocity_limit
            if math.isfinite(velocity_limit) and velocity_limit > 0 else math.nan)
    return Coverage(joint, unit, pe, pc, ve, vc, float(lower), float(upper), float(velocity_limit), used, peak)


def trajectory_margins(doc: dict) -> list[dict]:
    """Rows of a designed trajectory's limit report: joint, quantity, limit, worst, margin
    (distance to the limit, in the quantity's unit) and the fraction of the limit used."""
    rows = []
    rep = (doc or {}).get("limit_report") or {}
    for c in rep.get("checks") or []:
        q, lim, worst = c.get("quantity"), float(c.get("limit")), float(c.get("worst"))
        if q == "position_min":
            margin, used = worst - lim, None
        elif q == "position_max":
            margin, used = lim - worst, None
        elif q == "start_pose":
            margin, used = lim - abs(worst), None
        else:
            margin, used = abs(lim) - abs(worst), 100.0 * abs(worst) / abs(lim) if lim else math.inf
        rows.append({"joint": c.get("joint"), "quantity": q, "limit": lim, "worst": worst, "margin": margin,
                     "used_percent": used, "time": c.get("time"), "ok": bool(c.get("ok", margin >= 0))})
    return rows


def collision_pair_decisions(doc: dict) -> list[dict]:
    """Every collision pair the trajectory's design left out or checked with a reduced margin,
    with the reason ({pair, status, margin, reason}), from the file's ``collision`` section."""
    col = (doc or {}).get("collision") or {}
    skipped = (col.get("skipped") or {}).get("pairs") or [] if isinstance(col.get("skipped"), dict) else []
    rows = [dict(r, status="left out") for r in skipped if isinstance(r, dict)]
    rows += [dict(r, status="reduced margin") for r in col.get("reduced_margins") or [] if isinstance(r, dict)]
    return [{"pair": r.get("pair"), "status": r["status"], "margin": r.get("margin"), "reason": r.get("reason")}
            for r in rows]


def collision_fields(doc: dict) -> dict:
    """The collision part of a trajectory file's report (issue 11's fields, whatever their
    exact names): every scalar under a key containing 'collision', flattened."""
    out = {}

    def walk(prefix, v):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif isinstance(v, (list, tuple)) and v and not isinstance(v[0], (dict, list)):
            out[prefix] = ", ".join(str(x) for x in v)
        elif not isinstance(v, (list, tuple)):
            out[prefix] = v
    for holder, base in ((doc or {}, ""), ((doc or {}).get("limit_report") or {}, "limit_report")):
        for k, v in holder.items():
            if "collision" in str(k).lower():
                walk(f"{base}.{k}" if base else str(k), v)
    return out
