"""From a folder's inputs to the numbers of every figure and table of the report."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..estimation.conditioning import IMPACT_FRACTION
from ..estimation.weak_directions import join_terms
from . import figures as F
from .findings import Finding, numeric_findings, recorded_findings
from .inputs import ReportInputs


@dataclass
class ReportData:
    inputs: ReportInputs
    joints: list
    units: list
    validation_rows: list = field(default_factory=list)   # dicts per joint
    validation_source: str = ""
    noise: dict = field(default_factory=dict)             # joint -> noise std
    noise_label: str = ""
    histograms: list = field(default_factory=list)
    histogram_title: str = ""
    friction: list = field(default_factory=list)
    friction_skipped: list = field(default_factory=list)
    worst_friction: str | None = None
    chart: F.RelativeStdChart | None = None
    bodies: list | None = None
    base_changes: dict | None = None      # body -> [(base index, change from CAD %, well determined)]
    bounds: dict | None = None
    coverage: list | None = None
    margins: list = field(default_factory=list)
    collision: dict = field(default_factory=dict)
    collision_pairs: list = field(default_factory=list)     # pairs left out / with a reduced margin, and why
    findings: list = field(default_factory=list)

    @property
    def result(self) -> dict | None:
        return self.inputs.result


def _float(x, default=math.nan) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return default


def noise_levels(inp: ReportInputs) -> tuple[dict, str]:
    """Per-joint effort noise std the errors are compared with, and what it is."""
    r = inp.result or {}
    demo = (r.get("demo") or {}).get("effort_noise_std")
    if isinstance(demo, dict) and demo:
        return {j: _float(v) for j, v in demo.items()}, "the simulated sensor noise std"
    raw = (r.get("settings") or {}).get("raw_residual_rms")
    if isinstance(raw, dict) and raw:
        return {j: _float(v) for j, v in raw.items()}, "the identification's in-sample RMS (raw effort)"
    v = inp.validation or {}
    out = {}
    for j, row in (v.get("joints") or {}).items():
        ratio = _float(row.get("rms_over_noise_std"))
        if math.isfinite(ratio) and ratio > 0:
            out[j] = _float(row.get("rms")) / ratio
    return out, "the identification's in-sample RMS (raw effort)" if out else ""


def _validation_rows(table: dict, noise: dict) -> list:
    rows = []
    for j, x in table.items():
        rms = _float(x.get("rms"))
        ratio = _float(x.get("rms_over_noise_std"))
        if not math.isfinite(ratio) and noise.get(j):
            ratio = rms / noise[j]
        rows.append({"joint": j, "rms": rms, "relative_rms": _float(x.get("relative_rms")), "ratio": ratio,
                     "max_abs_error": _float(x.get("max_abs_error")), "samples": x.get("samples"),
                     "not_validated": x.get("reason") if x.get("validated") is False else None})
    return rows


def build(inp: ReportInputs) -> ReportData:
    joints, units = inp.joints, inp.units
    unit_of = dict(zip(joints, units))
    d = ReportData(inp, joints, units)
    r = inp.result
    d.noise, d.noise_label = noise_levels(inp)

    # validation table: held out at identification, else validation.yaml
    if r and (r.get("validation") or {}).get("joints"):
        d.validation_rows = _validation_rows(r["validation"]["joints"], d.noise)
        d.validation_source = "held-out data of the identification"
    if inp.validation:
        d.validation_rows = _validation_rows(inp.validation["joints"], d.noise)
        d.validation_source = f"recording {inp.validation.get('bag', '?')} (robot-ident validate)"

    # error histograms
    sets = []
    if inp.validation_samples is not None and "validation" in inp.validation_samples.sets:
        sets.append((inp.validation_samples.sets["validation"], d.validation_source))
    if inp.samples is not None and "validation" in inp.samples.sets:
        sets.append((inp.samples.sets["validation"], "held-out data of the identification"))
    elif inp.samples is not None and "identification" in inp.samples.sets:
        sets.append((inp.samples.sets["identification"], "identification data (in sample: no held-out data kept)"))
    if sets:
        s, what = sets[0]
        err = s.effort - s.predicted
        d.histograms = [F.error_histogram(j, err[s.moving[:, k], k], d.noise.get(j), unit_of.get(j, "N·m"))
                        for k, j in enumerate(joints)]
        d.histogram_title = (f"Prediction error on the {what}, moving samples; dashed: the counts "
                             f"{d.noise_label or 'noise'} alone would give")

    # friction fit
    if r and inp.samples is not None and "identification" in inp.samples.sets:
        s = inp.samples.sets["identification"]
        fm = r["robot"].get("friction_model") or {}
        scale = _float(fm.get("coulomb_velocity_scale"), 0.01)
        act = r.get("actuators") or {}
        blocks = set(fm["blocks"]) if isinstance(fm.get("blocks"), list) else {"Fc", "Fv"}
        for k, j in enumerate(joints):
            a = act.get(j) or {}
            # a friction term of the model that is not a base parameter by itself is regrouped:
            # the curve cannot be drawn apart from the rest, so the joint is left out (said so)
            if not ({"Fc", "Fv"} & blocks) or any(sym in blocks and sym not in a for sym in ("Fc", "Fv")):
                d.friction_skipped.append(j)
                continue
            if s.qd is None:
                break
            fc = _float((a.get("Fc") or {}).get("value"), 0.0)
            fv = _float((a.get("Fv") or {}).get("value"), 0.0)
            d.friction.append(F.friction_fit(j, s.qd[:, k], s.effort[:, k], s.predicted[:, k], s.moving[:, k],
                                             fc, fv, scale, unit_of.get(j, "N·m")))
        d.worst_friction = F.worst_friction_joint(d.friction)

    # parameters
    if r:
        d.chart = F.relative_std_chart(r["base_parameters"])
        d.bounds = F.active_bounds(r)
        sp = (r.get("standard_parameters") or {}).get("values")
        br = r.get("base_reduction")
        names = list(br["standard_names"]) if br else list(sp or [])
        bodies = [n[:-2] for n in names if n.endswith(".m")]
        if sp and inp.cad:
            det = F.determined_standard(br, r["base_parameters"]) if br else None
            d.bodies = F.body_comparisons(inp.cad, sp, bodies, d.bounds, det)
        if br and inp.cad:
            d.base_changes = F.base_changes_by_body(inp.cad, br, r["base_parameters"], bodies)

    # excitation
    if inp.samples is not None and "identification" in inp.samples.sets:
        s, lim = inp.samples.sets["identification"], inp.samples.limits
        if s.q is not None and s.qd is not None:
            d.coverage = [F.coverage(j, s.q[:, k], s.qd[:, k], lim["lower"][k], lim["upper"][k],
                                     lim["velocity"][k], F.position_unit(unit_of.get(j, "N·m")))
                          for k, j in enumerate(joints)]
    if inp.trajectory is not None:
        d.margins = F.trajectory_margins(inp.trajectory)
        d.collision = F.collision_fields(inp.trajectory)
        d.collision_pairs = F.collision_pair_decisions(inp.trajectory)

    ratios = {row["joint"]: row["ratio"] for row in d.validation_rows}
    d.findings = recorded_findings(r, inp.validation) + numeric_findings(r, ratios, d.friction, d.bounds)
    d.findings += [Finding("note", n, "report") for n in inp.notes]
    if inp.trajectory is not None and not d.collision:
        d.findings.append(Finding("note", f"trajectory {inp.trajectory_path} has no collision report "
                                          "(designed without a collision model)", "report"))
    return d


def key_answers(d: ReportData) -> list[str]:
    """The three questions of a one-minute read, answered from the figures' numbers."""
    out = []
    if d.friction:
        f = next((x for x in d.friction if x.joint == d.worst_friction), d.friction[0])
        share = (f"{f.misfit_percent:.1f} % of its friction effort" if np.isfinite(f.misfit_percent)
                 else "no friction effort to compare with")
        what = f"systematic misfit {share}, {f.systematic_rms:.3g} {f.unit}"
        if all(x.within_noise for x in d.friction):
            out.append(f"Friction: every joint's Coulomb + viscous curve fits within the noise; the largest "
                       f"misfit is {f.joint} ({what})")
        else:
            out.append(f"Worst friction fit: {f.joint} ({what}, above the noise of the binned means)")
    weak = ((d.result or {}).get("model_quality") or {}).get("weakest_direction")
    if weak:
        terms, share = weak["parameters"], weak["effort_change_per_std_percent"]
        out.append(f"Weakest direction: this motion tells apart {join_terms(terms)} least; one standard deviation "
                   f"along it moves the predicted efforts by {share:.2g} % of their RMS"
                   + (": too little to matter" if share < 100 * IMPACT_FRACTION else
                      ": " + weak.get("advice", "another excitation would separate them (robot-ident design)")))
    elif d.chart is not None and len(d.chart.index):
        names = [d.result["base_parameters"][i]["name"] for i in d.chart.least_determined(3)]
        rel = d.chart.relative_std[:3]
        out.append("Least determined base parameters: " + "; ".join(
            f"#{i} {F.short_name(n, 40)} ({'inf' if not math.isfinite(v) else f'{v:.3g}'} %)"
            for i, n, v in zip(d.chart.least_determined(3), names, rel)))
    if d.bodies:
        b = max(d.bodies, key=lambda c: abs(c.mass_change_percent) if math.isfinite(c.mass_change_percent) else -1)
        shifts = [c.com_shift_mm for c in d.bodies if math.isfinite(c.com_shift_mm)]
        unfixed = [c.body for c in d.bodies if c.determined is not None and not c.determined["mass"]]
        out.append(f"Largest identified mass change from CAD: {b.body} {b.mass_change_percent:+.1f} % "
                   f"({b.mass[0]:.3g} → {b.mass[1]:.3g} kg); centre-of-mass shifts up to "
                   f"{max(shifts) if shifts else float('nan'):.1f} mm"
                   + (f". The data do not fix the mass of {len(unfixed)} of {len(d.bodies)} bodies by itself "
                      "(hatched in the bodies figure): those values are the estimator's choice" if unfixed else ""))
    if d.base_changes:
        per = []
        for body, pts in d.base_changes.items():
            good = [abs(p[1]) for p in pts if p[2] and math.isfinite(p[1])]
            if good:
                per.append(f"{body} {np.median(good):.1f} %")
        if per:
            out.append("What the data fix, per body (median symmetric |change from CAD| of its well-determined "
                       "base parameters): " + ", ".join(per))
    return out


