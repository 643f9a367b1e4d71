"""The identification steps chained with one set of settings: processed data in,
IdentificationResult and ValidationReport out. The command line, the demo and the
ROS identification node all call these functions."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import defaults
from ..data.signals import FilterOptions, ProcessedData
from ..errors import ConfigError, SignalError
from ..model.base import BaseParameters
from ..model.robot import FrictionOptions, RobotModel
from ..util.config_keys import check_keys
from . import ESTIMATORS, IdentificationResult, build_problem
from .body_bounds import PhysicalBounds, parse_physical_bounds
from .validation import ValidationReport, validate


@dataclass(frozen=True)
class IdentificationSettings:
    method: str = defaults.METHOD
    filter: FilterOptions = field(default_factory=FilterOptions)
    # Friction dead band: |qd| below this (rad/s or m/s) ...
    moving_threshold: float = 0.05
    # ... or closer than this to a velocity reversal (s); None -> 1 / filter cutoff.
    reversal_guard_s: float | None = None
    base_samples: int = 400
    base_seed: int = 0
    # Plausibility bounds of the physical estimate (`identification: physical:`).
    physical: PhysicalBounds = field(default_factory=PhysicalBounds)
    # The measured velocity's use (`filter.use_measured_velocity`): 'auto' (used unless it lags
    # dq/dt, estimation/recording_checks.py), 'measured' (true) or 'positions' (false).
    measured_velocity: str = "auto"

    def __post_init__(self):
        if self.method not in ESTIMATORS:
            raise ConfigError(f"unknown identification method {self.method!r}; "
                              f"available: {', '.join(sorted(ESTIMATORS))}")
        if self.measured_velocity not in ("auto", "measured", "positions"):
            raise ConfigError(f"measured_velocity must be auto, measured or positions, got {self.measured_velocity!r}")
        if self.moving_threshold < 0:
            raise ConfigError(f"moving_threshold must be >= 0, got {self.moving_threshold}")

    @property
    def guard_s(self) -> float:
        return 1.0 / self.filter.cutoff_hz if self.reversal_guard_s is None else float(self.reversal_guard_s)


def base_parameters(model: RobotModel, settings: IdentificationSettings) -> BaseParameters:
    return BaseParameters.from_model(model, n_samples=settings.base_samples, seed=settings.base_seed)


def identify(model: RobotModel, data: ProcessedData, settings: IdentificationSettings,
             base: BaseParameters | None = None) -> IdentificationResult:
    """Identify from rows in memory (the row-based estimators of the one pipeline, the demos)."""
    from .model_error_term import add_model_error, left_out_rows
    from .structure_check import check_structure_rows
    base = base or base_parameters(model, settings)
    problem = build_problem(model, base, data, settings.moving_threshold, settings.guard_s)
    result = run_estimator(problem, settings)
    add_model_error(result, (problem.W, problem.y, problem.joint_of_row),
                    left_out_rows(model, data, problem, settings.moving_threshold, settings.guard_s))
    check_structure_rows(result, model, data, problem)
    # In-sample RMS against the *raw* measured effort on the identification rows (outside
    # the dead band): what a new recording can be compared with, since it includes the
    # sensor noise. The rows' regressor is the problem's, so nothing is rebuilt.
    raw = data.effort_raw[problem.sample_of_row, problem.joint_of_row]
    sq = (raw - problem.W @ result.values) ** 2
    counts = np.bincount(problem.joint_of_row, minlength=model.n)
    raw_rms = np.sqrt(np.bincount(problem.joint_of_row, weights=sq, minlength=model.n) / np.maximum(counts, 1))
    return finish_result(result, model, settings, raw_rms, np.sqrt(np.mean(problem.W ** 2, axis=0)),
                         float(np.sqrt(np.mean(problem.y ** 2))), problem.n_rows, data.n_samples)


def run_estimator(problem, settings: IdentificationSettings) -> IdentificationResult:
    """The settings' estimator on a problem (rows or compressed)."""
    options = {"bounds": settings.physical} if settings.method == "physical" else {}
    return ESTIMATORS[settings.method](problem, **options)


def finish_result(result: IdentificationResult, model, settings: IdentificationSettings, raw_rms, column_rms,
                  effort_rms: float, n_rows: int, n_samples: int) -> IdentificationResult:
    """The result's in-sample RMS against the raw effort per joint, whether the model is
    determined by the data (estimation/conditioning.py; `column_rms`, `effort_rms`: the
    RMS of the regressor's columns and of the efforts over the rows) and the dead band."""
    from .conditioning import assess_quality
    result.extra["raw_residual_rms"] = {j: float(v) for j, v in zip(model.joint_names, raw_rms)}
    result.quality = assess_quality(result, column_rms, effort_rms, model)
    result.extra.update({"moving_threshold": settings.moving_threshold, "reversal_guard_s": settings.guard_s,
                         "rows_kept_fraction": n_rows / max(n_samples * model.n, 1)})
    return result


