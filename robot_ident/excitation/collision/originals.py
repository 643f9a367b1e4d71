"""The collision geometry as the URDF writes it (meshes as BVH models, primitives as they
are): the truth the convex hulls approximate.

Hulls drive the optimiser (hulls.py); whether a pose keeps a pair's margin is decided here
wherever a hull is closer than the margin: the hull contains the original geometry, so a
hull distance at or above the margin proves the original's, and below it the original
meshes are measured (coal's BVH distance: 0 for meshes in contact, signed for a mesh
against a primitive such as the floor's half-space). A hull contact that the meshes do not
share is a false alarm refined away here, never a reason to drop the pair.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from ._coal import coal

_Transform = getattr(coal, "Transform3s", None) or coal.Transform3f     # coal | hpp-fcl


class OriginalGeometry:
    """The original geometry objects, grouped as the hull model's geometries: group k holds
    the indices (in this model) of what hull-model geometry k stands for."""

    def __init__(self, model, geom_model, groups):
        self.model, self.data = model, model.createData()
        self.geom_model = geom_model
        self.geom_data = pin.GeometryData(geom_model)
        self.groups = [tuple(int(i) for i in g) for g in groups]
        self._req = coal.DistanceRequest()
        self._req.enable_signed_distance = True

    def _distance(self, a: int, b: int) -> float:
        ga, gb = self.geom_model.geometryObjects[a], self.geom_model.geometryObjects[b]
        Ma, Mb = self.geom_data.oMg[a], self.geom_data.oMg[b]
        res = coal.DistanceResult()
        return float(coal.distance(ga.geometry, _Transform(Ma.rotation, Ma.translation),
                                   gb.geometry, _Transform(Mb.rotation, Mb.translation), self._req, res))

    def distances(self, Qpin, pairs, mask=None) -> np.ndarray:
        """(N, P) distances of the original geometry of hull-model pairs `pairs` ([(i, j)]) at
        Pinocchio configurations `Qpin`; with `mask` (N, P) only the True entries (NaN elsewhere)."""
        N, P = len(Qpin), len(pairs)
        out = np.full((N, P), np.nan)
        for s in range(N):
            ks = range(P) if mask is None else np.flatnonzero(mask[s])
            if len(ks) == 0:
                continue
            pin.updateGeometryPlacements(self.model, self.data, self.geom_model, self.geom_data, Qpin[s])
            for k in ks:
                i, j = pairs[k]
                out[s, k] = min(self._distance(a, b) for a in self.groups[i] for b in self.groups[j])
        return out
