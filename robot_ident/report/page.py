"""report.html: one self-contained page (PNG figures embedded as base64, no external
resource, opens offline). The verdict first (report/verdict.py: trusted, usable with the
caveats named, not trusted, with the reasons ranked), then measured against predicted
efforts over time, the per-joint validation table, the findings, then the details:
parameters (with their CAD values), bodies, friction, excitation. `--compare` puts two
folders' sections side by side."""
from __future__ import annotations

import base64
import html
import math
from pathlib import Path

from . import plots
from .build import ReportData, build, comparison_rows, key_answers
from .figures import position_unit, velocity_unit
from .inputs import load_inputs

STYLE = """
body{font-family:sans-serif;margin:1.5em;max-width:1500px;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:2px 7px;font-size:12px}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;display:block;margin:.4em 0}
.findings li{margin:.2em 0}.refusal{color:#a00;font-weight:bold}.warning{color:#b25e00}.note{color:#555}
.answers{background:#eef5ff;border:1px solid #9bd;padding:.5em 1em}
.verdict{border:2px solid;padding:.5em 1em;margin:.6em 0}.verdict h2{border:none;margin:.1em 0}
.verdict.ok{border-color:#2a7;background:#effaf3}.verdict.caveat{border-color:#c80;background:#fff7e8}
.verdict.bad{border-color:#c22;background:#fff0f0}.verdict li{margin:.15em 0}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}.pair>div{min-width:0;overflow-x:auto}
.bad{color:#a00;font-weight:bold}.caption{font-size:12px;color:#444}
"""

# Writes the render check into the DOM (read by the browser test with --dump-dom).
CHECK_SCRIPT = """
<script>
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message || e)); });
window.addEventListener('load', function () {
  var imgs = document.images, broken = 0;
  for (var i = 0; i < imgs.length; i++) { if (!imgs[i].complete || imgs[i].naturalWidth === 0) broken++; }
  var el = document.getElementById('render-check');
  el.setAttribute('data-images', imgs.length);
  el.setAttribute('data-broken', broken);
  el.setAttribute('data-errors', window.__errors.length);
  el.textContent = 'images ' + imgs.length + ', broken ' + broken + ', script errors ' + window.__errors.length;
});
</script>"""


def esc(x) -> str:
    return html.escape(str(x))


