"""Source C's practical guidance (each link's mass as a fraction of the base, the base
speed the joint rates produce) and the rest-to-rest joint motion used by the
experiments."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...errors import ModelError
from .experiments import MomentumExperiment
from .model import FloatingBaseModel


# --------------------------------------------------------------------- guidance
@dataclass
class Guidance:
    base_mass: float
    link_masses: dict[str, float]
    link_ratios: dict[str, float]       # link mass / base mass
    arm_ratio: float                    # whole arm / base
    band: tuple[float, float]
    links_outside_band: list[str]
    base_speed: dict[str, dict[str, float]]   # per experiment: peak joint rate, base linear / angular speed

    def summary(self) -> str:
        lines = [f"base mass {self.base_mass:.3g} kg; arm {sum(self.link_masses.values()):.3g} kg "
                 f"= {100 * self.arm_ratio:.1f} % of the base",
                 "link mass / base mass: " + ", ".join(f"{j} {100 * r:.1f} %" for j, r in self.link_ratios.items()),
                 (f"all links inside the {100 * self.band[0]:.0f}-{100 * self.band[1]:.0f} % band (source C)"
                  if not self.links_outside_band else
                  f"outside the {100 * self.band[0]:.0f}-{100 * self.band[1]:.0f} % band: "
                  + ", ".join(self.links_outside_band)
                  + " (lighter: base motion hard to measure; heavier: base hard to control)")]
        for name, s in self.base_speed.items():
            lines.append(f"experiment {name}: peak joint rate {s['joint_rate']:.3g} rad/s "
                         f"({math.degrees(s['joint_rate']):.3g} deg/s) -> base {1000 * s['linear']:.3g} mm/s, "
                         f"{math.degrees(s['angular']):.3g} deg/s")
        return "\n".join(lines)


def guidance(model: FloatingBaseModel, theta: np.ndarray, experiments: Sequence[MomentumExperiment] = (),
             band: tuple[float, float] = (0.03, 0.30)) -> Guidance:
    """Source C's measurability guidance for parameters theta (e.g. the CAD guess): mass
    ratios, and for each experiment the peak base speeds its joint rates produce (from the
    momentum model with theta, not from the measured base twist)."""
    theta = np.asarray(theta, float)
    mb = float(theta[model.body_slice(model.base_name)][0])
    if not mb > 0:
        raise ModelError(f"base mass must be positive, got {mb}")
    masses = {j: float(theta[model.body_slice(j)][0]) for j in model.joint_names}
    ratios = {j: m / mb for j, m in masses.items()}
    outside = [j for j, r in ratios.items() if not band[0] <= r <= band[1]]
    speeds = {}
    for e in experiments:
        k = e.peak_index()
        tw = model.base_twist_at_rest_momentum(e.q[k], e.qd[k], theta)
        name = "+".join(e.driven) or f"#{len(speeds)}"
        speeds[name] = {"joint_rate": float(np.max(np.abs(e.qd[k]))), "linear": float(np.linalg.norm(tw[:3])),
                        "angular": float(np.linalg.norm(tw[3:]))}
    return Guidance(mb, masses, ratios, sum(masses.values()) / mb, band, outside, speeds)


def rest_to_rest(t: np.ndarray, duration: float, delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """7th-order rest-to-rest profile from 0 to delta in `duration` (zero rate, acceleration
    and jerk at both ends); constant after. Returns (position, rate, acceleration)."""
    tau = np.clip(np.asarray(t, float) / duration, 0.0, 1.0)
    s = 35 * tau ** 4 - 84 * tau ** 5 + 70 * tau ** 6 - 20 * tau ** 7
    ds = (140 * tau ** 3 - 420 * tau ** 4 + 420 * tau ** 5 - 140 * tau ** 6) / duration
    dds = (420 * tau ** 2 - 1680 * tau ** 3 + 2100 * tau ** 4 - 840 * tau ** 5) / duration ** 2
    return delta * s, delta * ds, delta * dds
