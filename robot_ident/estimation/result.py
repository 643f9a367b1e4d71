"""IdentificationResult: estimated base parameters that know their names."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model.base import BaseParameters
from ..model.robot import RobotModel

PREDICT_BLOCK = 1000        # samples whose regressor `IdentificationResult.predict` holds at once


@dataclass
class IdentificationResult:
    method: str
    base: BaseParameters
    values: np.ndarray            # (p,) base parameter estimates
    std: np.ndarray               # (p,) standard deviations
    covariance: np.ndarray        # (p, p)
    condition_number: float       # of the (unweighted) identification matrix
    n_samples: int
    n_rows: int
    joint_names: tuple[str, ...]
    residual_rms: np.ndarray      # (n,) per joint, on the identification rows
    joint_sigma: np.ndarray       # (n,) per-joint effort noise estimate used for weights
    extra: dict = field(default_factory=dict)
    # Full standard parameters when the estimator produces them (physically consistent,
    # sensitivity + GA); None for base-parameter estimators (OLS, WLS, robust, RLS).
    standard_values: np.ndarray | None = None
    # Is the model determined by the data? (estimation/conditioning.assess_quality; set by
    # pipeline.identify)
    quality: dict | None = None
    # Per body (by joint) of a physically consistent estimate: mass, CAD mass, mass bounds,
    # centre of mass, its region, mass_data_share and bounds_active (see estimation/physical.py).
    bodies: dict | None = None
    # A two-level estimate (physical): its weighted least-squares level, and d values / d that
    # level's values (estimation/model_error_term.py maps that level's shifts through it). Not saved.
    data_fit: "IdentificationResult | None" = None
    data_gain: np.ndarray | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return self.base.names

    @property
    def relative_std(self) -> np.ndarray:
        """Standard deviation in percent of |value| (inf where the value is zero)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            r = 100.0 * self.std / np.abs(self.values)
        return np.where(np.isfinite(r), r, np.inf)

    def value(self, name: str) -> float:
        return float(self.values[self.names.index(name)])

    def predict(self, model: RobotModel, q, qd, qdd, block: int = PREDICT_BLOCK) -> np.ndarray:
        """Predicted efforts (N, n) with these base parameters, `block` samples at a time (the
        regressor of 4 000 samples of a 6-joint arm takes 16 MB)."""
        q, qd, qdd = (np.atleast_2d(np.asarray(x, float)) for x in (q, qd, qdd))
        out = np.empty((q.shape[0], model.n))
        for a in range(0, q.shape[0], block):
            b = a + block
            W = self.base.regressor(model.regressor(q[a:b], qd[a:b], qdd[a:b]))
            out[a:b] = (W @ self.values).reshape(-1, model.n)
        return out

    def actuator_parameters(self) -> dict[str, dict[str, dict[str, float]]]:
        """Actuator parameters that are base parameters by themselves (not regrouped):
        {joint or motor: {symbol: {value, std}}}. Regrouped ones (e.g. the first joint's armature,
        which merges with the first body's Izz) are absent."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for k, name in enumerate(self.names):
            if " " in name:
                continue
            joint, _, sym = name.rpartition(".")
            if sym in ("Ia", "Fc", "Fv", "off"):     # joints, or motors of coupled groups
                out.setdefault(joint, {})[sym] = {"value": float(self.values[k]), "std": float(self.std[k])}
        return out
