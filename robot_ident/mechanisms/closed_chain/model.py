"""ClosedChainModel: passive joints by Newton, G = dq/dq_a, and the actuated joints'
regressor by virtual work, Y_act = G^T Y_tree, with actuator columns and tied limbs."""
from __future__ import annotations

import os
from typing import Mapping, Sequence

import numpy as np
import pinocchio as pin

from ...errors import ModelError
from ...model.robot import INERTIAL_SYMBOLS, FrictionOptions, JointLimits, ParameterLayout, RobotModel, actuator_columns
from .spec import ClosedChainSpec, Closure, _rpy

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


class ClosedChainModel:
    """Actuated-joint dynamics of a closed-chain robot (see the module doc)."""

    def __init__(self, urdf: str | os.PathLike, actuated: Sequence[str], closures: Sequence[Closure],
                 home: Mapping[str, float] | None = None, friction: FrictionOptions | None = None,
                 armature: Mapping[str, float] | None = None, tie: Mapping[str, Sequence[str]] | None = None,
                 newton_tol: float = 1e-12, max_iter: int = 50, singular_tol: float = 1e-5):
        self.friction = friction or FrictionOptions()
        self.tree = RobotModel(urdf, friction=FrictionOptions(False, False, False, False))
        self.urdf_xml, self.urdf_label = self.tree.urdf_xml, self.tree.urdf_label
        self.locked_positions: dict = {}
        self.model = self.tree.model.copy()
        m = self.model
        self.tree_joint_names = tuple(m.names[i] for i in range(1, m.njoints))
        for i in range(1, m.njoints):
            if m.joints[i].nq != 1 or m.joints[i].nv != 1:
                raise ModelError(f"tree joint {m.names[i]!r} must be a 1-DOF revolute or prismatic joint with "
                                 "limits (continuous joints are not supported in closed chains)")
        if m.nq != m.nv:
            raise ModelError("closed-chain tree must have nq == nv")
        actuated = tuple(actuated)
        if not actuated:
            raise ModelError("no actuated joint given")
        for j in actuated:
            if j not in self.tree_joint_names:
                raise ModelError(f"actuated joint {j!r} is not a movable joint of the tree URDF {self.urdf_label}; "
                                 f"tree joints: {', '.join(self.tree_joint_names)}")
        if len(set(actuated)) != len(actuated):
            raise ModelError(f"actuated joints listed twice: {actuated}")
        self.joint_names = actuated
        self.n = len(actuated)
        self.nt = m.nv
        self.passive_names = tuple(j for j in self.tree_joint_names if j not in actuated)
        self.ia = np.array([m.joints[m.getJointId(j)].idx_v for j in actuated])
        self.ip = np.array([m.joints[m.getJointId(j)].idx_v for j in self.passive_names], dtype=int)

        # Closure frames.
        self.closures = tuple(closures)
        if not self.closures:
            raise ModelError("a closed-chain model needs at least one closure")
        self._cframes = []
        for c in self.closures:
            ids = []
            for side, link, point, rpy in (("a", c.link_a, c.point_a, c.rpy_a), ("b", c.link_b, c.point_b, c.rpy_b)):
                if not m.existFrame(link):
                    raise ModelError(f"closure {c.name!r}: link {link!r} is not a link of URDF {self.urdf_label}")
                f = m.frames[m.getFrameId(link)]
                place = f.placement * pin.SE3(_rpy(rpy), np.asarray(point, float))
                name = f"__closure_{c.name}_{side}"
                ids.append(m.addFrame(pin.Frame(name, f.parentJoint, m.getFrameId(link), place,
                                                pin.FrameType.OP_FRAME)))
            self._cframes.append(tuple(ids))
        self.nc = sum(c.size for c in self.closures)
        self.data = m.createData()
        self.newton_tol, self.max_iter, self.singular_tol = float(newton_tol), int(max_iter), float(singular_tol)

        home = dict(home or {})
        for j in home:
            if j not in self.tree_joint_names:
                raise ModelError(f"home position given for {j!r}, which is not a tree joint")
        self.q_home = pin.neutral(m)
        for j, v in home.items():
            self.q_home[m.joints[m.getJointId(j)].idx_q] = float(v)
        self._q_last = self.q_home.copy()
        self._qa_last = self.q_home[self.ia].copy()

        # Parameter layout with tied bodies.
        self._build_layout(dict(tie or {}), dict(armature or {}))
        self.limits = self._read_limits()

    # --------------------------------------------------------------- layout
    def _build_layout(self, tie: dict, armature: dict) -> None:
        tree_bodies = self.tree.layout.body_joints
        group_of = {}
        for g, members in tie.items():
            members = tuple(members)
            if len(members) < 2:
                raise ModelError(f"tie group {g!r} needs at least two bodies, got {members}")
            if g in tree_bodies:
                raise ModelError(f"tie group name {g!r} is also a joint name")
            for j in members:
                if j not in tree_bodies:
                    raise ModelError(f"tie group {g!r}: {j!r} is not a tree joint")
                if j in group_of:
                    raise ModelError(f"body of joint {j!r} is in two tie groups")
                group_of[j] = g
        blocks: list[str] = []
        block_of: list[int] = []
        for b in tree_bodies:
            key = group_of.get(b, b)
            if key not in blocks:
                blocks.append(key)
            block_of.append(blocks.index(key))
        nb_full, nb = len(tree_bodies), len(blocks)
        T = np.zeros((10 * nb_full, 10 * nb))
        for i, k in enumerate(block_of):
            T[10 * i:10 * i + 10, 10 * k:10 * k + 10] = np.eye(10)
        self.tie_matrix = T
        self.tie_groups = {g: tuple(m) for g, m in tie.items()}
        full_nominal = self.tree.nominal[: 10 * nb_full]
        nominal_i = np.zeros(10 * nb)
        for k in range(nb):
            members = [i for i, kk in enumerate(block_of) if kk == k]
            first = full_nominal[10 * members[0]:10 * members[0] + 10]
            for i in members[1:]:
                other = full_nominal[10 * i:10 * i + 10]
                if np.max(np.abs(other - first)) > 1e-9 * max(1.0, np.max(np.abs(first))):
                    raise ModelError(f"tie group {blocks[k]!r}: the URDF bodies of {tree_bodies[members[0]]!r} and "
                                     f"{tree_bodies[i]!r} differ (about their joint frames); they cannot be tied")
            nominal_i[10 * k:10 * k + 10] = first
        syms = self.friction.enabled_symbols
        names = [f"{b}.{s}" for b in blocks for s in INERTIAL_SYMBOLS]
        names += [f"{j}.{s}" for j in self.joint_names for s in syms]
        self.layout = ParameterLayout(tuple(names), tuple(blocks), self.joint_names, syms)
        for j in armature:
            if j not in self.joint_names:
                raise ModelError(f"armature given for joint {j!r}, which is not actuated")
        import xml.etree.ElementTree as ET
        urdf_joints = {e.get("name"): e for e in ET.fromstring(self.urdf_xml).findall("joint")}
        theta = np.zeros(self.layout.size)
        theta[: 10 * nb] = nominal_i
        for j in self.joint_names:
            dyn = urdf_joints[j].find("dynamics")
            values = {"Ia": float(armature.get(j, 0.0)),
                      "Fc": float(dyn.get("friction", 0.0)) if dyn is not None else 0.0,
                      "Fv": float(dyn.get("damping", 0.0)) if dyn is not None else 0.0, "off": 0.0}
            for s in syms:
                theta[self.layout.index(f"{j}.{s}")] = values[s]
        self.nominal = theta

    def _read_limits(self) -> JointLimits:
        m = self.model
        idx_q = [m.joints[m.getJointId(j)].idx_q for j in self.joint_names]
        vel_attr = m.velocityLimit if hasattr(m, "velocityLimit") else m.upperVelocityLimit
        eff_attr = m.effortLimit if hasattr(m, "effortLimit") else m.upperEffortLimit
        return JointLimits(np.array([m.lowerPositionLimit[i] for i in idx_q], float),
                           np.array([m.upperPositionLimit[i] for i in idx_q], float),
                           np.array([vel_attr[i] for i in self.ia], float),
                           np.array([eff_attr[i] for i in self.ia], float))

    @property
    def n_params(self) -> int:
        return self.layout.size

    def is_prismatic(self, joint: str) -> bool:
        return self.tree.is_prismatic(joint)

    def full_inertial(self, theta: np.ndarray) -> np.ndarray:
        """The tree's standard inertial parameters (one block per tree body) of theta."""
        theta = np.asarray(theta, float)
        return self.tie_matrix @ theta[: self.layout.n_inertial]

    def body_inertia(self, theta: np.ndarray, block: str) -> pin.Inertia:
        return pin.Inertia.FromDynamicParameters(np.asarray(theta)[self.layout.inertial_slice(block)])

    # ----------------------------------------------------------- closures
    def closure_residual(self, q: np.ndarray, jacobian: bool = True):
        """phi(q) (nc,) and, if asked, its Jacobian (nc, nt) in tree velocity order."""
        m, d = self.model, self.data
        if jacobian:
            pin.computeJointJacobians(m, d, q)
        else:
            pin.forwardKinematics(m, d, q)
        pin.updateFramePlacements(m, d)
        r = np.empty(self.nc)
        J = np.empty((self.nc, self.nt)) if jacobian else None
        k = 0
        for c, (fa, fb) in zip(self.closures, self._cframes):
            Ma, Mb = d.oMf[fa], d.oMf[fb]
            r[k:k + 3] = Ma.translation - Mb.translation
            if c.kind == "pose":
                r[k + 3:k + 6] = pin.log3(Ma.rotation @ Mb.rotation.T)
            if jacobian:
                Ja = pin.getFrameJacobian(m, d, fa, _LWA)
                Jb = pin.getFrameJacobian(m, d, fb, _LWA)
                J[k:k + c.size] = (Ja - Jb)[: c.size]
            k += c.size
        return r, J

    def closure_bias(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Jdot v: relative classical acceleration of the closure points at zero joint acceleration."""
        m, d = self.model, self.data
        pin.forwardKinematics(m, d, q, v, np.zeros(self.nt))
        out = np.empty(self.nc)
        k = 0
        for c, (fa, fb) in zip(self.closures, self._cframes):
            aa = pin.getFrameClassicalAcceleration(m, d, fa, _LWA)
            ab = pin.getFrameClassicalAcceleration(m, d, fb, _LWA)
            out[k:k + 3] = aa.linear - ab.linear
            if c.kind == "pose":
                out[k + 3:k + 6] = aa.angular - ab.angular
            k += c.size
        return out

    def _check_passive_rank(self, Jp: np.ndarray, q_a) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        U, s, Vt = np.linalg.svd(Jp, full_matrices=False)
        if s.size and (s[-1] <= self.singular_tol * max(s[0], 1e-300)):
            raise ModelError(f"singular pose at actuated coordinates {np.round(np.asarray(q_a), 6).tolist()}: the "
                             f"closure Jacobian of the passive joints lost rank (sigma_min/sigma_max "
                             f"{s[-1] / max(s[0], 1e-300):.2g}); the passive joints are not determined there")
        return U, s, Vt

    def _newton(self, q_a: np.ndarray, q0: np.ndarray) -> np.ndarray | None:
        q = q0.copy()
        q[self.ia] = q_a
        r, J = self.closure_residual(q)
        rn = float(np.linalg.norm(r))
        for _ in range(self.max_iter):
            if rn <= self.newton_tol:
                return q
            Jp = J[:, self.ip]
            step = np.linalg.lstsq(Jp, -r, rcond=None)[0]
            # Backtracking on the residual norm (damped Newton).
            t = 1.0
            while True:
                qn = q.copy()
                qn[self.ip] += t * step
                rn_new = float(np.linalg.norm(self.closure_residual(qn, jacobian=False)[0]))
                if rn_new < rn or t < 1e-3:
                    break
                t *= 0.5
            if not np.isfinite(rn_new) or (rn_new >= rn and t < 1e-3):
                return None
            q = qn
            r, J = self.closure_residual(q)
            rn = float(np.linalg.norm(r))
        return q if rn <= self.newton_tol else None

    def solve_positions(self, q_a, guess: np.ndarray | None = None) -> np.ndarray:
        """Tree coordinates (Pinocchio q) with the given actuated coordinates and the closures
        satisfied to ``newton_tol``. Starts from ``guess``, else from the last solution when
        close, else from the home pose, then by continuation from the home pose."""
        q_a = np.asarray(q_a, dtype=float)
        if q_a.shape != (self.n,) or not np.isfinite(q_a).all():
            raise ValueError(f"actuated coordinates must be {self.n} finite numbers, got {q_a!r}")
        starts = []
        if guess is not None:
            starts.append(np.asarray(guess, float))
        if np.max(np.abs(q_a - self._qa_last)) < 0.05:
            starts.append(self._q_last)
        starts.append(self.q_home)
        for q0 in starts:
            q = self._newton(q_a, q0)
            if q is not None:
                break
        else:
            q = self.q_home.copy()
            qa0 = self.q_home[self.ia].copy()
            for f in np.linspace(0.0, 1.0, 21)[1:]:
                q = self._newton(qa0 + f * (q_a - qa0), q)
                if q is None:
                    raise ModelError(f"the loop closures cannot be solved at actuated coordinates "
                                     f"{np.round(q_a, 6).tolist()} ({', '.join(self.joint_names)}): Newton did "
                                     f"not converge (outside the workspace or through a singularity)")
        _, J = self.closure_residual(q)
        self._check_passive_rank(J[:, self.ip], q_a)
        self._q_last, self._qa_last = q, q_a.copy()
        return q

    def velocity_map(self, q: np.ndarray) -> np.ndarray:
        """G = dq/dq_a (nt, n) at a tree configuration satisfying the closures."""
        _, J = self.closure_residual(q)
        return self._velocity_map_from_jacobian(J, q[self.ia])[0]

    def _velocity_map_from_jacobian(self, J, q_a):
        U, s, Vt = self._check_passive_rank(J[:, self.ip], q_a)
        Jp_pinv = (Vt.T / s) @ U.T
        G = np.zeros((self.nt, self.n))
        G[self.ia, np.arange(self.n)] = 1.0
        G[self.ip] = -Jp_pinv @ J[:, self.ia]
        return G, Jp_pinv

    def tree_state(self, q_a, qd_a, qdd_a, guess=None):
        """(q, qd, qdd, G) of the tree for one actuated state."""
        q = self.solve_positions(q_a, guess)
        _, J = self.closure_residual(q)
        G, Jp_pinv = self._velocity_map_from_jacobian(J, q_a)
        v = G @ np.asarray(qd_a, float)
        a = G @ np.asarray(qdd_a, float)
        a[self.ip] -= Jp_pinv @ self.closure_bias(q, v)
        return q, v, a, G

    # ------------------------------------------------------------- dynamics
    @staticmethod
    def _as_samples(x, n: int, label: str) -> np.ndarray:
        a = np.asarray(x, dtype=float)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2 or a.shape[1] != n:
            raise ValueError(f"{label} must have shape (N, {n}) or ({n},), got {np.shape(x)}")
        if not np.isfinite(a).all():
            raise ValueError(f"{label} is not finite")
        return a

    def actuator_regressor(self, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """(N, n, n_actuator_params) armature, Coulomb, viscous, offset columns (as RobotModel)."""
        return actuator_columns(qd, qdd, self.layout.actuator_symbols, self.friction.coulomb_velocity_scale)

    def tree_regressor_sample(self, q, v, a) -> np.ndarray:
        """(nt, 10 * tree bodies) Pinocchio joint-torque regressor of the tree."""
        return pin.computeJointTorqueRegressor(self.model, self.data, q, v, a)

    def regressor(self, q, qd, qdd) -> np.ndarray:
        """Stacked actuated-joint regressor (N*n, n_params), sample-major rows."""
        q = self._as_samples(q, self.n, "q")
        qd = self._as_samples(qd, self.n, "qd")
        qdd = self._as_samples(qdd, self.n, "qdd")
        if not (q.shape[0] == qd.shape[0] == qdd.shape[0]):
            raise ValueError(f"q, qd, qdd have different sample counts: {q.shape[0]}, {qd.shape[0]}, {qdd.shape[0]}")
        N = q.shape[0]
        ni = self.layout.n_inertial
        Y = np.empty((N, self.n, self.layout.size))
        T = self.tie_matrix
        for s in range(N):
            qt, vt, at, G = self.tree_state(q[s], qd[s], qdd[s])
            Y[s, :, :ni] = G.T @ self.tree_regressor_sample(qt, vt, at) @ T
        Y[:, :, ni:] = self.actuator_regressor(qd, qdd)
        return Y.reshape(N * self.n, self.layout.size)

    def efforts(self, q, qd, qdd, theta: np.ndarray | None = None) -> np.ndarray:
        """Actuator efforts (N, n) predicted by theta (default: nominal)."""
        theta = self.nominal if theta is None else np.asarray(theta, dtype=float)
        if theta.shape != (self.layout.size,):
            raise ValueError(f"theta must have {self.layout.size} entries (layout), got {theta.shape}")
        return (self.regressor(q, qd, qdd) @ theta).reshape(-1, self.n)

    def inverse_dynamics(self, q, qd, qdd, theta: np.ndarray | None = None) -> np.ndarray:
        """The same efforts as `efforts`, by RNEA on the tree (faster for a few parameter sets)."""
        theta = self.nominal if theta is None else np.asarray(theta, dtype=float)
        q = self._as_samples(q, self.n, "q")
        qd = self._as_samples(qd, self.n, "qd")
        qdd = self._as_samples(qdd, self.n, "qdd")
        pm = self.model.copy()
        full = self.full_inertial(theta)
        for k in range(1, pm.njoints):
            pm.inertias[k] = pin.Inertia.FromDynamicParameters(full[10 * (k - 1):10 * k])
        pd = pm.createData()
        out = np.empty_like(q)
        for s in range(q.shape[0]):
            qt, vt, at, G = self.tree_state(q[s], qd[s], qdd[s])
            out[s] = G.T @ pin.rnea(pm, pd, qt, vt, at)
        ni = self.layout.n_inertial
        out += (self.actuator_regressor(qd, qdd) @ theta[ni:])
        return out

    def passive_states(self, q, qd, qdd) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tree positions, velocities, accelerations (N, nt) in Pinocchio order, for actuated samples."""
        q = self._as_samples(q, self.n, "q")
        qd = self._as_samples(qd, self.n, "qd")
        qdd = self._as_samples(qdd, self.n, "qdd")
        out = [np.empty((q.shape[0], self.nt)) for _ in range(3)]
        for s in range(q.shape[0]):
            qt, vt, at, _ = self.tree_state(q[s], qd[s], qdd[s])
            out[0][s], out[1][s], out[2][s] = qt, vt, at
        return tuple(out)

    def home_actuated(self) -> np.ndarray:
        """Actuated coordinates of the home pose."""
        return self.q_home[self.ia].copy()

    def tree_index(self, joint: str) -> int:
        """Index of a tree joint in Pinocchio's q (= v) vector."""
        return int(self.model.joints[self.model.getJointId(joint)].idx_q)


def load_closed_chain(path: str | os.PathLike, friction: FrictionOptions | None = None,
                      tie_limbs: bool = True, armature: Mapping[str, float] | None = None) -> ClosedChainModel:
    """`ClosedChainModel` from a closure YAML (which names its URDF)."""
    spec = ClosedChainSpec.from_yaml(path)
    return ClosedChainModel(spec.urdf, spec.actuated, spec.closures, spec.home, friction, armature,
                            spec.tie if tie_limbs else None)


def finite_difference_G(model: ClosedChainModel, q_a: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central-difference dq/dq_a (for checks)."""
    q_a = np.asarray(q_a, float)
    q0 = model.solve_positions(q_a)
    G = np.empty((model.nt, model.n))
    for k in range(model.n):
        e = np.zeros(model.n)
        e[k] = h
        qp = model.solve_positions(q_a + e, guess=q0)
        qm = model.solve_positions(q_a - e, guess=q0)
        G[:, k] = (qp - qm) / (2 * h)
    return G
