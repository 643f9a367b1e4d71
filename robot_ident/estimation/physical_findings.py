"""What the physically consistent estimate (physical.py) tells the user where the data and
its constraints disagree: a body held at a plausibility bound (the data and the URDF
disagree), an armature or friction the data want negative (no physical drive has that:
efforts that lag the motion, or an effect the model lacks). Each line says what holding
the constraint costs in fit against WLS."""
from __future__ import annotations

import numpy as np

from .body_bounds import TINY_MASS

_TERMS = {"Ia": "armature", "Fc": "Coulomb friction", "Fv": "viscous friction"}
SIGN_SIGMAS = 3.0    # a negative term this many standard deviations below 0 is the data's, not noise
SIGN_WARN_RATIO = 1.2   # holding it at 0 costs the joint more than this x WLS's in-sample RMS: a warning ...
VISIBLE_COST = 0.01     # ... and more than this fraction of the joint's effort RMS (on noise-free data WLS's RMS
                        # is tiny: 70 % above it was still 0.1 % of the effort, and warning of it cried wolf)


def visible_cost(rms, wls_rms, effort_rms) -> np.ndarray:
    """(n,) True where the physical estimate's in-sample RMS exceeds WLS's by more than
    `VISIBLE_COST` of the joint's effort RMS (the user would see it in the predictions)."""
    return (np.asarray(rms) - np.asarray(wls_rms)) > VISIBLE_COST * np.asarray(effort_rms)


def _fit_cost(rms, wls_rms, joints) -> str:
    worst = int(np.argmax(rms / np.maximum(wls_rms, 1e-300)))
    return f"{100 * (rms[worst] / wls_rms[worst] - 1):.2g} % on joint {joints[worst]!r}" \
        if wls_rms[worst] > 0 else "unknown"


def data_against_signs(first, values, rms, wls_rms, joints, fit_tolerance: float,
                       effort_rms=None) -> tuple[list[str], list[str]]:
    """One line per joint (or motor) whose armature or friction the data want negative and
    the physical estimate holds at about 0 -- WLS's value more than one standard deviation
    below 0 where holding it costs that joint's fit (or `SIGN_SIGMAS` below 0 anywhere):
    no physical drive has that; efforts that lag the motion (filtered or delayed efforts)
    or an effect the model lacks look like it. (warnings, notes): a warning where holding
    them costs that joint more than `SIGN_WARN_RATIO` x WLS's in-sample RMS and a visible part
    of its effort (`visible_cost`, when `effort_rms` is given), else a note."""
    seen = visible_cost(rms, wls_rms, effort_rms) if effort_rms is not None else np.ones(len(joints), bool)
    found: dict = {}
    for k, name in enumerate(first.names):
        owner, _, sym = name.rpartition(".")
        v, sd = float(first.values[k]), float(first.std[k])
        if sym not in _TERMS or " " in name or not v < -sd or values[k] > 0.1 * abs(v):
            continue
        j = joints.index(owner) if owner in joints else None
        costly = j is not None and rms[j] > fit_tolerance * wls_rms[j]
        if costly or v < -SIGN_SIGMAS * sd:
            found.setdefault(owner, []).append(f"{_TERMS[sym]} ({v:.3g} +- {sd:.2g})")
    warnings, notes = [], []
    for owner, terms in found.items():
        j = joints.index(owner) if owner in joints else None
        costly = j is not None and rms[j] > SIGN_WARN_RATIO * wls_rms[j] and bool(seen[j])
        cost = (f"its in-sample RMS {100 * (rms[j] / wls_rms[j] - 1):.2g} % above WLS's" if j is not None
                and wls_rms[j] > 0 else f"in-sample RMS above WLS's by up to {_fit_cost(rms, wls_rms, joints)}")
        rotor = ("; efforts from joint torque sensors after the gear (Franka, KUKA LWR/iiwa) do not see the rotor: "
                 "identification.model.armature: false models them" if any(t.startswith("armature") for t in terms)
                 else "")
        line = (f"joint {owner!r}: the data want a negative {' and '.join(terms)}: no physical drive has that -- "
                "efforts that lag the motion (filtered or delayed before they were logged?) or an effect the model "
                f"lacks{rotor}; the physical estimate holds them at 0 ({cost}; --method wls keeps them)")
        (warnings if costly else notes).append(line)
    return warnings, notes


def data_against_bounds(bodies: dict, ranges, rms, wls_rms, joints, effort_rms=None) -> tuple[list[str], list[str]]:
    """One line per body the data hold against a mass or centre-of-mass bound (the prior
    pulls toward CAD, inside the bounds: an active bound is the data's doing), with what
    holding it there costs in fit against WLS: (warnings, notes) -- notes when that cost is
    nowhere a visible part of a joint's effort (`visible_cost`, when `effort_rms` is given)."""
    cost = _fit_cost(rms, wls_rms, joints)
    out = []
    for b, d in bodies.items():
        lo, hi = ranges[b]
        cad = d["mass_cad"]
        whys = []
        for what in d["bounds_active"]:
            if what == "mass_max":
                why = (f"the data want more than its mass bound {hi:.3g} kg"
                       + (f" ({hi / cad:.2g} x its CAD mass {cad:.3g} kg)" if cad > TINY_MASS else ""))
            elif what == "mass_min":
                why = (f"the data want less than its mass bound {lo:.3g} kg"
                       + (f" ({lo / cad:.2g} x its CAD mass {cad:.3g} kg)" if cad > TINY_MASS else ""))
            elif what.startswith("com") and not any("centre" in w for w in whys):
                why = "the data want its centre of mass outside its geometry's region"
            else:
                continue
            whys.append(why)
        if whys:
            out.append(f"body of joint {b!r}: {' and '.join(whys)}: the data and the URDF disagree; the "
                       f"physical estimate is held at the bound (in-sample RMS above WLS's by up to {cost}); "
                       "check the URDF's <inertial> or widen identification.physical")
    if effort_rms is not None and not visible_cost(rms, wls_rms, effort_rms).any():
        return [], out
    return out, []

