"""MuJoCo truth for springs between links (model/spring.py): one spatial tendon per spring
through two sites, with MuJoCo's own tendon stiffness and spring length (free length), so
the simulated spring force comes from MuJoCo, not from our torque columns."""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .mujoco_arm import _set_scalar_or_first


def spring_hook(springs, stiffness, free_length):
    """A `SimulatedArm(spec_hook=...)` that adds the springs of `springs` (a SpringSet)
    with the given true stiffness [N/m] and free length [m] per spring."""
    stiffness = np.broadcast_to(np.asarray(stiffness, float), (len(springs.specs),))
    free_length = np.broadcast_to(np.asarray(free_length, float), (len(springs.specs),))

    def hook(spec):
        bodies = {b.name: b for b in spec.bodies}
        for k, s in enumerate(springs.specs):
            sites = []
            for end, (link, point) in enumerate(((s.link_a, s.point_a), (s.link_b, s.point_b))):
                body = bodies.get(link)
                if body is None:
                    raise ModelError(f"spring {s.name!r}: the MuJoCo model has no body {link!r}")
                site = body.add_site()
                site.name = f"{s.name}_{'ab'[end]}"
                site.pos = np.asarray(point, float)
                sites.append(site.name)
            t = spec.add_tendon()
            t.name = s.name
            _set_scalar_or_first(t, "stiffness", float(stiffness[k]))
            sl = np.atleast_1d(t.springlength)
            t.springlength = np.full(sl.shape, float(free_length[k])) if sl.size > 1 else float(free_length[k])
            for name in sites:
                t.wrap_site(name)

    return hook


def true_free_length(springs, values) -> np.ndarray:
    """Free length L_ref - F0 / K of each spring from its (K, F0) values."""
    v = np.asarray(values, float).reshape(-1, 2)
    with np.errstate(divide="ignore"):
        return springs.reference_lengths - v[:, 1] / v[:, 0]