def validate_result(result: IdentificationResult, model: RobotModel, data: ProcessedData,
                    settings: IdentificationSettings, noise_std=None) -> ValidationReport:
    return validate(result, model, data, settings.moving_threshold, noise_std, settings.guard_s)


# --------------------------------------------------------------------------- config
_IDENT_KEYS = {"method", "holdout", "filter", "dead_band", "model", "base_samples", "base_seed", "physical"}
_FILTER_KEYS = {"cutoff_hz", "order", "target_rate_hz", "trim_s", "use_measured_velocity"}
_DEAD_BAND_KEYS = {"velocity", "reversal_guard_s"}
_MODEL_KEYS = {"armature", "coulomb", "viscous", "offset", "coulomb_velocity_scale", "locked_positions",
               "armature_nominal"}


@dataclass(frozen=True)
class IdentificationConfig:
    """The `identification:` section of the parameter file, parsed and checked."""

    settings: IdentificationSettings
    friction: FrictionOptions
    holdout: float = defaults.HOLDOUT
    locked_positions: dict = field(default_factory=dict)
    armature_nominal: dict = field(default_factory=dict)


def _section(d, key: str, allowed: set, where: str) -> dict:
    value = d.get(key, {}) if isinstance(d, Mapping) else {}
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}.{key}: expected a mapping, got {value!r}")
    check_keys(value, allowed, f"{where}.{key}")
    return dict(value)


def _num(d: Mapping, key: str, where: str, default, positive=False, allow_none=False):
    if key not in d or (d[key] is None and allow_none):
        return default if key not in d else None
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}.{key}: expected a number, got {v!r}")
    if positive and v <= 0:
        raise ConfigError(f"{where}.{key}: must be positive, got {v!r}")
    return float(v)


def _flag(d: Mapping, key: str, where: str, default: bool) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise ConfigError(f"{where}.{key}: expected true or false, got {v!r}")
    return v


def identification_config(section: Mapping | None, where: str = "identification") -> IdentificationConfig:
    """Parse the `identification:` section (every key optional)."""
    section = dict(section or {})
    check_keys(section, _IDENT_KEYS, where)
    f = _section(section, "filter", _FILTER_KEYS, where)
    db = _section(section, "dead_band", _DEAD_BAND_KEYS, where)
    m = _section(section, "model", _MODEL_KEYS, where)
    fw, dw, mw = f"{where}.filter", f"{where}.dead_band", f"{where}.model"
    order = f.get("order", 4)
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise ConfigError(f"{fw}.order: expected a positive integer, got {order!r}")
    velocity = f.get("use_measured_velocity", "auto")
    if velocity not in ("auto", True, False):
        raise ConfigError(f"{fw}.use_measured_velocity: expected auto, true or false, got {velocity!r}")
    try:
        filt = FilterOptions(cutoff_hz=_num(f, "cutoff_hz", fw, 20.0, positive=True), order=order,
                             target_rate_hz=_num(f, "target_rate_hz", fw, 200.0, positive=True, allow_none=True),
                             trim_s=_num(f, "trim_s", fw, 0.2), use_measured_velocity=velocity is not False)
    except SignalError as exc:
        raise ConfigError(f"{fw}: {exc}") from None
    method = section.get("method", defaults.METHOD)
    if not isinstance(method, str):
        raise ConfigError(f"{where}.method: expected a name, got {method!r}")
    physical = parse_physical_bounds(section.get("physical"), f"{where}.physical")
    try:
        settings = IdentificationSettings(
            method=method, filter=filt, moving_threshold=_num(db, "velocity", dw, 0.05),
            reversal_guard_s=_num(db, "reversal_guard_s", dw, None, allow_none=True),
            base_samples=int(_num(section, "base_samples", where, 400, positive=True)),
            base_seed=int(_num(section, "base_seed", where, 0)),
            physical=physical, measured_velocity={"auto": "auto", True: "measured", False: "positions"}[velocity])
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    if settings.base_samples > 100_000:
        raise ConfigError(f"{where}.base_samples: at most 100000 (random states for the base-parameter "
                          f"reduction; 400 is plenty), got {settings.base_samples}")
    holdout = _num(section, "holdout", where, defaults.HOLDOUT)
    if not 0.0 <= holdout < 0.9:
        raise ConfigError(f"{where}.holdout: must be in [0, 0.9), got {holdout}")
    friction = FrictionOptions(armature=_flag(m, "armature", mw, True), coulomb=_flag(m, "coulomb", mw, True),
                               viscous=_flag(m, "viscous", mw, True), offset=_flag(m, "offset", mw, True),
                               coulomb_velocity_scale=_num(m, "coulomb_velocity_scale", mw, 0.01, positive=True))
    locked = {}
    for k, v in (m.get("locked_positions") or {}).items():
        locked[str(k)] = _num({k: v}, k, f"{mw}.locked_positions", 0.0)
    arm = {}
    for k, v in (m.get("armature_nominal") or {}).items():
        arm[str(k)] = _num({k: v}, k, f"{mw}.armature_nominal", 0.0)
    return IdentificationConfig(settings, friction, holdout, locked, arm)
