"""The payload folder: payload identification on processed data with the arm known, written
as payload.yaml (the 10 parameters in the payload frame with std, which of them the data
determine, mass / centre of mass / inertia, held-out RMS with and without the payload)
and identified.urdf (the arm's URDF with the payload as a fixed link). Shared by
`robot-ident identify --payload` (offline/payload_workflow.py) and the identification
node's ~/identify_payload service (online/payload_window.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..data.signals import concatenate
from ..errors import ConfigError
from ..estimation.payload import PayloadEstimate, PayloadModel, identify_payload, payload_config
from ..util.atomic import atomic_write_text
from .known_arm import KnownArm, arm_from_result, arm_from_urdf
from .payload_urdf import add_payload_link
from .staging import StagedFolder

PAYLOAD_KIND = "payload"


@dataclass
class PayloadOutcome:
    estimate: PayloadEstimate
    arm: KnownArm
    holdout_rms: dict | None          # joint -> {"with_payload": , "arm_only": }
    output: Path
    identified_urdf: str | None     # the arm's URDF with the payload link (None: not physical)
    sync_summary: str


def payload_rms(arm: KnownArm, pm: PayloadModel, est: PayloadEstimate, data, thr: float, guard: float) -> dict:
    """Per used joint RMS of raw effort minus prediction on `data` (outside the dead band),
    with the payload (and the nuisance corrections) and with the arm alone."""
    model = arm.model
    N, n = data.q.shape
    Y = model.regressor(data.q, data.qd, data.qdd)
    arm_tau = arm.predict_from_regressor(Y).reshape(N, n)
    extra = pm.columns(Y) @ est.values
    for name, v in zip(est.nuisance_names, est.nuisance_values):
        extra = extra + Y[:, model.layout.index(name)] * v
    full = arm_tau + extra.reshape(N, n)
    mask = data.moving_mask(thr, guard)
    out = {}
    for j in est.joints_used:
        k = model.joint_names.index(j)
        rows = mask[:, k]
        if rows.sum() < 2:
            continue
        out[j] = {"with_payload": float(np.sqrt(np.mean((data.effort_raw[rows, k] - full[rows, k]) ** 2))),
                  "arm_only": float(np.sqrt(np.mean((data.effort_raw[rows, k] - arm_tau[rows, k]) ** 2))),
                  "samples": int(rows.sum())}
    return out


def known_arm(cfg, icfg, result_dir=None, urdf=None) -> KnownArm:
    """The arm's model: a result folder wins over a URDF; its joints must be the config's."""
    from .model_loading import load_model

    if result_dir is not None:
        arm = arm_from_result(result_dir)
    elif urdf is not None:
        arm = arm_from_urdf(load_model(urdf, cfg, icfg))
    else:
        raise ConfigError("payload identification needs the arm's model: a result folder (--result, "
                          "payload.known_arm) or a URDF (--urdf, CAD values)")
    if set(arm.model.joint_names) != set(cfg.joints):
        raise ConfigError(f"the arm model ({arm.source}) has joints {', '.join(arm.model.joint_names)}, the "
                          f"config {cfg.source} lists {', '.join(cfg.joints)}")
    return arm


def payload_from_parts(parts, summary: str, cfg, icfg, arm: KnownArm, output, frame: str | None = None,
                       holdout: float | None = None, refit_friction: bool = False,
                       source: dict | None = None, input_checks: dict | None = None) -> PayloadOutcome:
    """Identify the payload on processed segments and write the payload folder (atomically);
    `input_checks` (the warning lines of the recording's checks, forced or not) is recorded."""
    model = arm.model
    section = dict(cfg.section("payload"))
    if frame is not None:
        section["frame"] = frame
    pcfg = payload_config(section, model)
    pm = PayloadModel(model, pcfg.frame)
    parts = [p if tuple(p.joint_names) == model.joint_names else _reorder(p, model.joint_names) for p in parts]
    frac = icfg.holdout if holdout is None else float(holdout)
    if not 0.0 <= frac < 0.9:
        raise ConfigError(f"holdout must be in [0, 0.9), got {frac}")
    data = concatenate(parts)
    cut = int(round((1.0 - frac) * data.n_samples))
    ident, valid = data.subset(np.arange(cut)), data.subset(np.arange(cut, data.n_samples))
    s = icfg.settings
    symbols = tuple(model.layout.actuator_symbols) if (refit_friction or not arm.knows_friction) else ("off",)
    est = identify_payload(model, pm, ident.q, ident.qd, ident.qdd, ident.effort,
                           ident.moving_mask(s.moving_threshold, s.guard_s), arm.predict_from_regressor,
                           nuisance_symbols=symbols)
    rms = None
    if valid is not None and valid.n_samples > 0:
        rms = payload_rms(arm, pm, est, valid, s.moving_threshold, s.guard_s)
    out = Path(output)
    doc = {"format": "robot_ident/payload", "arm_model": arm.source, "source": dict(source or {}),
           "holdout_fraction": frac, "nuisance_symbols": list(symbols), "payload": est.to_dict(),
           "synchronisation": summary}
    if input_checks is not None:
        doc["input_checks"] = input_checks
    if rms is not None:
        doc["holdout_rms"] = rms
    urdf_text = None
    if est.mass > 0:
        vals, note = est.physical_values()
        urdf_text = add_payload_link(arm.urdf_xml, pcfg.frame, vals, pcfg.name,
                                     note=f"payload identified by robot_ident ({arm.source})"
                                          + (f"; {note}" if note else ""))
    else:
        doc["payload"]["notes"].append("identified.urdf not written: the mass is not positive")
    # the folder is written aside and swapped into place: no half-written folder, and no
    # identified.urdf of an earlier payload left next to a new payload.yaml
    with StagedFolder(out, PAYLOAD_KIND) as tmp:
        if urdf_text is not None:
            atomic_write_text(tmp / "identified.urdf", urdf_text)
        atomic_write_text(tmp / "payload.yaml", yaml.safe_dump(doc, sort_keys=False, width=1000))
    return PayloadOutcome(est, arm, rms, out, urdf_text, summary)


def _reorder(p, joints):
    from ..data.signals import ProcessedData

    idx = [p.joint_names.index(j) for j in joints]
    return ProcessedData(p.t, tuple(joints), p.q[:, idx], p.qd[:, idx], p.qdd[:, idx], p.effort[:, idx],
                         p.effort_raw[:, idx])


def format_payload(est: PayloadEstimate, rms: dict | None = None) -> str:
    d = est.to_dict()
    c, cs = d["com"], d["com_std"]
    lines = [f"payload on {est.frame}: mass {est.mass:.4f} +- {est.std[0]:.4f} kg, centre of mass "
             f"[{c[0]*1e3:.2f}, {c[1]*1e3:.2f}, {c[2]*1e3:.2f}] +- [{cs[0]*1e3:.2f}, {cs[1]*1e3:.2f}, "
             f"{cs[2]*1e3:.2f}] mm",
             f"{'parameter':<10}{'value':>13}{'std':>12}  status"]
    for p in d["parameters"]:
        status = ("well determined" if p["well_determined"] else "determined, poorly (large std)"
                  if p["determined"] else "NOT determined by this motion")
        if d["misses_structure"] and p["determined"]:
            status += " -- NOT trustworthy: the model misses structure"
        lines.append(f"{p['name']:<10}{p['value']:>13.6g}{p['std']:>12.3g}  {status}")
    lines.append(f"joints used: {', '.join(est.joints_used)}; {est.n_rows} equations, rank {est.rank} of "
                 f"{10 + len(est.nuisance_names)} unknowns (with {', '.join(est.nuisance_names) or 'no'} "
                 f"nuisance terms)")
    if rms:
        lines.append("held-out RMS (raw effort):  " + ", ".join(
            f"{j} {v['with_payload']:.4g} (arm only {v['arm_only']:.4g})" for j, v in rms.items()))
    lines += [f"note: {n}" for n in d["notes"]]
    if d["misses_structure"]:
        lines.append("payload NOT trustworthy: the residual follows what the model lacks on joint "
                     + ", ".join(repr(f["joint"]) for f in d["misses_structure"]) + " (see the warning)")
    return "\n".join(lines)
