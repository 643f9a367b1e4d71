"""The identification steps chained with one set of settings: processed data in,
IdentificationResult and ValidationReport out. The command line, the demo and the
ROS identification node all call these functions."""
from __future__ import annotations

from dataclasses import dataclass, field

from .base import BaseParameters
from .errors import ConfigError
from .estimation import ESTIMATORS, IdentificationResult, build_problem
from .model import RobotModel
from .signals import FilterOptions, ProcessedData
from .validation import ValidationReport, validate


@dataclass(frozen=True)
class IdentificationSettings:
    method: str = "wls"
    filter: FilterOptions = field(default_factory=FilterOptions)
    # Friction dead band: |qd| below this (rad/s or m/s) ...
    moving_threshold: float = 0.05
    # ... or closer than this to a velocity reversal (s); None -> 1 / filter cutoff.
    reversal_guard_s: float | None = None
    base_samples: int = 400
    base_seed: int = 0

    def __post_init__(self):
        if self.method not in ESTIMATORS:
            raise ConfigError(f"unknown identification method {self.method!r}; "
                              f"available: {', '.join(sorted(ESTIMATORS))}")
        if self.moving_threshold < 0:
            raise ConfigError(f"moving_threshold must be >= 0, got {self.moving_threshold}")

    @property
    def guard_s(self) -> float:
        return 1.0 / self.filter.cutoff_hz if self.reversal_guard_s is None else float(self.reversal_guard_s)


def base_parameters(model: RobotModel, settings: IdentificationSettings) -> BaseParameters:
    return BaseParameters.from_model(model, n_samples=settings.base_samples, seed=settings.base_seed)


def identify(model: RobotModel, data: ProcessedData, settings: IdentificationSettings,
             base: BaseParameters | None = None) -> IdentificationResult:
    base = base or base_parameters(model, settings)
    problem = build_problem(model, base, data, settings.moving_threshold, settings.guard_s)
    result = ESTIMATORS[settings.method](problem)
    result.extra.update({"moving_threshold": settings.moving_threshold,
                         "reversal_guard_s": settings.guard_s,
                         "rows_kept_fraction": problem.n_rows / (data.n_samples * model.n)})
    return result


def validate_result(result: IdentificationResult, model: RobotModel, data: ProcessedData,
                    settings: IdentificationSettings, noise_std=None) -> ValidationReport:
    return validate(result, model, data, settings.moving_threshold, noise_std, settings.guard_s)