def comparison_rows(a: ReportData, b: ReportData) -> list[tuple]:
    """(quantity, unit, A, B, change of B from A in %) rows for --compare."""
    def g(d, *path):
        x = d.result
        for p in path:
            x = x.get(p) if isinstance(x, dict) else None
        return x
    rows = [("method", "", g(a, "method"), g(b, "method")),
            ("samples", "", g(a, "samples"), g(b, "samples")),
            ("condition number", "", g(a, "condition_number"), g(b, "condition_number")),
            ("base parameters well determined", f"< {F.WELL_DETERMINED_PERCENT:g} %",
             a.chart.n_well if a.chart else None, b.chart.n_well if b.chart else None)]
    va = {r["joint"]: r for r in a.validation_rows}
    vb = {r["joint"]: r for r in b.validation_rows}
    for j, u in zip(a.joints, a.units):
        if j in va or j in vb:
            rows.append((f"{j}: validation RMS", u, (va.get(j) or {}).get("rms"), (vb.get(j) or {}).get("rms")))
    fa = {f.joint: f for f in a.friction}
    fb = {f.joint: f for f in b.friction}
    for j, u in zip(a.joints, a.units):
        if j in fa or j in fb:
            for sym, unit in (("coulomb", u), ("viscous", f"{u}·s/{F.position_unit(u)}")):
                rows.append((f"{j}: {'Fc' if sym == 'coulomb' else 'Fv'}", unit,
                             getattr(fa.get(j), sym, None), getattr(fb.get(j), sym, None)))
    ba = {c.body: c for c in a.bodies or []}
    bb = {c.body: c for c in b.bodies or []}
    for body in dict.fromkeys([*ba, *bb]):
        rows.append((f"{body}: mass", "kg", ba[body].mass[1] if body in ba else None,
                     bb[body].mass[1] if body in bb else None))
    return [(q, u, x, y, _change(x, y)) for q, u, x, y in rows]


def _change(a, b) -> float | None:
    """B relative to A in %, for numbers."""
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    return 100.0 * (b - a) / abs(a) if a != 0 and math.isfinite(a) and math.isfinite(b) else None
