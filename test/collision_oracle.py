"""Independent collision checker for the tests (deliberately shares no code with robot_ident).

It uses Pinocchio and coal directly on the URDF's original collision geometry (no convex hulls):

- contact: ``coal.collide`` on every checked pair at every pose (through ``pin.computeCollisions``), so no
  sampled contact can be missed; a pair in contact gets ``min(coal.distance, 0)`` at those poses (coal returns
  0 for two intersecting meshes, a negative penetration for a mesh against a primitive shape);
- clearance: the exact coal distance, but not at every pose. It is computed at the first and the last pose
  and the gaps are bisected until no skipped pose can be closer than the smallest distance found (or than
  `only_below`). A pose m is skipped on the bound ``d(m) >= d(c) - disp(c, m)`` from a computed neighbour c,
  where ``disp`` is the largest displacement of one body in the other's frame: with the body inside the
  ball (o, r) in its own frame and the relative placements (R, t) of the two bodies,
  ``disp <= |R_m o + t_m - R_c o - t_c| + r ||R_m - R_c||`` and ``||R_m - R_c|| = sqrt(3 - trace(R_c^T R_m))``.
  So the reported minimum is exact (to 1e-6 m) over all the poses, not only over those computed. Where a
  distance stays nearly constant (rotationally symmetric links) every pose is computed: ``only_below``;
- floor: the exact lowest point (the mesh vertices, a box's corner, numpy) or coal's distance to a
  half-space for another primitive shape; negative below the floor.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import combinations
from pathlib import Path

import numpy as np
import pinocchio as pin

try:
    import coal
except ImportError:  # Pinocchio 3 ships coal under its former name
    import hppfcl as coal

_Transform = getattr(coal, "Transform3s", None) or coal.Transform3f
_TOL = 1e-6  # m: the reported minimum distance of a pair is exact to this


def mesh_clearance(urdf_path, joint_names, Q, package_dirs=(), srdf=None, floor=None, only_below=None) -> dict:
    """For joint positions Q (N, len(joint_names)) of the named joints (all other joints of the URDF at
    their neutral value), the minimum over the N poses of the distance of every checked link pair,
    {(link_a, link_b): (min_distance, index_of_pose)}; contact gives a distance <= 0.

    Checked pairs: every pair of links that carry <collision> geometry, except links rigidly attached to
    each other (same Pinocchio joint) and links whose joints are parent and child in the kinematic tree
    (adjacent bodies, i.e. parentJoint of one == model.parents[parentJoint of the other]), and the pairs an
    SRDF's <disable_collisions link1 link2> names (if srdf given). With `floor` (a z value in the root
    frame) every moving link is also checked against a half-space z >= floor (pair (link, 'floor')).

    package_dirs: the folders holding the packages of package:// mesh paths (a relative path is taken
    relative to the URDF's folder). A key's links are in the order of their first <collision> in the model.
    The distance of a link pair is the smallest over its geometries; the pose index is the first pose
    reaching it (the first contact). Every contact is found. A distance is exact (to 1e-6 m) over all N
    poses, or, with `only_below`, exact where it is < only_below: a reported d >= only_below then only
    tells that the true minimum is >= only_below (faster: near-constant distances above only_below are not
    searched pose by pose; 5001 poses of a trajectory take ~2 s instead of up to ~25 s)."""
    model = pin.buildModelFromUrdf(str(urdf_path))
    dirs = [str(p) for p in package_dirs] + [str(Path(urdf_path).resolve().parent)]  # + relative mesh paths
    gm = pin.buildGeomFromUrdf(model, str(urdf_path), pin.COLLISION, package_dirs=dirs)
    geoms = gm.geometryObjects
    pairs = _checked_pairs(model, gm, srdf)
    flat = [ij for v in pairs.values() for ij in v]
    R, t, hit = _placements(model, gm, _configurations(model, joint_names, Q), flat)
    col = {ij: k for k, ij in enumerate(flat)}
    out = {}
    for key, ijs in pairs.items():
        best = (np.inf, -1)
        for i, j in ijs:
            best = min(best, _pair_min(geoms[i].geometry, geoms[j].geometry, R[:, i], t[:, i], R[:, j], t[:, j],
                                       hit[:, col[i, j]], min(best[0], np.inf if only_below is None else only_below)))
        out[key] = best
    if floor is not None:
        for g, obj in enumerate(geoms):
            if obj.parentJoint != 0:
                z = _floor_clearance(obj.geometry, R[:, g], t[:, g], floor)
                n = int(np.argmin(z))
                key = (model.frames[obj.parentFrame].name, "floor")
                out[key] = min(out.get(key, (np.inf, -1)), (float(z[n]), n))
    return out


def trajectory_clearance(urdf_path, joint_names, traj, dt=1e-3, **kw) -> dict:
    """mesh_clearance over traj.sample(t)[0] at t = 0, dt, 2dt, ..., duration (both ends included);
    the pose index replaced by the time in seconds. traj has .duration and .sample(t) -> (q, qd, qdd)
    with q of shape (len(t), n)."""
    T = float(traj.duration)
    times = np.minimum(np.arange(int(np.ceil(T / dt - 1e-9)) + 1) * dt, T)
    res = mesh_clearance(urdf_path, joint_names, np.asarray(traj.sample(times)[0]), **kw)
    return {k: (d, float(times[n])) for k, (d, n) in res.items()}


# ----------------------------------------------------------------------------------------------- helpers
def _checked_pairs(model, gm, srdf):
    """{(link_a, link_b): [(geometry i, geometry j), ...]} of the pairs to check."""
    off = set()
    if srdf is not None:
        for e in ET.parse(str(srdf)).getroot().iter("disable_collisions"):
            off.add(frozenset((e.get("link1"), e.get("link2"))))
    geoms = gm.geometryObjects
    link = [model.frames[g.parentFrame].name for g in geoms]
    pairs = {}
    for i, j in combinations(range(len(geoms)), 2):
        a, b = geoms[i].parentJoint, geoms[j].parentJoint
        if a == b or model.parents[a] == b or model.parents[b] == a or frozenset((link[i], link[j])) in off:
            continue
        pairs.setdefault((link[i], link[j]), []).append((i, j))
    return pairs


def _configurations(model, joint_names, Q):
    """Full configurations (N, model.nq): the named joints from Q, the others neutral."""
    Q = np.atleast_2d(np.asarray(Q, dtype=float))
    if Q.shape[1] != len(joint_names):
        raise ValueError(f"Q has {Q.shape[1]} columns for {len(joint_names)} joints")
    X = np.tile(pin.neutral(model), (len(Q), 1))
    for k, name in enumerate(joint_names):
        if not model.existJointName(name):
            raise KeyError(f"no joint {name!r} in the URDF")
        jm = model.joints[model.getJointId(name)]
        if jm.nq == 1:
            X[:, jm.idx_q] = Q[:, k]
        elif jm.nq == 2:  # continuous joint: (cos, sin)
            X[:, jm.idx_q], X[:, jm.idx_q + 1] = np.cos(Q[:, k]), np.sin(Q[:, k])
        else:
            raise ValueError(f"joint {name!r} has nq = {jm.nq}; only 1-dof joints are supported")
    return X


def _placements(model, gm, X, pairs):
    """World rotations (N, G, 3, 3) and translations (N, G, 3) of the geometries, and the collide flags
    (N, len(pairs)) of the pairs."""
    for i, j in pairs:
        gm.addCollisionPair(pin.CollisionPair(i, j))
    data, gd = model.createData(), pin.GeometryData(gm)
    for req in gd.collisionRequests:
        req.security_margin = 0.0
    N, G = len(X), len(gm.geometryObjects)
    R, t, hit = np.empty((N, G, 3, 3)), np.empty((N, G, 3)), np.zeros((N, len(pairs)), dtype=bool)
    for n, q in enumerate(X):
        if pin.computeCollisions(model, data, gm, gd, q, False):
            hit[n] = [r.isCollision() for r in gd.collisionResults]
        for g in range(G):
            R[n, g], t[n, g] = gd.oMg[g].rotation, gd.oMg[g].translation
    return R, t, hit


def _distance(ga, Ra, ta, gb, Rb, tb):
    return coal.distance(ga, _Transform(Ra, ta), gb, _Transform(Rb, tb), coal.DistanceRequest(),
                         coal.DistanceResult())


def _ball(geo):
    """Center and radius, in the geometry's frame, of a ball that holds it."""
    if hasattr(geo, "vertices"):
        V = np.asarray(geo.vertices())
        o = (V.min(0) + V.max(0)) / 2
        return o, float(np.linalg.norm(V - o, axis=1).max())
    geo.computeLocalAABB()
    return np.asarray(geo.aabb_center), float(geo.aabb_radius)