def fmt(x, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        try:
            x = float(x)
        except (TypeError, ValueError):
            return esc(x)
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return "inf" if x > 0 else "-inf" if x < 0 else "n/a"
    return f"{x:.{digits}g}"


def table(header, rows, numeric_from: int = 1) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f"<td class='num'>{c if isinstance(c, _Raw) else fmt(c)}</td>" if k >= numeric_from
        else f"<td>{c if isinstance(c, _Raw) else esc(c)}</td>" for k, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class _Raw(str):
    """HTML already escaped."""


def img(png: bytes, alt: str) -> str:
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


# ----------------------------------------------------------------------- sections
def _final_path(folder: Path) -> Path:
    """The folder's own path when the report is written inside its staging folder
    (``.<name>.robot_ident-<pid>-<random>/<name>``, io/staging.py), else `folder`."""
    folder = Path(folder)
    stage = folder.parent.name
    return folder.parent.parent / folder.name if stage.startswith(f".{folder.name}.robot_ident-") else folder


def verdict_html(d: ReportData) -> str:
    from .verdict import verdict
    v = verdict(d.findings, d.validation_rows, d.joints)
    head = {"trusted": "Trusted: no warning, the held-out errors are at the noise level",
            "not trusted": "Not trusted: do not use this model as it is"}.get(v.level, "Usable, with these caveats")
    items = "".join(f"<li>{esc(r)}</li>" for r in v.reasons[:8])
    more = f"<p class='caption'>{len(v.reasons) - 8} more under Findings.</p>" if len(v.reasons) > 8 else ""
    return (f"<div class='verdict {v.css}' id='verdict' data-level='{esc(v.level)}'><h2>{esc(head)}</h2>"
            + (f"<ol>{items}</ol>{more}" if items else "") + "</div>")


def findings_html(d: ReportData) -> str:
    if not d.findings:
        return "<p>No warning or refusal recorded by the identification, none found in the numbers.</p>"
    order = {"refusal": 0, "warning": 1, "note": 2}
    items = "".join(f"<li class='{f.level}'>{esc(f.level)} ({esc(f.source)}): {esc(f.text)}</li>"
                    for f in sorted(d.findings, key=lambda f: order.get(f.level, 3)))
    return f"<ul class='findings'>{items}</ul>"


def summary_html(d: ReportData) -> str:
    r = d.result
    if not r:
        v = d.inputs.validation or {}
        return table(["result", "bag", "samples"], [[v.get("result", "?"), v.get("bag", "?"), v.get("samples")]],
                     numeric_from=2)
    chart = d.chart
    return table(["method", "robot URDF", "joints", "samples", "equations", "condition number",
                  "base parameters", f"well determined (< {chart.threshold:g} %)"],
                 [[r.get("method"), r["robot"].get("urdf"), ", ".join(d.joints), r.get("samples"),
                   r.get("equations"), r.get("condition_number"), len(r["base_parameters"]), chart.n_well]],
                 numeric_from=3)


def validation_html(d: ReportData) -> str:
    parts = []
    if d.validation_rows:
        u = dict(zip(d.joints, d.units))
        parts.append(f"<p class='caption'>On the {esc(d.validation_source)}; samples outside the friction dead "
                     f"band. Noise level: {esc(d.noise_label or 'unknown')}.</p>")
        parts.append(table(["joint", "RMS", "relative RMS [%]", "RMS / noise", "max |error|", "samples"],
                           [[row["joint"], _Raw(f"{fmt(row['rms'])} {esc(u.get(row['joint'], ''))}"),
                             100 * row["relative_rms"],
                             _Raw(f"<span class='bad'>{fmt(row['ratio'], 3)}</span>" if row["ratio"] > 1.5
                                  else fmt(row["ratio"], 3)),
                             _Raw(f"{fmt(row['max_abs_error'])} {esc(u.get(row['joint'], ''))}"), row["samples"]]
                            if not row.get("not_validated") else
                            [row["joint"], _Raw(f"<span class='bad'>not validated</span>: "
                                                f"{esc(row['not_validated'])}"), _Raw(""), _Raw(""), _Raw(""), row["samples"]]
                            for row in d.validation_rows]))
    else:
        parts.append("<p>No validation data in this folder.</p>")
    if d.histograms:
        parts.append(img(plots.error_histogram_figure(d.histograms, d.histogram_title), "error histograms"))
    return "".join(parts)


def friction_html(d: ReportData) -> str:
    if not d.friction:
        why = ("no joint has Coulomb and viscous friction as base parameters by themselves"
               if d.friction_skipped else "no identification samples (samples.npz) in the folder")
        return f"<p>Friction fit not drawn: {esc(why)}.</p>"
    rows = [[f.joint, _Raw(f"{fmt(f.coulomb)} {esc(f.unit)}"),
             _Raw(f"{fmt(f.viscous)} {esc(f.unit)}·s/{esc(position_unit(f.unit))}"),
             _Raw(f"<span class='bad'>{fmt(f.misfit_percent, 3)}</span>" if f.joint == d.worst_friction
                  else fmt(f.misfit_percent, 3)),
             _Raw(f"{fmt(f.systematic_rms, 3)} {esc(f.unit)}"), _Raw(f"{fmt(f.noise_floor, 3)} {esc(f.unit)}"),
             _Raw(f"{fmt(f.scatter_rms, 3)} {esc(f.unit)}"), "yes" if f.within_noise else "no"]
            for f in d.friction]
    extra = (f"<p>Left out (friction not in the model, or Fc / Fv regrouped with other parameters so that "
             f"its curve cannot be drawn alone): {esc(', '.join(d.friction_skipped))}.</p>"
             if d.friction_skipped else "")
    return (img(plots.friction_figure(d.friction, d.worst_friction), "friction fit")
            + table(["joint", "Fc", "Fv", "misfit [%]", "systematic RMS", "noise of bin means",
                     "scatter RMS", "misfit within noise (≤ 2x)"], rows) + extra)


def parameters_html(d: ReportData) -> str:
    if d.chart is None:
        return "<p>No identification result (result.yaml) in this folder.</p>"
    bp = d.result["base_parameters"]
    from .figures import cad_comparable
    try:
        held = cad_comparable(d.result["base_reduction"])
    except (KeyError, TypeError, ValueError):
        held = [False] * len(bp)

    def row(i, p):
        # the URDF holds no armature, friction or offset: no CAD value to compare those with
        cad, v, s = (p.get("cad") if i < len(held) and held[i] else None), p.get("value"), p.get("std")
        try:
            sig = (float(v) - float(cad)) / float(s)
        except (TypeError, ValueError, ZeroDivisionError):
            sig = None
        moved = _Raw(f"<span class='bad'>{fmt(sig, 3)}</span>") if sig is not None and abs(sig) > 3 else sig
        return [f"#{i}", _Raw(esc(p["name"])), v, cad, moved, s, p["relative_std_percent"]]
    worst = [row(i, bp[i]) for i in d.chart.index[:10]]
    full = [row(i, p) for i, p in enumerate(bp)]
    header = ["#", "base parameter (SI: kg, kg·m, kg·m², N·m, N·m·s/rad)", "value", "CAD (URDF)",
              "change [std]", "std", "relative std [%]"]
    return (img(plots.relative_std_figure(d.chart), "relative standard deviations")
            + "<p class='caption'>The ten least determined base parameters:</p>"
            + table(header, worst, numeric_from=2)
            + f"<details><summary>all {len(bp)} base parameters</summary>{table(header, full, numeric_from=2)}"
              "</details>")


def bodies_html(d: ReportData) -> str:
    parts = []
    if d.bodies is None:
        r = d.result or {}
        why = ("the estimator gives base parameters only (use `physical` for per-body values)"
               if r and not r.get("standard_parameters") else "no CAD model available")
        parts.append(f"<p>No per-body mass, centre of mass or inertia: {esc(why)}.</p>")
    else:
        rows = []
        for c in d.bodies:
            pc = c.principal_change_percent
            bounds = ", ".join(c.bounds_active) if c.bounds_active else ("none" if d.bounds is not None
                                                                         else "not reported")
            fixed = ("–" if c.determined is None else
                     ", ".join(k for k, v in c.determined.items() if v) or "none (estimator's choice)")
            rows.append([c.body, c.mass[0], c.mass[1], c.mass_change_percent, c.com_shift_mm,
                         _Raw(" / ".join(fmt(x, 3) for x in c.principal[0])),
                         _Raw(" / ".join(fmt(x, 3) for x in c.principal[1])),
                         _Raw(" / ".join(fmt(x, 3) for x in pc)),
                         _Raw(f"<span class='bad'>{esc(bounds)}</span>" if c.bounds_active else esc(bounds)), fixed])
        parts.append(img(plots.bodies_figure(d.bodies), "bodies: CAD vs identified"))
        parts.append(table(["body", "CAD mass [kg]", "identified mass [kg]", "mass change [%]", "CoM shift [mm]",
                            "CAD principal inertias [kg·m²]", "identified principal inertias [kg·m²]",
                            "principal change [%]", "active physical bounds", "fixed by the data"], rows))
    if d.base_changes:
        parts.append(img(plots.base_changes_figure(d.base_changes), "base parameters per body vs CAD"))
        parts.append("<p class='caption'>Each dot: one base parameter led by a standard parameter of the body "
                     "(its regrouped partners included), identified against the CAD's value of the same "
                     "combination. Filled: relative std below 5 %.</p>")
    return "".join(parts)


def excitation_html(d: ReportData) -> str:
    r = d.result or {}
    parts = [(f"<p>Condition number of the identification regressor: <b>{fmt(r.get('condition_number'))}</b> "
              "(dimensionless; lower is better).</p>")] if r else []
    if d.coverage:
        parts.append(img(plots.coverage_figure(d.coverage, fmt(r.get("condition_number"))), "coverage"))
        parts.append(table(["joint", "lower limit", "upper limit", "range used [% of limits]", "velocity limit",
                            "peak |velocity| [% of limit]"],
                           [[c.joint, _Raw(f"{fmt(c.lower)} {c.unit}"), _Raw(f"{fmt(c.upper)} {c.unit}"),
                             c.range_used_percent, _Raw(f"{fmt(c.velocity_limit)} {c.unit}/s"),
                             c.peak_velocity_percent] for c in d.coverage]))
    if d.margins:
        u = dict(zip(d.joints, d.units))
        qunit = {"position_min": "pos", "position_max": "pos", "start_pose": "pos", "velocity": "vel",
                 "acceleration": "acc"}

        def unit(j, q):
            p = position_unit(u.get(j, "N·m"))
            return {"pos": p, "vel": velocity_unit(u.get(j, "N·m")), "acc": p + "/s²"}.get(qunit.get(q), "")
        parts.append(f"<h3>Designed trajectory {esc(d.inputs.trajectory_path)}: limit margins</h3>")
        parts.append(table(["joint", "quantity", "limit", "worst", "margin", "used [% of limit]", "at [s]", "ok"],
                           [[m["joint"], m["quantity"], _Raw(f"{fmt(m['limit'])} {unit(m['joint'], m['quantity'])}"),
                             _Raw(f"{fmt(m['worst'])} {unit(m['joint'], m['quantity'])}"),
                             _Raw(f"{fmt(m['margin'])} {unit(m['joint'], m['quantity'])}"), m["used_percent"],
                             m["time"], "yes" if m["ok"] else _Raw("<span class='bad'>NO</span>")]
                            for m in d.margins], numeric_from=2))
        if d.collision:
            parts.append("<h3>Collision margins (distances in m, times in s)</h3>")
            parts.append(table(["field", "value"], [[k, v] for k, v in d.collision.items()]))
        if d.collision_pairs:
            parts.append("<h3>Collision pairs left out or checked with a reduced margin</h3>")
            parts.append(table(["pair", "status", "reason", "margin [m]"],
                               [[c["pair"], c["status"], c["reason"], c["margin"]] for c in d.collision_pairs],
                               numeric_from=3))
    if not parts:
        parts.append("<p>No identification data in this folder.</p>")
    return "".join(parts)


def efforts_html(d: ReportData) -> str:
    parts = []
    combined = (d.inputs.folder / "efforts.png").is_file()       # the recording, its held-out part shaded
    for png in ("efforts.png", "validation_efforts.png", "identification_efforts.png"):
        p = d.inputs.folder / png
        if p.is_file():
            what = {"efforts.png": "over the recording, held-out part shaded",
                    "validation_efforts.png": "held out"}.get(png, "identification samples")
            opened = " open" if png == "efforts.png" or not combined else ""
            parts.append(f"<details{opened}><summary>measured vs predicted, {what}</summary>"
                         f"{img(p.read_bytes(), png)}</details>")
    r = d.result or {}
    if r.get("actuators"):
        u = dict(zip(d.joints, d.units))
        same = set(d.units)
        for motor in r["actuators"]:    # a coupled group's motors: its joints' unit, when they share one
            u.setdefault(motor, next(iter(same)) if len(same) == 1 else "")
        unit = {"Fc": lambda j: u[j], "Fv": lambda j: f"{u[j]}·s/{position_unit(u[j])}" if u[j] else "",
                "off": lambda j: u[j], "Ia": lambda j: {"N·m": "kg·m²", "N": "kg"}.get(u[j], "")}
        parts.append("<details><summary>actuator parameters (base parameters by themselves)</summary>"
                     + table(["joint", "parameter", "value", "std", "unit"],
                             [[j, s, v["value"], v["std"], _Raw(esc(unit.get(s, lambda j: "")(j)))]
                              for j, syms in r["actuators"].items() for s, v in syms.items()], numeric_from=2)
                     + "</details>")
    return "".join(parts) or "<p>No effort plots in this folder.</p>"


SECTIONS = (("efforts", "Measured against predicted efforts", efforts_html),
            ("validation", "Validation: prediction error against the noise", validation_html),
            ("findings", "Warnings and refusals", findings_html),
            ("summary", "Summary", summary_html),
            ("parameters", "Base parameters: identified against CAD", parameters_html),
            ("bodies", "Bodies: identified against CAD", bodies_html),
            ("friction", "Friction fit per joint", friction_html),
            ("excitation", "Excitation: joint-space coverage and margins", excitation_html))


def answers_html(d: ReportData) -> str:
    a = key_answers(d)
    return f"<div class='answers'><b>In one minute</b><ul>{''.join(f'<li>{esc(x)}</li>' for x in a)}</ul></div>" \
        if a else ""


def render(datas: list[ReportData]) -> str:
    title = " vs ".join(esc(d.inputs.label) for d in datas)
    parts = [f"<h1>robot_ident report: {title}</h1>"]
    if len(datas) == 1:
        d = datas[0]
        parts.append(f"<p class='caption'>Folder {esc(_final_path(d.inputs.folder))}</p>{verdict_html(d)}"
                     f"{answers_html(d)}")
        for key, name, fn in SECTIONS:
            parts.append(f"<h2 id='{key}'>{esc(name)}</h2>{fn(d)}")
    else:
        a, b = datas
        parts.append("<h2 id='compare'>Side by side</h2>" + table(
            ["quantity", "unit", f"A: {a.inputs.label}", f"B: {b.inputs.label}", "B − A [% of A]"],
            [(q, u, x, y, _Raw(f"<span class='bad'>{fmt(c, 3)}</span>") if c is not None and abs(c) > 5 else c)
             for q, u, x, y, c in comparison_rows(a, b)], numeric_from=2))
        if a.validation_rows and b.validation_rows:
            series = {f"{'AB'[i]}: {x.inputs.label}": [r["rms"] for r in x.validation_rows]
                      for i, x in enumerate((a, b))}
            parts.append(img(plots.validation_rms_figure(a.joints, a.units, series), "validation RMS A vs B"))
        parts.append("<div class='pair'>" + "".join(
            f"<div>{verdict_html(x)}{answers_html(x)}</div>" for x in (a, b)) + "</div>")
        for key, name, fn in SECTIONS:
            parts.append(f"<h2 id='{key}'>{esc(name)}</h2><div class='pair'>"
                         + "".join(f"<div><h3>{'AB'[i]}: {esc(x.inputs.label)}</h3>{fn(x)}</div>"
                                   for i, x in enumerate((a, b))) + "</div>")
    parts.append("<p id='render-check'></p>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>robot_ident report: "
            f"{title}</title><style>{STYLE}</style></head><body>{''.join(parts)}{CHECK_SCRIPT}</body></html>\n")


def is_report_file(path: Path) -> bool:
    """A page `render` wrote (its title)."""
    with open(path, "rb") as fh:
        return b"<title>robot_ident report:" in fh.read(512)


def write_report(folder, compare=None, trajectory=None, output=None) -> Path:
    """Write the report of a result (or validation-only) folder, optionally side by side
    with another folder; returns the path (default folder/report.html)."""
    from ..io.staging import check_output_file
    from ..util.atomic import atomic_write_text
    out = check_output_file(Path(output) if output is not None else Path(folder) / "report.html",
                            is_report_file, "report")     # checked before any work
    datas = [build(load_inputs(folder, trajectory))]
    if compare is not None:
        datas.append(build(load_inputs(compare)))
        if datas[0].joints != datas[1].joints:
            from ..errors import ConfigError
            raise ConfigError(f"--compare: {folder} identifies joints {datas[0].joints}, {compare} "
                              f"{datas[1].joints}")
    return atomic_write_text(out, render(datas))

