"""The result folder: result.yaml (+ plots, identified URDF where available).

result.yaml holds everything needed to reuse the estimate without the data: the
model's joints and layout, the base-parameter reduction (kept and regrouped
standard columns and beta), base parameter names, values and standard deviations,
friction and armature where they are base parameters by themselves, and the
validation RMS per joint. Written atomically.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import yaml

from ..errors import ConfigError
from ..estimation import IdentificationResult
from ..estimation.validation import ValidationReport
from ..model.base import BaseParameters
from ..util.atomic import atomic_write_text
from ..util.yaml_strict import safe_load_strict, yaml_error_line

FORMAT_VERSION = 2      # 2: ends with `complete: true`


def _f(x) -> float | str:
    x = float(x)
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")


def result_to_dict(result: IdentificationResult, model, validation: ValidationReport | None = None,
                   extra: dict | None = None) -> dict:
    base = result.base
    cad = _cad_base(base, model)
    d = {
        "format_version": FORMAT_VERSION,
        "method": result.method,
        "robot": {"urdf": model.urdf_label, "joints": list(model.joint_names),
                  "locked_positions": {k: float(v) for k, v in model.locked_positions.items()},
                  "friction_model": {
                      "blocks": list(model.layout.actuator_symbols),
                      "coulomb": "Fc * tanh(qd / coulomb_velocity_scale)",
                      "coulomb_velocity_scale": model.friction.coulomb_velocity_scale},
                  # coupled motors: their actuator parameters act on qd_motor = M qd_joint
                  **({"transmissions": model.transmission.as_dict()}
                     if getattr(model, "transmission", None) is not None and model.transmission.groups else {})},
        "samples": int(result.n_samples),
        "equations": int(result.n_rows),
        "condition_number": _f(result.condition_number),
        "base_parameters": [
            {"name": n, "value": _f(v), "std": _f(s), "relative_std_percent": _f(r),
             **({} if cad is None else {"cad": _f(c)})}
            for n, v, s, r, c in zip(result.names, result.values, result.std, result.relative_std,
                                     cad if cad is not None else [None] * len(result.names))],
        "actuators": result.actuator_parameters(),
        "residual_rms": {j: _f(v) for j, v in zip(result.joint_names, result.residual_rms)},
        "noise_sigma_estimate": {j: _f(v) for j, v in zip(result.joint_names, result.joint_sigma)},
        "settings": {k: (_f(v) if isinstance(v, float) else v) for k, v in result.extra.items() if k != "std_noise"},
        "base_reduction": {
            "standard_names": list(base.standard_names),
            "independent": [int(i) for i in base.independent],
            "dependent": [int(i) for i in base.dependent],
            "beta": [[float(x) for x in row] for row in base.beta],
            "rank_tol": float(base.rank_tol),
        },
    }
    # std: noise and the friction law's model error (estimation/model_error_term.py); std_noise: noise alone
    for entry, sn in zip(d["base_parameters"], result.extra.get("std_noise", ())):
        entry["std_noise"] = _f(sn)
    if result.standard_values is not None:
        from .urdf_export import body_is_physical
        theta = result.standard_values
        layout = model.layout
        d["standard_parameters"] = {
            "values": {n: float(v) for n, v in zip(layout.names, theta)},
            "physically_consistent": {b: body_is_physical(theta[layout.inertial_slice(b)])[0]
                                      for b in layout.body_joints},
        }
        if result.bodies:     # physical estimate: per body mass, bounds, `bounds_active`, data share
            d["standard_parameters"]["bodies"] = result.bodies
    if result.quality is not None:
        d["model_quality"] = result.quality
    if validation is not None:
        d["validation"] = {"moving_threshold": validation.moving_threshold,
                           "joints": validation.as_dict()}
    if extra:
        d.update(extra)
    return d


def _cad_base(base, model):
    """The URDF's (CAD) values of the base parameters, or None where the model has none."""
    nominal = getattr(model, "nominal", None)
    if nominal is None or len(nominal) != len(base.standard_names):
        return None
    return base.project(np.asarray(nominal, float))


REQUIRED_KEYS = ("format_version", "method", "robot", "samples", "condition_number", "base_parameters",
                 "settings", "base_reduction")
END_KEY = "complete"     # written last: a file cut short lacks it


def check_complete(d, path) -> None:
    """A result dict read back from `path` has every section and, when it was written with
    the end marker's format, the marker (a file cut short does not)."""
    if not isinstance(d, dict) or not d:
        raise ConfigError(f"{path} is empty or not a mapping: a truncated or corrupt result; re-run "
                          "robot-ident identify")
    missing = [k for k in REQUIRED_KEYS if k not in d]
    if missing or (d.get("format_version", 0) >= 2 and d.get(END_KEY) is not True):
        what = f"no {', '.join(missing)}" if missing else f"no {END_KEY!r} marker at its end"
        raise ConfigError(f"{path} is truncated or not a complete robot_ident result ({what}); re-run "
                          "robot-ident identify")


def write_result_yaml(folder: str | Path, data: dict) -> Path:
    data = {k: v for k, v in data.items() if k != END_KEY}
    data[END_KEY] = True
    text = yaml.safe_dump(data, sort_keys=False, width=1000)
    return atomic_write_text(Path(folder) / "result.yaml", text)


