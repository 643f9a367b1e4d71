"""The arm's collision model: the URDF's ``<collision>`` geometry in a Pinocchio
GeometryModel (coal underneath), the environment, the checked pairs, and signed
distances with their exact gradients.

* The meshes and boxes of each body (a joint of the reduced model, with the links locked
  or fixed to it) are replaced by one convex hull (hulls.py); the optimiser's distances
  and gradients are on the hulls. The original geometry (originals.py) is the truth:
  `clearances` measures it wherever a hull is closer than the pair's margin, and every
  acceptance (`check_collisions`, the approach) is on `clearances`.
* Checked pairs: every pair of bodies of the reduced model (identified joints; locked
  links belong to their parent's body) and each moving body against the environment
  (floor half-space, boxes), less the pairs left out with proof (pairs.py: same or
  adjacent body, the SRDF, always in contact over poses sampled inside the joint
  limits). A pair close by construction is checked with a reduced margin. Every
  decision is kept in ``decisions`` (with its reason) and printed.
* ``distances(Q)`` gives (N, P) signed hull distances; ``distances_and_jacobians(Q)`` adds
  dd/dq, the contact normal through the frame Jacobians at the witness points:
  d d / d q = n . (J_p2 - J_p1), J_p = J_v - [p]x J_w (WORLD-frame joint Jacobians).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ...errors import ModelError
from ._coal import coal
from .hulls import body_hulls
from .originals import OriginalGeometry
from .pairs import PairDecision, decide_pairs, in_limit_poses
from .resolve import collision_links, resolve_collision_meshes
from .spec import CollisionSpec
from .srdf import disabled_link_pairs


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
        orig = pin.GeometryModel()
        if self.has_geometry:
            xml = resolve_collision_meshes(robot.urdf_xml, robot.urdf_label, self.spec.package_dirs, urdf_dir)
            try:
                orig = pin.buildGeomFromUrdfString(model, xml, pin.COLLISION)
            except Exception as exc:  # Pinocchio raises ValueError/RuntimeError by version
                raise ModelError(f"Pinocchio cannot read the collision geometry of {robot.urdf_label}: {exc}") from exc
        gm, members, groups = body_hulls(model, orig)
        self.n_robot_geometries = len(gm.geometryObjects)
        env = []
        if self.has_geometry and self.spec.floor is not None:
            env.append(pin.GeometryObject("floor", 0, 0, pin.SE3.Identity(),
                                          coal.Halfspace(np.array([0.0, 0.0, 1.0]), float(self.spec.floor))))
        if self.has_geometry:
            for b in self.spec.boxes:
                env.append(pin.GeometryObject(f"box:{b.name}", 0, 0, b.placement(), coal.Box(*b.size)))
        for g in env:                     # the environment is its own original geometry
            gm.addGeometryObject(g)
            groups.append((len(orig.geometryObjects),))
            orig.addGeometryObject(pin.GeometryObject(g))
        self.geom_model = gm
        self.originals = OriginalGeometry(model, orig, groups)
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
        """The pairs checked and their margins, decided at poses inside the joint limits (pairs.py)."""
        cands, self.n_same_body, self.n_adjacent = self._candidate_pairs()
        decisions: list[PairDecision] = []
        if self.spec.srdf:
            dis = disabled_link_pairs(self.spec.srdf)
            keep = []
            for i, j, kind in cands:
                # a body pair is skipped when the SRDF disables every link pair between them
                if all(frozenset((a, b)) in dis for a in self._members[i] for b in self._members[j]):
                    decisions.append(PairDecision(self._names[i], self._names[j], kind, "skipped",
                                                  f"disabled by the SRDF {self.spec.srdf}"))
                else:
                    keep.append((i, j, kind))
            cands = keep
        self._set_pairs(cands)
        margins, hull_margins = {}, {}
        if cands:
            Q = in_limit_poses(self.robot.limits.lower, self.robot.limits.upper)
            Qpin = self.robot._pin_q(Q)
            D = self.distances(Q)
            pairs = [(i, j) for i, j, _ in cands]

            def original(k, rows):
                return self.originals.distances(Qpin[rows], [pairs[k]])[:, 0]

            made = decide_pairs([(self._names[i], self._names[j]) for i, j, _ in cands], [c[2] for c in cands],
                                D, original, self.margin)
            keep = []
            for (i, j, kind), dec in zip(cands, made):
                if dec.status != "skipped":
                    keep.append((i, j, kind))
                    margins[(i, j)], hull_margins[(i, j)] = dec.margin, dec.hull_margin
            decisions += made
            self._set_pairs(keep)
        self.decisions: tuple[PairDecision, ...] = tuple(decisions)
        self.margins = np.array([margins[(int(i), int(j))] for i, j in zip(self._pi, self._pj)])
        self.hull_margins = np.array([hull_margins[(int(i), int(j))] for i, j in zip(self._pi, self._pj)])

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
        """One paragraph for the command line: what is checked, and every pair left out or
        given a reduced margin with the reason."""
        if not self.has_geometry:
            return "no <collision> geometry in the URDF: self-collisions and obstacles are NOT checked"
        env = (["floor z = %g m" % self.spec.floor] if self.spec.floor is not None else []) + \
              [f"box {b.name}" for b in self.spec.boxes]
        n_env = sum(p.kind == "environment" for p in self.pairs)
        s = (f"collision model: {self.n_robot_geometries} geometries (convex hulls, original meshes where a hull "
             f"is closer than the margin), {self.n_pairs} pairs checked ({self.n_pairs - n_env} self, {n_env} "
             f"environment: {', '.join(env) or 'none'}), margin {self.margin:g} m; "
             f"left out: {self.n_same_body} same-body, {self.n_adjacent} adjacent")
        for status, head in (("skipped", "left out"), ("reduced", "reduced margin")):
            ds = [d for d in self.decisions if d.status == status]
            if ds:
                s += f"; {head} ({len(ds)}): " + "; ".join(f"{d.label}: {d.reason}" for d in ds)
        return s

    def to_dict(self) -> dict:
        """The environment and the pair selection, for the trajectory file: every pair left out
        or checked with a reduced margin, with the reason."""
        d = self.spec.environment_dict()
        d.update({"geometries": self.n_robot_geometries, "pairs": self.n_pairs,
                  "convex_hulls": True, "original_geometry_checked": True,
                  "skipped": {"same_body": self.n_same_body, "adjacent": self.n_adjacent,
                              "pairs": [x.to_dict() for x in self.decisions if x.status == "skipped"]},
                  "reduced_margins": [x.to_dict() for x in self.decisions if x.status == "reduced"]})
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

    def clearances(self, Q, D=None, path: bool = False) -> np.ndarray:
        """(N, P) distances a pose is accepted on: the hull distance where it keeps the pair's
        margin (the hull contains the original geometry), the original geometry's elsewhere.
        `D`: the hull distances at Q if already computed. ``path``: Q are consecutive samples
        of one motion; the original geometry is then measured only where the last measured
        distance of the pair, less the most the two bodies can have moved relative to each
        other since (2 sum_i |dq_i| r_i, r_i the lever bound of joint i), could have crossed
        the margin; in between the distance is that bound (below the margin: the last one)."""
        Q = np.atleast_2d(np.asarray(Q, dtype=float))
        D = self.distances(Q) if D is None else np.array(D, dtype=float, copy=True)
        close = D < self.margins
        if not close.any():
            return D
        pairs = list(zip(self._pi.tolist(), self._pj.tolist()))
        if not path:
            rows = np.flatnonzero(close.any(axis=1))
            sub, mask = D[rows], close[rows]
            sub[mask] = self.originals.distances(self.robot._pin_q(Q[rows]), pairs, mask)[mask]
            D[rows] = sub
            return D
        if getattr(self, "_lever", None) is None:
            self._lever = self.lever_bounds()
        moved = np.r_[0.0, np.cumsum(2.0 * np.abs(np.diff(Q, axis=0)) @ self._lever)]
        Qpin = self.robot._pin_q(Q[close.any(axis=1)])
        where = np.full(len(Q), -1)
        where[close.any(axis=1)] = np.arange(len(Qpin))
        for k in np.flatnonzero(close.any(axis=0)):
            m, s0, d0 = self.margins[k], -1, 0.0
            for s in np.flatnonzero(close[:, k]):
                if s0 >= 0 and abs(d0 - m) > moved[s] - moved[s0]:
                    D[s, k] = d0 - (moved[s] - moved[s0]) if d0 >= m else d0
                    continue
                s0 = s
                d0 = D[s, k] = self.originals.distances(Qpin[where[s]:where[s] + 1], [pairs[k]])[0, 0]
        return D

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