def _pair_min(ga, gb, Ra, ta, Rb, tb, hit, bound):
    """(min distance, first pose) of two geometries over the poses: the true minimum is
    >= min(reported - _TOL, bound). Bisects the poses from both ends."""
    def dist(n):
        return _distance(ga, Ra[n], ta[n], gb, Rb[n], tb[n])

    if hit.any():  # distance <= 0 at the contacts, > 0 elsewhere: the minimum is among the contacts
        idx = np.flatnonzero(hit)
        d = [min(dist(n), 0.0) for n in idx]
        k = int(np.argmin(d))
        return d[k], int(idx[k])
    (oa, ra), (ob, rb) = _ball(ga), _ball(gb)
    Rr = np.einsum("nji,njk->nik", Ra, Rb)  # b in a's frame
    tr = np.einsum("nji,nj->ni", Ra, tb - ta)
    cb = Rr @ ob + tr  # centre of b's ball in a's frame
    ca = np.einsum("nji,nj->ni", Rr, oa - tr)  # centre of a's ball in b's frame

    def disp(c, m):
        rot = np.sqrt(np.clip(3.0 - np.einsum("nij,nij->n", Rr[c], Rr[m]), 0.0, None))
        return np.minimum(np.linalg.norm(cb[m] - cb[c], axis=1) + rb * rot,
                          np.linalg.norm(ca[m] - ca[c], axis=1) + ra * rot) + 1e-9

    N = len(Ra)
    d = np.full(N, np.nan)
    todo = np.unique([0, N - 1])
    while len(todo):
        d[todo] = [dist(n) for n in todo]
        done, m = np.flatnonzero(~np.isnan(d)), np.flatnonzero(np.isnan(d))
        if not len(m):
            break
        k = np.searchsorted(done, m)
        lo, hi = done[k - 1], done[k]
        lower = np.maximum(d[lo] - disp(lo, m), d[hi] - disp(hi, m))
        gaps = np.unique(k[lower < min(np.nanmin(d) - _TOL, bound)])
        todo = (done[gaps - 1] + done[gaps]) // 2
    n = int(np.nanargmin(d))
    return float(d[n]), n


def _floor_clearance(geo, R, t, floor):
    """Signed height above z = floor of the lowest point of the geometry at each pose."""
    if hasattr(geo, "vertices"):
        V = np.asarray(geo.vertices())
        step = max(1, 4_000_000 // len(V))
        low = np.concatenate([(R[s:s + step, 2, :] @ V.T).min(1) for s in range(0, len(R), step)])
        return low + t[:, 2] - floor
    if isinstance(geo, coal.Box):  # centred on its frame: its support in -z
        return t[:, 2] - np.abs(R[:, 2, :]) @ np.asarray(geo.halfSide) - floor
    if isinstance(geo, coal.Sphere):
        return t[:, 2] - geo.radius - floor
    below = coal.Halfspace(np.array([0.0, 0.0, 1.0]), floor)  # the solid z <= floor
    return np.array([_distance(geo, R[n], t[n], below, np.eye(3), np.zeros(3)) for n in range(len(R))])