def identified_urdf_xml(model, result: IdentificationResult, warning: str | None = None) -> str | None:
    """The identified URDF text from the estimator's standard parameters (bodies that are not
    physically consistent, or implausible -- mass outside the default range, centre of mass
    far outside the link -- keep their CAD values and are listed in a comment), or None
    when the estimator only produced base parameters."""
    if result.standard_values is None:
        return None
    from ..estimation.body_bounds import implausible_bodies
    from .urdf_export import write_parameters
    if hasattr(model, "full_inertial"):     # a closed chain: tied blocks expanded onto the spanning tree
        xml, report = write_parameters(model.tree, model.full_inertial(result.standard_values))
    else:
        theta = np.array(result.standard_values, float)
        implausible = {} if result.bodies else implausible_bodies(model, theta)   # bodies: bounds applied
        for b in implausible:
            sl = model.layout.inertial_slice(b)
            theta[sl] = model.nominal[sl]
        xml, report = write_parameters(model, theta)
        report.kept_cad.update({b: f"implausible: {why}" for b, why in implausible.items()})
        report.written = [b for b in report.written if b not in implausible]
    note = (f"<!-- identified by robot_ident ({result.method}); bodies written: {', '.join(report.written)}"
            + (f"; kept CAD values: {', '.join(f'{b} ({why})' for b, why in report.kept_cad.items())}"
               if report.kept_cad else "") + " -->\n")
    if warning:
        note += f"<!-- WARNING: {warning.replace('--', '- -')} -->\n"
    head, sep, body = xml.partition("\n")
    return head + sep + note + body


def write_identified_urdf(folder: str | Path, model, result: IdentificationResult,
                          warning: str | None = None) -> Path | None:
    """identified.urdf (see identified_urdf_xml; `warning`: a comment line, e.g. the data
    do not determine the model) and its companion identified_joints.yaml (see
    identified_joint_terms), or None without standard parameters."""
    xml = identified_urdf_xml(model, result, warning)
    if xml is None:
        return None
    terms = identified_joint_terms(model, result)
    if terms is not None:
        atomic_write_text(Path(folder) / JOINT_TERMS_FILE, yaml.safe_dump(terms, sort_keys=False))
    return atomic_write_text(Path(folder) / "identified.urdf", xml)


JOINT_TERMS_FILE = "identified_joints.yaml"


def identified_joint_terms(model, result: IdentificationResult) -> dict | None:
    """What identified.urdf cannot carry, so that the two reproduce the result's predicted
    efforts: every motor's armature, Coulomb and viscous friction and offset (regrouped
    ones included: the first joint's armature merges with its body's Izz in the base
    parameters, but the physical estimate separates them), the coupling matrix of
    coupled groups, the Coulomb velocity scale, and the formula. None for a closed chain
    or a model with springs (result.yaml's standard parameters hold those)."""
    if result.standard_values is None or hasattr(model, "full_inertial") or hasattr(model, "springs"):
        return None
    layout = model.layout
    theta = np.asarray(result.standard_values, float)
    motors: dict = {}
    for name, v in zip(layout.names[layout.n_inertial:], theta[layout.n_inertial:]):
        motor, _, sym = name.rpartition(".")
        motors.setdefault(motor, {})[{"Ia": "armature", "Fc": "coulomb", "Fv": "viscous",
                                      "off": "offset"}.get(sym, sym)] = float(v)
    tr = model.transmission
    return {
        "note": "identified.urdf's rigid bodies plus these joint terms give the identified efforts: "
                "tau = RNEA(identified.urdf; q, qd, qdd) + M^T (armature * M qdd + coulomb * tanh(M qd / "
                "coulomb_velocity_scale) + viscous * M qd + offset), elementwise per motor, with M the motors' "
                "coupling (identity for joints that drive themselves); positions, velocities and efforts in "
                "joint order below (rad or m, N*m or N)",
        "method": result.method,
        "joints": list(model.joint_names),
        "motors": list(tr.motors),
        "coulomb_velocity_scale": float(model.friction.coulomb_velocity_scale),
        "motor_from_joint": np.asarray(tr.motor_from_joint, float).tolist(),
        "terms": {m: motors.get(m, {}) for m in tr.motors},
    }


def load_result(folder: str | Path) -> tuple[dict, BaseParameters, np.ndarray, np.ndarray]:
    """Read result.yaml: (raw dict, BaseParameters, values, std)."""
    path = Path(folder) / "result.yaml"
    if not path.is_file():
        raise ConfigError(f"no result.yaml in {folder}")
    try:
        d = safe_load_strict(path.read_text(encoding="utf-8"))
        check_complete(d, path)
        br = d["base_reduction"]
        names = [p["name"] for p in d["base_parameters"]]
        base = BaseParameters(tuple(br["standard_names"]), np.array(br["independent"], int),
                              np.array(br["dependent"], int),
                              np.array(br["beta"], float).reshape(len(br["independent"]), len(br["dependent"])),
                              tuple(names), float(br["rank_tol"]), float("nan"))
        values = np.array([float(p["value"]) for p in d["base_parameters"]])
        std = np.array([float(p["std"]) for p in d["base_parameters"]])
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML ({yaml_error_line(exc)}): a truncated or corrupt result") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"key {exc.args[0]!r} is missing" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"{path} is not a complete robot_ident result ({what})") from None
    return d, base, values, std
