"""Is the identified model determined by the data? A check run after every estimate.

A result is *not a good model* when the model misses structure the data show
(structure_check.py: a coupling, spring or gain the config gets wrong), or when

- the condition number of the identification matrix exceeds `COND_THRESHOLD`
  (1e5; well-excited recordings of the demo arm give ~3e2, nearly rank-deficient
  ones 1e7-1e9), or
- a base parameter's relative standard deviation exceeds `REL_STD_PERCENT` (100 %)
  *and* that uncertainty matters: moving it by one standard deviation changes the
  predicted efforts by more than `IMPACT_FRACTION` (1 %) of their RMS. A product of
  inertia that is nearly zero in truth has a large relative std but no effect on the
  prediction, and does not make the model bad; it is still listed.

The outcome is a plain dict written to result.yaml under ``model_quality`` and a list
of ``warning:`` lines for the command line and the node's diagnostics.
"""
from __future__ import annotations

import math

import numpy as np

from .result import IdentificationResult
from .weak_directions import from_covariance

COND_THRESHOLD = 1e5
REL_STD_PERCENT = 100.0
IMPACT_FRACTION = 0.01


def assess_quality(result: IdentificationResult, column_rms=None, effort_rms: float | None = None,
                   model=None) -> dict:
    """``{good, reasons, condition_number, condition_threshold, poorly_determined,
    uncertain_but_negligible}``. `column_rms` (RMS of each regressor column over the
    identification rows) and `effort_rms` (RMS of the fitted efforts) measure each
    parameter's effect; without them every parameter above 100 % counts. With `model`, the
    weakest direction's cause (structure or excitation: estimation/weak_directions.py)."""
    rel = result.relative_std
    cond = float(result.condition_number)
    over = [k for k in range(len(rel)) if not rel[k] <= REL_STD_PERCENT]
    if column_rms is not None and effort_rms and effort_rms > 0:
        impact = np.abs(result.std) * np.asarray(column_rms) / effort_rms
        bad = [k for k in over if not impact[k] <= IMPACT_FRACTION]
    else:
        impact = None
        bad = over
    reasons = []
    if not cond <= COND_THRESHOLD:
        reasons.append(f"condition number {cond:.3g} above {COND_THRESHOLD:.0e}")
    if bad:
        reasons.append(f"{len(bad)} of {len(rel)} base parameters have relative std > {REL_STD_PERCENT:.0f} % "
                       "and a visible effect on the efforts")
    def row(k):
        d = {"name": result.names[k], "relative_std_percent": float(rel[k]) if math.isfinite(rel[k]) else "inf"}
        if impact is not None:
            d["effort_change_per_std_percent"] = float(100 * impact[k])
        return d
    # named for every model, good or not: the report's first screen says where it is weakest
    weakest = from_covariance(result, column_rms, effort_rms, model)
    structure = list(result.extra.get("structure_findings") or ())    # structure_check.judge_structure
    out = {"good": not reasons and not structure, "reasons": reasons, "condition_number": cond,
           "condition_threshold": COND_THRESHOLD, "relative_std_threshold_percent": REL_STD_PERCENT,
           "poorly_determined": [row(k) for k in bad],
           "uncertain_but_negligible": [row(k) for k in over if k not in bad]}
    if weakest is not None:
        out["weakest_direction"] = weakest
    if structure:
        out["misses_structure"] = structure
    disagreements = list(result.extra.get("data_against_bounds") or ())
    geo = result.extra.get("com_region_note")
    if geo and "no geometry read" in geo:          # the physical bounds could not read any mesh
        disagreements.append(f"identification.physical: {geo}: the centre-of-mass regions are kinematic spheres "
                             "instead of the links' geometry; give the folder holding the meshes' package with "
                             "--package-dir or excitation.collision.package_dirs")
    if disagreements:          # the physical estimate: bodies the data push against a plausibility bound
        out["data_against_bounds"] = disagreements
    if result.extra.get("data_against_notes"):      # ... and constraints that bite at a small cost
        out["data_against_notes"] = list(result.extra["data_against_notes"])
    return out


def quality_reasons(quality: dict) -> list[str]:
    """Why a model is not good, in a few words each: the data's reasons, then the joints
    that miss structure."""
    found = quality.get("misses_structure") or []
    return list(quality.get("reasons") or []) + (
        ["the model misses structure on joint " + ", ".join(repr(f["joint"]) for f in found)] if found else [])


def quality_warnings(quality: dict, max_names: int = 8) -> list[str]:
    """``warning:`` lines for a quality dict (empty when the model is good and nothing is listed)."""
    from .structure_check import structure_warning
    lines = []
    structure = structure_warning(quality.get("misses_structure") or [])
    if structure:
        lines.append(structure)
    if quality["reasons"]:
        names = [p["name"] for p in quality["poorly_determined"]]
        listed = ", ".join(names[:max_names]) + (f" and {len(names) - max_names} more" if len(names) > max_names
                                                 else "")
        weak = quality.get("weakest_direction")
        lines.append("warning: identification: the data do not determine the model ("
                     + "; ".join(quality["reasons"]) + ")" + (f": {listed}" if names else "")
                     + (f"; this motion does not tell apart {weak['text']}" if weak else "")
                     + "; identified.urdf is NOT a good model -- "
                     + (weak.get("advice") if weak and weak.get("advice")
                        else "use a richer excitation (robot-ident design)"))
    lines += [f"warning: {text}" for text in quality.get("data_against_bounds", ())]
    lines += [f"note: {text}" for text in quality.get("data_against_notes", ())]
    return lines
