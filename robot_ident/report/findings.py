"""Warnings and refusals at the top of the report, in words: those the identification
recorded in result.yaml (a `warnings` list, `refusals` list) and those the report finds
itself in the numbers (ill-conditioning, undetermined parameters, inconsistent bodies,
active bounds, validation error above the noise, a friction misfit above the noise)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .figures import UNDETERMINED_PERCENT

CONDITION_WARNING = 1000.0      # regressor condition number above which estimates are fragile
RATIO_WARNING = 1.5             # validation RMS over the noise level


@dataclass(frozen=True)
class Finding:
    level: str      # "refusal", "warning" or "note"
    text: str
    source: str     # "identification" (result.yaml) or "report" (found in the numbers)


def _texts(items) -> list[str]:
    out = []
    for w in items if isinstance(items, (list, tuple)) else [items]:
        if isinstance(w, dict):
            msg = w.get("message") or w.get("text") or w.get("warning") or ", ".join(f"{k}: {v}" for k, v in w.items())
            who = w.get("joint") or w.get("topic") or w.get("body")
            out.append(f"{who}: {msg}" if who and str(who) not in str(msg) else str(msg))
        elif w is not None:
            out.append(str(w))
    return [t.removeprefix("warning: ") for t in out]


def recorded_findings(result: dict | None, validation: dict | None) -> list[Finding]:
    out = []
    for doc in (result, validation):
        if not doc:
            continue
        for key, level in (("refusals", "refusal"), ("errors", "refusal"), ("warnings", "warning")):
            if doc.get(key):
                out += [Finding(level, t, "identification") for t in _texts(doc[key])]
        checks = doc.get("input_checks") if isinstance(doc.get("input_checks"), dict) else {}
        if checks.get("warnings"):          # where identify writes its plausibility findings (and notes)
            out += [Finding("note", t.removeprefix("note: "), "input checks") if t.startswith("note: ")
                    else Finding("warning", t, "input checks") for t in _texts(checks["warnings"])]
        joints = doc.get("joints") if doc is validation else (doc.get("validation") or {}).get("joints")
        for j, row in (joints or {}).items() if isinstance(joints, dict) else ():
            if isinstance(row, dict) and row.get("validated") is False:
                out.append(Finding("warning", f"joint {j!r} not validated: {row.get('reason', '')}", "validation"))
        if checks.get("forced"):
            out.append(Finding("refusal", "identified with --force despite implausible input (see the warnings)",
                               "input checks"))
        quality = doc.get("model_quality") if isinstance(doc.get("model_quality"), dict) else {}
        if quality and quality.get("good") is False and quality.get("reasons"):
            out.append(Finding("warning", "the data do not determine the model ("
                               + "; ".join(map(str, quality.get("reasons") or [])) + "): identified.urdf is not "
                               "a good model", "identification"))
    return out


def numeric_findings(result: dict | None, validation_ratios: dict, friction_fits=(), bounds: dict | None = None) \
        -> list[Finding]:
    """What the report itself sees in the numbers (validation_ratios: joint -> RMS/noise)."""
    out = []
    if result:
        cond = result.get("condition_number")
        try:
            cond = float(cond)
        except (TypeError, ValueError):
            cond = math.inf
        if not cond < CONDITION_WARNING:
            out.append(Finding("warning", f"condition number {cond:.3g} is above {CONDITION_WARNING:g}: the "
                                          "excitation does not separate the parameters well", "report"))
        bad, negligible = [], []
        quality = result.get("model_quality") if isinstance(result.get("model_quality"), dict) else {}
        harmless = {q.get("name") for q in quality.get("uncertain_but_negligible") or [] if isinstance(q, dict)}
        for i, p in enumerate(result.get("base_parameters") or []):
            try:
                r = float(p.get("relative_std_percent"))
            except (TypeError, ValueError):
                r = math.inf
            if not r < UNDETERMINED_PERCENT:
                (negligible if p.get("name") in harmless else bad).append(f"#{i}")
        if bad:
            out.append(Finding("warning", f"{len(bad)} base parameter(s) with relative std >= "
                                          f"{UNDETERMINED_PERCENT:g} % ({', '.join(bad[:12])}"
                                          f"{', …' if len(bad) > 12 else ''}): the data do not determine them",
                               "report"))
        if negligible:      # the identification judged them: uncertain, but they hardly move the efforts
            out.append(Finding("note", f"{len(negligible)} base parameter(s) with relative std >= "
                                       f"{UNDETERMINED_PERCENT:g} % ({', '.join(negligible[:12])}"
                                       f"{', …' if len(negligible) > 12 else ''}) hardly move the predicted "
                                       "efforts: uncertain, and negligible for the model's use", "report"))
        pc = (result.get("standard_parameters") or {}).get("physically_consistent") or {}
        incons = [b for b, ok in pc.items() if not ok]
        if incons:
            out.append(Finding("warning", "bodies not physically consistent (kept at CAD in identified.urdf): "
                               + ", ".join(incons), "report"))
    for b, names in (bounds or {}).items():
        if names:
            out.append(Finding("note", f"body {b}: physical bound(s) active ({', '.join(names)}): the estimate "
                                       "sits on the bound, the data pull beyond it", "report"))
    for j, r in validation_ratios.items():
        if r is not None and math.isfinite(r) and r > RATIO_WARNING:
            out.append(Finding("warning", f"joint {j}: validation RMS is {r:.2f}x the noise level: the model "
                                          "misses structure on held-out data", "report"))
    for f in friction_fits:
        if math.isfinite(f.systematic_rms) and not f.within_noise and f.misfit_percent > 10.0:
            out.append(Finding("warning", f"joint {f.joint}: friction curve misses {f.misfit_percent:.0f} % of "
                                          "the friction effort systematically (see the friction figure)", "report"))
    return out
