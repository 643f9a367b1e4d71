"""One convex hull per body of the reduced model: what the optimiser's distances use.

A hull contains the meshes and boxes it replaces (a conservative check: a distance kept
on hulls is kept on the meshes); hull-hull distances are signed (penetration depth from
EPA) with witness points and normal, which the optimiser needs, and an order of
magnitude faster than mesh-mesh BVH distances. The original geometry stays the truth
(originals.py): no trajectory is accepted on hulls alone where a hull is close.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from ...errors import ModelError
from ._coal import coal


def convex_hull(vertices: np.ndarray, name: str = ""):
    """coal Convex hull of a mesh's vertices (qhull, through coal; SciPy's qhull otherwise).

    Not ``BVHModel.buildConvexRepresentation``: in the pin wheel's coal it keeps every mesh
    vertex and the mesh's own adjacency, and the hill-climbing support function then stops
    in a local optimum: the UR5's upper arm pointing 0.39 m into the floor was reported
    3 cm above it."""
    vec3 = getattr(coal, "StdVec_Vec3s", None) or coal.StdVec_Vec3f      # coal | hpp-fcl (Pinocchio 3)
    pts = vec3()
    for v in vertices:
        pts.append(np.asarray(v, dtype=float))
    try:
        return coal.Convex.convexHull(pts, True, None)
    except Exception:  # noqa: BLE001 - coal built without qhull
        from scipy.spatial import ConvexHull
        try:
            h = ConvexHull(vertices)
        except Exception as exc:  # noqa: BLE001 - flat or degenerate mesh
            raise ModelError(f"collision mesh {name!r}: cannot build its convex hull: {exc}") from exc
        remap = {int(v): k for k, v in enumerate(h.vertices)}
        hp = vec3()
        for v in vertices[h.vertices]:
            hp.append(np.asarray(v, dtype=float))
        tris = coal.StdVec_Triangle()
        for a, b, c in h.simplices:
            tris.append(coal.Triangle(remap[int(a)], remap[int(b)], remap[int(c)]))
        return coal.Convex(hp, tris)


def _points(g) -> np.ndarray | None:
    """Points whose convex hull is the geometry, in its joint's frame (meshes: vertices; boxes:
    corners); None for curved primitives (kept as they are)."""
    geo = g.geometry
    if hasattr(geo, "vertices"):
        v = np.asarray(geo.vertices())
    elif isinstance(geo, coal.Box):
        h = np.asarray(geo.halfSide)
        v = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * h
    else:
        return None
    return v @ g.placement.rotation.T + g.placement.translation


# A body whose one hull is more than this many times the summed volume of its links' own
# hulls is hulled link by link: Baxter's torso with the locked right arm, head and pedestal
# made one hull that covered the left arm's shoulder, and no design was feasible.
SPLIT_VOLUME_RATIO = 2.0


def _hull_volume(points: np.ndarray) -> float:
    from scipy.spatial import ConvexHull
    try:
        return float(ConvexHull(points).volume)
    except Exception:  # noqa: BLE001 - flat or degenerate: no volume
        return 0.0


def body_hulls(model, gm):
    """One convex hull per body (joint of the reduced model) of all its mesh and box
    geometries; curved primitives stay separate. Returns the new GeometryModel and, per
    geometry, the links it covers and the indices of the original geometries (in `gm`) it
    stands for. A body's hull contains each of its parts (conservative), and the Panda's
    hand, fingers and link 7 then make one geometry instead of ten: far fewer pairs, and
    no same-body pairs. A body whose one hull would be SPLIT_VOLUME_RATIO times its links'
    (locked links spread around the robot) gets one hull per link instead; its hulls are
    still one body (no pairs among them)."""
    out, members, originals = pin.GeometryModel(), [], []
    groups: dict[int, list] = {}
    for k, g in enumerate(gm.geometryObjects):
        groups.setdefault(int(g.parentJoint), []).append((k, g))
    for joint, gs in groups.items():
        by_link: dict[str, list] = {}
        rest = []
        for k, g in gs:
            p = _points(g)
            link = model.frames[g.parentFrame].name
            if p is None:
                rest.append((k, g, link))
            else:
                by_link.setdefault(link, []).append((k, p))
        clusters = [list(by_link)] if by_link else []
        if len(by_link) > 1:
            whole = _hull_volume(np.vstack([p for parts in by_link.values() for _, p in parts]))
            own = sum(_hull_volume(np.vstack([p for _, p in parts])) for parts in by_link.values())
            if whole > SPLIT_VOLUME_RATIO * own:
                clusters = [[link] for link in by_link]
        for links in clusters:
            idx = [k for link in links for k, _ in by_link[link]]
            pts = np.vstack([p for link in links for _, p in by_link[link]])
            name = "+".join(links)
            first = gm.geometryObjects[idx[0]]
            out.addGeometryObject(pin.GeometryObject(name, joint, first.parentFrame, pin.SE3.Identity(),
                                                     convex_hull(pts, name)))
            members.append(tuple(links))
            originals.append(tuple(idx))
        for k, g, link in rest:
            out.addGeometryObject(pin.GeometryObject(g))
            members.append((link,))
            originals.append((k,))
    return out, members, originals
