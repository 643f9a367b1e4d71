"""The arm's collision model: the URDF's ``<collision>`` geometry in a Pinocchio
GeometryModel (coal underneath), the environment, the checked pairs, and signed
distances with their exact gradients.

* The meshes and boxes of each body (a joint of the reduced model, with the links locked
  or fixed to it) are replaced by one convex hull (qhull through coal, `convex_hull`):
  a hull contains the mesh, so a distance kept on hulls is kept on the meshes (a
  conservative check), and hull-hull distances are signed (penetration depth from
  EPA) with witness points and normal, which the optimiser needs; they are also an
  order of magnitude faster than mesh-mesh BVH distances.
* Checked pairs: every pair of bodies of the reduced model (identified joints;
  locked links belong to their parent's body) that are neither the same body nor
  adjacent (one body's joint is the other's parent), each moving body against the
  environment (floor half-space, boxes), minus the SRDF's ``disable_collisions``
  pairs, minus the self pairs closer than the margin at the neutral pose (they touch
  by construction: the list is kept in ``skipped_neutral`` and printed). Environment
  pairs closer than the margin at the neutral pose stay checked (the neutral pose is
  then not allowed); if no sampled pose gets them farther than twice the margin, their
  own margin (``margins``, per pair) is their neutral clearance less 2 mm
  (``reduced_margin``, printed).
* ``distances(Q)`` gives (N, P) signed distances; ``distances_and_jacobians(Q)`` adds
  dd/dq, the contact normal through the frame Jacobians at the witness points:
  d d / d q = n . (J_p2 - J_p1), J_p = J_v - [p]x J_w (WORLD-frame joint Jacobians).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

try:                                # Pinocchio 4 ships coal; Pinocchio 3 hpp-fcl
    import coal
except ImportError:                 # pragma: no cover - Pinocchio 3
    import hppfcl as coal

from ...errors import ModelError
from .resolve import collision_links, resolve_collision_meshes
from .spec import CollisionSpec
from .srdf import disabled_link_pairs


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


def _body_hulls(model, gm):
    """One convex hull per body (joint of the reduced model) of all its mesh and box
    geometries; curved primitives stay separate. Returns the new GeometryModel and, per
    geometry, the links it covers. A body's hull contains each of its parts (conservative),
    and the Panda's hand, fingers and link 7 then make one geometry instead of ten: far
    fewer pairs, and no same-body pairs."""
    out, members = pin.GeometryModel(), []
    groups: dict[int, list] = {}
    for g in gm.geometryObjects:
        groups.setdefault(int(g.parentJoint), []).append(g)
    for joint, gs in groups.items():
        pts, links, rest = [], [], []
        for g in gs:
            p = _points(g)
            link = model.frames[g.parentFrame].name
            if p is None:
                rest.append((g, link))
            else:
                pts.append(p)
                if link not in links:
                    links.append(link)
        if pts:
            name = "+".join(links)
            first = next(g for g in gs if _points(g) is not None)
            out.addGeometryObject(pin.GeometryObject(name, joint, first.parentFrame, pin.SE3.Identity(),
                                                     convex_hull(np.vstack(pts), name)))
            members.append(tuple(links))
        for g, link in rest:
            out.addGeometryObject(pin.GeometryObject(g))
            members.append((link,))
    return out, members


@dataclass(frozen=True)
class Pair:
    first: str          # geometry names (robot geometry: <link>_<k>)
    second: str
    link1: str          # link (or environment object) names
    link2: str
    kind: str           # "self" or "environment"

    @property
    def label(self) -> str:
        return f"{self.first} - {self.second}"


class CollisionModel:
    """Collision geometry of a RobotModel plus the environment of a CollisionSpec."""

    def __init__(self, robot, spec: CollisionSpec | None = None, urdf_dir: str | None = None):
        self.robot = robot
        self.spec = spec or CollisionSpec()
        self.margin = float(self.spec.margin)
        if urdf_dir is None and robot.urdf_label != "<URDF string>":
            urdf_dir = os.path.dirname(os.path.abspath(robot.urdf_label))
        self.links_with_geometry = collision_links(robot.urdf_xml)
        self.has_geometry = bool(self.links_with_geometry)
        model = robot.model
        self.model, self.data = model, model.createData()
        gm = pin.GeometryModel()
        if self.has_geometry:
            xml = resolve_collision_meshes(robot.urdf_xml, robot.urdf_label, self.spec.package_dirs, urdf_dir)
            try:
                gm = pin.buildGeomFromUrdfString(model, xml, pin.COLLISION)
            except Exception as exc:  # Pinocchio raises ValueError/RuntimeError by version
                raise ModelError(f"Pinocchio cannot read the collision geometry of {robot.urdf_label}: {exc}") from exc
        gm, members = _body_hulls(model, gm)
        self.n_robot_geometries = len(gm.geometryObjects)
        env = []
        if self.has_geometry and self.spec.floor is not None:
            env.append(pin.GeometryObject("floor", 0, 0, pin.SE3.Identity(),
                                          coal.Halfspace(np.array([0.0, 0.0, 1.0]), float(self.spec.floor))))
        if self.has_geometry:
            for b in self.spec.boxes:
                env.append(pin.GeometryObject(f"box:{b.name}", 0, 0, b.placement(), coal.Box(*b.size)))
        for g in env:
            gm.addGeometryObject(g)
        self.geom_model = gm
        self._names = [g.name for g in gm.geometryObjects]
        self._link = [members[i][0] if i < self.n_robot_geometries else g.name
                      for i, g in enumerate(gm.geometryObjects)]
        self._members = [members[i] if i < self.n_robot_geometries else (g.name,)
                         for i, g in enumerate(gm.geometryObjects)]
        self._joint = np.array([g.parentJoint for g in gm.geometryObjects], dtype=int)
        self._build_pairs()

    # ------------------------------------------------------------------ pairs
    def _candidate_pairs(self):
        parents = self.model.parents
        ng, nr = len(self._names), self.n_robot_geometries
        cands, same, adjacent = [], 0, 0
        for i in range(nr):
            for j in range(i + 1, ng):
                ji, jj = int(self._joint[i]), int(self._joint[j])
                if j >= nr:                       # environment
                    if ji != 0:
                        cands.append((i, j, "environment"))
                    continue
                if ji == jj:
                    same += 1
                    continue
                if parents[ji] == jj or parents[jj] == ji:
                    adjacent += 1
                    continue
                cands.append((i, j, "self"))
        return cands, same, adjacent

    def _build_pairs(self):
        cands, self.n_same_body, self.n_adjacent = self._candidate_pairs()
        self.skipped_srdf: list[tuple[str, str]] = []
        if self.spec.srdf:
            dis = disabled_link_pairs(self.spec.srdf)
            keep = []
            for i, j, kind in cands:
                # a body pair is skipped when the SRDF disables every link pair between them
                if all(frozenset((a, b)) in dis for a in self._members[i] for b in self._members[j]):
                    self.skipped_srdf.append((self._names[i], self._names[j]))
                else:
                    keep.append((i, j, kind))
            cands = keep
        self._set_pairs(cands)
        self.skipped_neutral: list[tuple[str, str, float]] = []
        self.reduced_margin: list[tuple[str, str, float]] = []
        margins = {}
        if cands:
            d0 = self.distances(np.zeros((1, self.robot.n)))[0]
            Dr = None
            if any(k == "environment" and d < self.margin for (_, _, k), d in zip(cands, d0)):
                # An environment pair that never gets much farther than the margin from the
                # obstacle (best clearance over random poses < 2 margins: the UR5's upper arm
                # turns about an axis 8.9 cm above its mounting plane, its hull 2.9-3.2 cm above
                # it whatever the angle) keeps its clearance at the neutral pose less 2 mm
                # instead of the margin (listed). Otherwise the full margin (the neutral pose
                # is then simply not allowed).
                lo = np.where(np.isfinite(self.robot.limits.lower), self.robot.limits.lower, -np.pi)
                hi = np.where(np.isfinite(self.robot.limits.upper), self.robot.limits.upper, np.pi)
                Qr = np.random.default_rng(0).uniform(lo, hi, (64, self.robot.n))
                Dr = np.vstack([d0, self.distances(Qr)]).max(axis=0)
            keep = []
            for k, (i, j, kind) in enumerate(cands):
                d = float(d0[k])
                if d >= self.margin:
                    keep.append((i, j, kind))
                elif kind == "self":
                    self.skipped_neutral.append((self._names[i], self._names[j], d))
                else:
                    keep.append((i, j, kind))
                    if Dr[k] < 2 * self.margin:
                        margins[(i, j)] = max(0.0, d - 2e-3)
                        self.reduced_margin.append((self._names[i], self._names[j], margins[(i, j)]))
            self._set_pairs(keep)
        self.margins = np.array([margins.get((int(i), int(j)), self.margin) for i, j in zip(self._pi, self._pj)])

    def _set_pairs(self, cands):
        gm = self.geom_model
        gm.removeAllCollisionPairs()
        for i, j, _ in cands:
            gm.addCollisionPair(pin.CollisionPair(i, j))
        self.geom_data = pin.GeometryData(gm)
        for req in self.geom_data.distanceRequests:
            # Curved primitives (cylinders, spheres) converge only to the GJK tolerance: 1e-9 m
            # keeps the distances smooth enough for SLSQP's line search.
            req.enable_signed_distance = True
            req.gjk_tolerance = 1e-9
            req.epa_tolerance = 1e-9
        self.pairs = tuple(Pair(self._names[i], self._names[j], self._link[i], self._link[j], k)
                           for i, j, k in cands)
        self._pi = np.array([c[0] for c in cands], dtype=int)
        self._pj = np.array([c[1] for c in cands], dtype=int)
        self._ji = self._joint[self._pi] if cands else np.zeros(0, dtype=int)
        self._jj = self._joint[self._pj] if cands else np.zeros(0, dtype=int)

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    @property
    def active(self) -> bool:
        return self.has_geometry and self.n_pairs > 0

    def describe(self) -> str:
        """One paragraph for the command line: what is checked and what was skipped."""
        if not self.has_geometry:
            return "no <collision> geometry in the URDF: self-collisions and obstacles are NOT checked"
        env = (["floor z = %g m" % self.spec.floor] if self.spec.floor is not None else []) + \
              [f"box {b.name}" for b in self.spec.boxes]
        n_env = sum(p.kind == "environment" for p in self.pairs)
        s = (f"collision model: {self.n_robot_geometries} geometries (convex hulls), {self.n_pairs} pairs checked "
             f"({self.n_pairs - n_env} self, {n_env} environment: {', '.join(env) or 'none'}), "
             f"margin {self.margin:g} m; skipped: {self.n_same_body} same-body, {self.n_adjacent} adjacent")
        if self.spec.srdf:
            s += f", {len(self.skipped_srdf)} by the SRDF"
        if self.reduced_margin:
            s += (f"; structurally close to the environment, margin reduced for {len(self.reduced_margin)} pair(s): "
                  + "; ".join(f"{a} - {b} ({d:.3g} m)" for a, b, d in self.reduced_margin))
        if self.skipped_neutral:
            s += f", {len(self.skipped_neutral)} closer than the margin at the neutral pose: " + "; ".join(
                f"{a} - {b} ({d:.3g} m)" for a, b, d in self.skipped_neutral)
        return s

    def to_dict(self) -> dict:
        """The environment and the pair selection, for the trajectory file."""
        d = self.spec.environment_dict()
        d.update({"geometries": self.n_robot_geometries, "pairs": self.n_pairs,
                  "convex_hulls": True,
                  "skipped": {"same_body": self.n_same_body, "adjacent": self.n_adjacent,
                              "srdf": [list(p) for p in self.skipped_srdf],
                              "neutral_contact": [[a, b, d_] for a, b, d_ in self.skipped_neutral]},
                  "reduced_margins": [[a, b, m] for a, b, m in self.reduced_margin]})
        return d

    # -------------------------------------------------------------- distances
    def distances(self, Q) -> np.ndarray:
        """(N, P) signed distances of the checked pairs at joint positions Q (N, n)."""
        Q = np.atleast_2d(np.asarray(Q, dtype=float))
        out = np.empty((len(Q), self.n_pairs))
        if self.n_pairs == 0:
            return out
        m, d, gm, gd, to_q = self.model, self.data, self.geom_model, self.geom_data, self.robot.to_pinocchio_q
        res = gd.distanceResults
        for s, q in enumerate(Q):
            pin.computeDistances(m, d, gm, gd, to_q(q))
            out[s] = [r.min_distance for r in res]
        return out

    def distances_and_jacobians(self, Q, active_below: float = np.inf):
        """(D (N, P), J (N, P, n)): distances and dd/dq (identified joint order); rows of pairs
        farther than `active_below` are left zero (not needed by the caller)."""
        Q = np.atleast_2d(np.asarray(Q, dtype=float))
        N, P, n = len(Q), self.n_pairs, self.robot.n
        D = np.empty((N, P))
        J = np.zeros((N, P, n))
        if P == 0:
            return D, J
        m, d, gm, gd = self.model, self.data, self.geom_model, self.geom_data
        idx_v = self.robot._idx_v
        res = gd.distanceResults
        for s, q in enumerate(Q):
            qp = self.robot.to_pinocchio_q(q)
            pin.computeDistances(m, d, gm, gd, qp)
            D[s] = [r.min_distance for r in res]
            act = np.flatnonzero(D[s] < active_below)
            if act.size == 0:
                continue
            pin.computeJointJacobians(m, d, qp)
            ja, jb = self._ji[act], self._jj[act]
            Jall = np.zeros((m.njoints, 6, n))
            for k in set(ja.tolist()) | set(jb.tolist()):
                if k != 0:
                    Jall[k] = pin.getJointJacobian(m, d, k, pin.WORLD)[:, idx_v]
            rs = [res[p] for p in act.tolist()]
            nrm = np.array([r.normal for r in rs])
            p1 = np.array([r.getNearestPoint1() for r in rs])
            p2 = np.array([r.getNearestPoint2() for r in rs])
            Ja, Jb = Jall[ja], Jall[jb]
            J[s, act] = (np.einsum("pi,pij->pj", nrm, Jb[:, :3] - Ja[:, :3])
                         - np.einsum("pi,pij->pj", np.cross(nrm, p2), Jb[:, 3:])
                         + np.einsum("pi,pij->pj", np.cross(nrm, p1), Ja[:, 3:]))
        return D, J

    def pair_label(self, p: int) -> str:
        return self.pairs[p].label

    # ------------------------------------------------------------ speed bound
    def lever_bounds(self) -> np.ndarray:
        """Per identified joint, an upper bound of the distance from its axis to any point of
        the geometry it moves (1 for prismatic joints): Cartesian speed <= sum |qd_i| r_i."""
        m = self.model
        radius = np.zeros(len(self._names))
        centre = np.zeros(len(self._names))
        for g_i in range(self.n_robot_geometries):
            go = self.geom_model.geometryObjects[g_i]
            geo = go.geometry
            geo.computeLocalAABB()
            centre[g_i] = np.linalg.norm(go.placement.translation + np.asarray(geo.aabb_center))
            radius[g_i] = float(geo.aabb_radius)
        out = np.zeros(self.robot.n)
        for k, jid in enumerate(self.robot._jid):
            if self.robot._prismatic[k]:
                out[k] = 1.0
                continue
            best = 0.0
            for g_i in range(self.n_robot_geometries):
                j = int(self._joint[g_i])
                path, jj = 0.0, j
                while jj > jid:
                    path += np.linalg.norm(m.jointPlacements[jj].translation)
                    jj = m.parents[jj]
                if jj != jid:
                    continue                      # not moved by this joint
                best = max(best, path + centre[g_i] + radius[g_i])
            out[k] = best
        return out
