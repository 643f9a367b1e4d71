"""Does the identified model still hold? Health of a model at work, from the momentum
observer's output r (monitor/observer.py) on samples without contact.

Without contact, r is what the model leaves unexplained, low-passed. Three questions:

* **residual**: the RMS of r over the last `window_s`, over the joint's noise band (the
  identification's residual RMS). The observer only filters, so on data like the
  identification's this ratio is at most about 1: below it where the residual is noise
  the observer filters away, near it where it is a slow model error the observer passes
  (a real arm's: 10 s windows of the KUKA LWR4+'s own validation recording reach 1.24,
  bench/monitor.py). WARN above 1.5 (the unexplained effort grew by half), ERROR above 2.
* **friction drift**: Coulomb and viscous friction re-estimated recursively (the package's
  RLS, `estimation.recursive`, forgetting with a time constant of `drift_time_s`) from
  ``-r = dFc tanh(qd / v_s) + dFv qd`` while the rest of the model stays fixed. WARN when
  the change costs the joint more than its band at the window's RMS speed (and the data
  have moved the joint both ways).
* **payload change**: a mass at the last body: ``-r = G(q) [dm, dm c]`` with G the
  gravity columns of the last body, by the same RLS. WARN when the change's efforts exceed
  a joint's band (RMS over the window) and dm is more than 3 of its standard deviations.

Updates are taken at most every `update_period_s` (drifts are slow; an RLS step per
sample at 1 kHz would cost more than the observer).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..estimation.recursive import RecursiveLeastSquares

LEVELS = ("OK", "WARN", "ERROR")


@dataclass(frozen=True)
class HealthSettings:
    window_s: float = 10.0
    drift_time_s: float = 60.0
    update_period_s: float = 0.01
    residual_warn: float = 1.5
    residual_error: float = 2.0


@dataclass(frozen=True)
class HealthFinding:
    level: str
    joint: str
    reason: str

    def as_dict(self) -> dict:
        return {"level": self.level, "joint": self.joint, "reason": self.reason}


class ModelHealth:
    def __init__(self, model, band, settings: HealthSettings | None = None):
        self.model = model
        self.joints = tuple(model.joint_names)
        self.band = np.asarray(band, float)
        self.s = settings or HealthSettings()
        n = model.n
        lay = model.layout
        self.vs = float(model.friction.coulomb_velocity_scale)
        self.has_friction = "Fc" in lay.actuator_symbols and lay.actuator_joints == self.joints
        lam = math.exp(-self.s.update_period_s / self.s.drift_time_s)
        last = lay.body_joints[-1]
        sl = lay.inertial_slice(last)
        self._g_cols = np.arange(sl.start, sl.start + 4)          # m, mx, my, mz of the last body
        # one RLS for both, so that neither takes the other's effect: [dFc, dFv per joint | dm, dm c]
        self._nf = 2 * n if self.has_friction else 0
        self.drift = RecursiveLeastSquares(self._nf + 4, n, lam, sigma=self.band, p0=1e6)
        self._window: deque = deque()        # (t, r, qd, gravity columns, moving) of the kept updates
        self._last_update = -math.inf
        self._both_ways = np.zeros((2, n), dtype=bool)

    def update(self, t, q, qd, r, contact, moving) -> None:
        """Samples (t (N,), q, qd, r (N, n), contact (N,) bool, moving (N, n) bool: the joint
        is outside its friction dead band) in time order."""
        t = np.atleast_1d(t)
        take = []
        for k in range(t.size):
            if contact[k] or t[k] - self._last_update < self.s.update_period_s:
                continue
            self._last_update = t[k]
            take.append(k)
        if not take:
            return
        take = np.asarray(take)
        q, qd, r = np.atleast_2d(q)[take], np.atleast_2d(qd)[take], np.atleast_2d(r)[take]
        moving = np.atleast_2d(moving)[take]
        n = len(self.joints)
        G = self.model.regressor(q, np.zeros_like(qd), np.zeros_like(qd)).reshape(len(take), n, -1)[:, :, self._g_cols]
        for k in range(len(take)):
            rows = np.flatnonzero(moving[k])
            self._window.append((t[take[k]], r[k], qd[k], G[k], moving[k]))
            if not rows.size:
                continue
            W = np.zeros((n, self._nf + 4))
            if self._nf:
                W[np.arange(n), 2 * np.arange(n)] = np.tanh(qd[k] / self.vs)
                W[np.arange(n), 2 * np.arange(n) + 1] = qd[k]
            W[:, self._nf:] = G[k]
            self.drift.update(W[rows], -r[k, rows], rows)
        self._both_ways[0] |= (qd > 3 * self.vs).any(axis=0)
        self._both_ways[1] |= (qd < -3 * self.vs).any(axis=0)
        while self._window and self._window[0][0] < t[take[-1]] - self.s.window_s:
            self._window.popleft()

    def summary(self, band=None) -> dict:
        """Residual ratios (against `band`, default the model's), friction changes, the payload
        change and the findings."""
        band = self.band if band is None else np.asarray(band, float)
        findings: list[HealthFinding] = []
        out: dict = {}
        if not self._window:
            return {"level": "OK", "findings": [], "note": "no samples without contact yet"}
        R = np.array([w[1] for w in self._window])
        QD = np.array([w[2] for w in self._window])
        MV = np.array([w[4] for w in self._window])
        moved = MV.sum(axis=0)
        ratio = np.where(moved > 0, np.sqrt((R ** 2 * MV).sum(axis=0) / np.maximum(moved, 1)) / band, np.nan)
        # None: the joint did not leave its friction dead band in the window (nothing to judge)
        out["residual_ratio"] = {j: (float(f"{v:.4g}") if np.isfinite(v) else None)
                                 for j, v in zip(self.joints, ratio)}
        for j, v in zip(self.joints, ratio):
            if v > self.s.residual_error:
                findings.append(HealthFinding("ERROR", j, f"residual {v:.2f} x the identification's RMS: the model "
                                                          "no longer holds (wear, a new tool, a loose belt?)"))
            elif v > self.s.residual_warn:
                findings.append(HealthFinding("WARN", j, f"residual {v:.2f} x the identification's RMS"))
        est = self.drift.estimate
        if self._nf:
            dfc, dfv = est[0:self._nf:2], est[1:self._nf:2]
            out["friction_change"] = {j: {"Fc": float(f"{a:.4g}"), "Fv": float(f"{b:.4g}")}
                                      for j, a, b in zip(self.joints, dfc, dfv)}
            cost = np.sqrt(np.mean((dfc * np.tanh(QD / self.vs) + dfv * QD) ** 2, axis=0))
            for k, j in enumerate(self.joints):
                if cost[k] > band[k] and self._both_ways[:, k].all():
                    findings.append(HealthFinding("WARN", j, f"friction drift: Coulomb {dfc[k]:+.3g}, viscous "
                                                             f"{dfv[k]:+.3g} against the identified model"))
        x = est[self._nf:]
        std = np.sqrt(np.maximum(np.diag(self.drift.covariance())[self._nf:], 0.0))
        eff = np.sqrt(np.mean(np.array([w[3] @ x for w in self._window]) ** 2, axis=0))
        out["payload_change"] = {"mass": float(f"{x[0]:.4g}"), "mass_std": float(f"{std[0]:.3g}")}
        worst = int(np.argmax(eff / band))
        if abs(x[0]) > 3 * std[0] and eff[worst] > band[worst]:
            findings.append(HealthFinding("WARN", self.joints[worst], f"payload change: {x[0]:+.3g} kg at the last "
                                                                      f"body ({eff[worst]:.3g} RMS on this joint)"))
        level = max((LEVELS.index(f.level) for f in findings), default=0)
        out["level"] = LEVELS[level]
        out["findings"] = [f.as_dict() for f in findings]
        return out
