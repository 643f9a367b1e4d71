"""The linear identification problem y = W x assembled from processed samples."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.signals import ProcessedData
from ..errors import IdentificationError
from ..model.base import BaseParameters
from ..model.robot import ParameterLayout, RobotModel
from ..model.transmission import dead_band_rows


@dataclass
class IdentificationProblem:
    """Stacked base regressor rows and measured efforts, with the joint of each row."""

    W: np.ndarray              # (M, p) base regressor, sample-major rows that were kept
    y: np.ndarray              # (M,) measured (filtered) efforts
    joint_of_row: np.ndarray   # (M,) index of the joint of each row
    joint_names: tuple[str, ...]
    param_names: tuple[str, ...]
    n_samples: int             # samples before masking
    base: BaseParameters
    # For estimators working on standard parameters (physically consistent, GA):
    W_standard: np.ndarray | None = None   # (M, n_std) standard regressor rows
    layout: ParameterLayout | None = None
    prior: np.ndarray | None = None         # CAD standard parameters (URDF nominal)
    sample_of_row: np.ndarray | None = None  # (M,) sample index of each row
    model: RobotModel | None = None         # for the bodies' geometry (physical estimate)
    # Compressed problems (estimation.compressed): W, y are per-joint R factors, whose
    # row sums of squares equal those of the true rows; these are the true row counts.
    row_counts: np.ndarray | None = None    # (n,) rows per joint
    # ... and where their rows can be re-read for the residual time series that the
    # autocorrelation-consistent covariance needs (estimation.store_hac.StoreRowSource)
    rows: object | None = None

    @property
    def compressed(self) -> bool:
        return self.row_counts is not None

    @property
    def n_rows(self) -> int:
        return int(np.sum(self.row_counts)) if self.row_counts is not None else self.W.shape[0]

    def rows_per_joint(self) -> np.ndarray:
        if self.row_counts is not None:
            return np.asarray(self.row_counts, dtype=float)
        return np.bincount(self.joint_of_row, minlength=len(self.joint_names)).astype(float)

    @property
    def n_params(self) -> int:
        return self.W.shape[1]


def require_rows(problem: IdentificationProblem, method: str) -> None:
    """Refuse a compressed problem in an estimator that needs every row."""
    if problem.compressed:
        raise IdentificationError(f"method {method!r} needs every regressor row, not the compressed problem of "
                                  "the streaming path (use ols, wls or physical, or the in-memory path)")


def build_problem(model: RobotModel, base: BaseParameters, data: ProcessedData,
                  moving_threshold: float | None = None,
                  reversal_guard_s: float = 0.0) -> IdentificationProblem:
    """Base regressor and efforts; rows of a joint inside its friction dead band
    (`ProcessedData.moving_mask`) are dropped, since no smooth friction model
    describes stiction and velocity reversals."""
    if tuple(data.joint_names) != tuple(model.joint_names):
        raise IdentificationError(f"data joints {data.joint_names} differ from the model's {model.joint_names}")
    if tuple(base.standard_names) != tuple(model.layout.names):
        raise IdentificationError("base parameters were computed for a different parameter layout")
    Ws = model.regressor(data.q, data.qd, data.qdd)
    y = data.effort.reshape(-1)
    joint = np.tile(np.arange(model.n), data.n_samples)
    sample = np.repeat(np.arange(data.n_samples), model.n)
    if moving_threshold is not None:
        keep = dead_band_rows(model, data, moving_threshold, reversal_guard_s).reshape(-1)
        Ws, y, joint, sample = Ws[keep], y[keep], joint[keep], sample[keep]
    W = base.regressor(Ws)
    for k, name in enumerate(model.joint_names):
        if not (joint == k).any():
            raise IdentificationError(
                f"joint {name!r} has no sample moving faster than {moving_threshold} "
                "(is it moving? if its positions change, the velocities the driver publishes may be zeros: set "
                "identification.filter.use_measured_velocity: false)")
    return IdentificationProblem(W, y, joint, model.joint_names, base.names, data.n_samples, base,
                                 Ws, model.layout, model.nominal.copy(), sample, model)
