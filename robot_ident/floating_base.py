"""Identification of a free-floating space robot from momentum conservation.

A spacecraft body (the *base*, the URDF's root link) carries an arm; nothing outside
acts on the system, so its linear and angular momentum are conserved. The momentum is
linear in every body's 10 inertial parameters, which gives equations without any force,
torque or acceleration measurement: only the base twist, the joint angles and the
joint rates are needed.

Momentum regressor
------------------
The model is Pinocchio's with a free-flyer root joint (named ``base`` by default). Body
``i`` with spatial velocity ``v_i`` (its joint frame, LOCAL) has spatial momentum
``I_i v_i`` = ``pin.bodyRegressor(0, v_i) @ theta_i`` (6 x 10, Pinocchio's parameter
order ``m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz`` about the joint frame). Mapping it
to a common frame with the dual (force) action matrix and summing over bodies gives::

    h = [p; L] = Y_h(q, v) @ theta          (linear momentum p, angular momentum L)

`FloatingBaseModel.momentum_regressor_pin` returns Y_h in the world frame about any
point (checked in the tests against ``pin.computeCentroidalMomentum``) or in the base
frame about the base frame origin. The identification uses the latter: there the
momentum of a system released from rest is zero at every instant, and Y_h depends only
on the joint angles, the joint rates and the base twist *in base coordinates* (what a
gyro and a relative-navigation sensor give) -- not on the base's position or attitude.

A grasped payload is one more body, rigidly attached to a named frame (``tool0``),
with its 10 parameters about that frame; its columns come after the arm's.

Identification and scaling
--------------------------
For a system released from rest, ``Y_h theta = 0``. Split the columns into unknown
(``u``: the base; later the payload) and known (``k``: the arm links from the URDF, and
in the second stage the base identified in the first)::

    Y_u theta_u = - Y_k theta_k

The equations are homogeneous in *all* parameters (doubling every mass and inertia
changes nothing), so momentum alone fixes the parameters only up to a common scale.
The known parameters supply the scale: the unknowns are identified *relative to* the
arm's CAD parameters, and a relative error in those (e.g. every link 2 % heavier)
appears as the same relative error in the identified base. At least one known body
with a non-zero contribution must move; without known parameters the problem is refused.

Identifiability (source C): the base's inertia enters only through ``I_0 omega_0``. If
the base angular velocities of all samples lie in a plane with normal ``n``, the
inertia change ``n n^T`` does not change any equation: the inertia is singular. One
joint moved from rest turns the base about a nearly fixed axis, so two single-joint
experiments leave (nearly) a plane and at least three joints with independent axes
must be excited, whose motions turn the base about independent axes (three parallel
pitch joints do not count as three). `check_identifiability` applies two tests and
`solve_*` refuse with `IdentificationError` when either fails:

* rank: the *snapshot* form of the equations (source C's "drive a joint with an
  initial velocity and measure"; ``samples="snapshot"``) has one instant per
  experiment, 3 + 3 equations each; with two joints it is exactly singular (rank 9 of
  10, the null vector an inertia combination). Singular values of the
  column-normalised matrix below ``rank_rtol`` (1e-6) x the largest count as zero.
* angular-velocity span: over whole rest-to-rest motions (``samples="all"``) the
  base's rotation axis drifts a little with the configuration, so two joints give a
  full-rank but nearly singular system whose inertia along n n^T only that drift
  determines. `IdentifiabilityReport.omega_span` holds the singular values of each
  unknown body's stacked angular velocities over the largest; a third one below
  ``omega_rtol`` (3 %) is refused. On the demo robot two joints give 0.9-1.5 %, three
  joints with yaw, pitch and roll axes 9-14 %.

Scaling for rank, condition number and least squares: angular-momentum rows are
divided by a length (``length_scale``, default 1 m) so both row groups carry kg*m/s,
and columns are normalised to unit norm before the SVD (the reported condition
number is that of the column-normalised matrix).

Estimators: least squares (with standard deviations from the residual,
sigma^2 (A^T A)^-1), and a genetic algorithm (pymoo) that minimises the same squared
momentum mismatch within box bounds (source D). The GA cannot beat least squares on
this cost -- both minimise it; the GA's interest is that it needs no linear algebra
and accepts bounds.

Guidance (source C): each arm link's mass should be 3-30 % of the base mass, so the
base moves measurably yet stays controllable; `guidance()` computes the ratios and
the base linear and angular speed the joint rates of the experiments produce.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pinocchio as pin

from .errors import IdentificationError, ModelError
from .model import INERTIAL_SYMBOLS, _parse_urdf_joints, read_urdf_text

__all__ = [
    "FloatingBaseModel", "MomentumExperiment", "MomentumSystem", "IdentifiabilityReport",
    "FloatingBaseEstimate", "Guidance", "stack_momentum_equations", "check_identifiability",
    "solve_least_squares", "solve_ga", "ga_bounds", "payload_ga_bounds", "guidance",
    "rest_to_rest", "identify",
]


def _dual_action(M: pin.SE3) -> np.ndarray:
    """6x6 matrix mapping a force (linear; angular) in frame B to frame A, M = aMb."""
    R, p = M.rotation, M.translation
    px = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
    X = np.zeros((6, 6))
    X[:3, :3] = R
    X[3:, 3:] = R
    X[3:, :3] = px @ R
    return X


def _momentum_block(v: np.ndarray) -> np.ndarray:
    """6x10 matrix Y with I v = Y @ theta for one body (v = [lin; ang] in the body frame)."""
    return pin.bodyRegressor(pin.Motion.Zero(), pin.Motion(np.asarray(v, float)))


class FloatingBaseModel:
    """Pinocchio model of a free-floating base (the URDF root link) and its arm.

    Bodies, in order: the base (the free-flyer joint, named `base_name`, with every link
    rigidly attached to the root link), one body per arm joint in Pinocchio's tree order,
    then the payload (if `payload_frame` is given) attached rigidly to that frame.
    Parameter names are ``<body>.<symbol>``, e.g. ``base.Izz``, ``elbow_pitch.m``,
    ``payload.mx``; each body's parameters are about its joint frame (the payload's about
    `payload_frame`).
    """

    def __init__(self, urdf: str | os.PathLike, base_name: str = "base",
                 payload_frame: str | None = None, payload_name: str = "payload"):
        self.urdf_xml, self.urdf_label = read_urdf_text(urdf)
        urdf_joints = _parse_urdf_joints(self.urdf_xml, self.urdf_label)
        if base_name in urdf_joints:
            raise ModelError(f"base name {base_name!r} is already a joint of URDF {self.urdf_label}")
        try:
            model = pin.buildModelFromXML(self.urdf_xml, pin.JointModelFreeFlyer())
        except Exception as exc:  # noqa: BLE001 - ValueError/RuntimeError depending on version
            raise ModelError(f"Pinocchio cannot build a model from URDF {self.urdf_label}: {exc}") from exc
        model.names[1] = base_name
        for f in model.frames:
            if f.parentJoint == 1 and f.name == "root_joint":
                f.name = base_name
        for j in range(2, model.njoints):
            if model.joints[j].nv != 1:
                raise ModelError(f"joint {model.names[j]!r} has {model.joints[j].nv} DOF; "
                                 "only 1-DOF arm joints are supported")
        self.model = model
        self.data = model.createData()
        self.base_name = base_name
        self.base_link = self._root_link()
        self.joint_names: tuple[str, ...] = tuple(model.names[j] for j in range(2, model.njoints))
        self.n = len(self.joint_names)
        if self.n < 1:
            raise ModelError(f"URDF {self.urdf_label} has no arm joint")
        self._is_unbounded = np.array([model.joints[j].nq == 2 for j in range(2, model.njoints)])
        self._idx_q = np.array([model.joints[j].idx_q for j in range(2, model.njoints)])
        self._idx_v = np.array([model.joints[j].idx_v for j in range(2, model.njoints)])

        self.payload_name = payload_name if payload_frame is not None else None
        self.payload_frame = payload_frame
        self._payload_fid = None
        if payload_frame is not None:
            if payload_name in (base_name, *self.joint_names):
                raise ModelError(f"payload name {payload_name!r} clashes with a body name")
            if not model.existFrame(payload_frame):
                raise ModelError(f"payload frame {payload_frame!r} is not a frame of URDF {self.urdf_label}")
            self._payload_fid = int(model.getFrameId(payload_frame))
        self.bodies: tuple[str, ...] = (base_name, *self.joint_names) + (
            (payload_name,) if payload_frame is not None else ())
        self.names: tuple[str, ...] = tuple(f"{b}.{s}" for b in self.bodies for s in INERTIAL_SYMBOLS)
        self.nominal = np.zeros(len(self.names))
        for k in range(1, model.njoints):
            self.nominal[10 * (k - 1): 10 * k] = model.inertias[k].toDynamicParameters()

    # ----------------------------------------------------------------- layout
    def _root_link(self) -> str:
        for f in self.model.frames:
            if f.type == pin.FrameType.BODY and f.parentJoint == 1:
                return f.name
        return self.base_name

    @property
    def n_params(self) -> int:
        return len(self.names)

    def body_slice(self, body: str) -> slice:
        try:
            k = self.bodies.index(body)
        except ValueError:
            raise KeyError(f"no body named {body!r}; bodies: {', '.join(self.bodies)}") from None
        return slice(10 * k, 10 * k + 10)

    def columns(self, bodies: Sequence[str]) -> np.ndarray:
        return np.concatenate([np.arange(10 * self.bodies.index(b), 10 * self.bodies.index(b) + 10)
                               for b in bodies]) if bodies else np.zeros(0, int)

    def arm_mass(self) -> np.ndarray:
        """Mass of each arm body (joint order), from the URDF."""
        return np.array([self.nominal[self.body_slice(j)][0] for j in self.joint_names])

    # ------------------------------------------------------------- kinematics
    def pin_state(self, q_arm, qd_arm, base_twist, base_pose: pin.SE3 | None = None):
        """Pinocchio (q, v) from joint angles, joint rates and the base twist
        ``[v; omega]`` in base coordinates (linear velocity of the base frame origin)."""
        q = pin.neutral(self.model)
        if base_pose is not None:
            q[:7] = pin.SE3ToXYZQUAT(base_pose)
        for k in range(self.n):
            i = self._idx_q[k]
            if self._is_unbounded[k]:
                q[i], q[i + 1] = math.cos(q_arm[k]), math.sin(q_arm[k])
            else:
                q[i] = q_arm[k]
        v = np.zeros(self.model.nv)
        v[:6] = base_twist
        v[self._idx_v] = qd_arm
        return q, v

    def momentum_regressor_pin(self, q: np.ndarray, v: np.ndarray, frame: str = "base",
                               point: np.ndarray | None = None) -> np.ndarray:
        """(6, n_params) regressor of the total momentum [linear; angular].

        frame="base": base coordinates, angular momentum about the base frame origin
        (`point` must be None). frame="world": world coordinates, angular momentum about
        `point` (world coordinates, default the world origin)."""
        m, d = self.model, self.data
        pin.forwardKinematics(m, d, q, v)
        if frame == "base":
            if point is not None:
                raise ValueError("point is only used with frame='world'")
            ref_inv = d.oMi[1].inverse()
        elif frame == "world":
            ref_inv = pin.SE3(np.eye(3), -np.asarray(point if point is not None else np.zeros(3), float))
        else:
            raise ValueError(f"frame must be 'base' or 'world', got {frame!r}")
        Y = np.zeros((6, self.n_params))
        for k in range(1, m.njoints):
            Y[:, 10 * (k - 1): 10 * k] = _dual_action(ref_inv * d.oMi[k]) @ _momentum_block(d.v[k].vector)
        if self._payload_fid is not None:
            fid = self._payload_fid
            fr = m.frames[fid]
            oMf = d.oMi[fr.parentJoint] * fr.placement
            vf = fr.placement.actInv(d.v[fr.parentJoint]).vector
            Y[:, -10:] = _dual_action(ref_inv * oMf) @ _momentum_block(vf)
        return Y

    def momentum_regressor(self, q_arm, qd_arm, base_twist) -> np.ndarray:
        """(N, 6, n_params) base-frame momentum regressors for N measured samples."""
        q_arm = np.atleast_2d(np.asarray(q_arm, float))
        qd_arm = np.atleast_2d(np.asarray(qd_arm, float))
        base_twist = np.atleast_2d(np.asarray(base_twist, float))
        N = q_arm.shape[0]
        if q_arm.shape != (N, self.n) or qd_arm.shape != (N, self.n) or base_twist.shape != (N, 6):
            raise ValueError(f"expected q_arm, qd_arm of shape (N, {self.n}) and base_twist (N, 6); got "
                             f"{q_arm.shape}, {qd_arm.shape}, {base_twist.shape}")
        out = np.empty((N, 6, self.n_params))
        for s in range(N):
            q, v = self.pin_state(q_arm[s], qd_arm[s], base_twist[s])
            out[s] = self.momentum_regressor_pin(q, v, "base")
        return out

    def base_twist_at_rest_momentum(self, q_arm, qd_arm, theta: np.ndarray) -> np.ndarray:
        """The base twist [v; omega] (base frame) that makes the total momentum zero for
        the given joint angles and rates and parameters theta (the reaction of the base)."""
        q, v0 = self.pin_state(q_arm, qd_arm, np.zeros(6))
        Y0 = self.momentum_regressor_pin(q, v0) @ theta
        # momentum is linear in the base twist: h = H_b twist + h_arm
        H = np.empty((6, 6))
        for c in range(6):
            e = np.zeros(6)
            e[c] = 1.0
            q, v = self.pin_state(q_arm, np.zeros(self.n), e)
            H[:, c] = self.momentum_regressor_pin(q, v) @ theta
        return -np.linalg.solve(H, Y0)


# ------------------------------------------------------------------ experiments
@dataclass
class MomentumExperiment:
    """One experiment: measured samples of a system released from rest (zero momentum).

    q, qd: (N, n) joint angles and rates (arm joint order of the model);
    base_twist: (N, 6) base linear velocity (of the base frame origin) and angular
    velocity, both in base coordinates. `driven` names the excited joint(s)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    base_twist: np.ndarray
    driven: tuple[str, ...] = ()
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.t = np.asarray(self.t, float)
        N = self.t.shape[0]
        for label in ("q", "qd", "base_twist"):
            a = np.asarray(getattr(self, label), float)
            if a.ndim != 2 or a.shape[0] != N:
                raise ValueError(f"experiment {label} must have shape (N={N}, ...), got {a.shape}")
            if not np.isfinite(a).all():
                raise ValueError(f"experiment {label} has non-finite samples")
            setattr(self, label, a)
        if self.base_twist.shape[1] != 6:
            raise ValueError(f"base_twist must have 6 columns, got {self.base_twist.shape[1]}")
        self.driven = tuple(self.driven)

    def peak_index(self) -> int:
        """Sample of the largest joint-rate norm (the snapshot of source C)."""
        return int(np.argmax(np.linalg.norm(self.qd, axis=1)))


@dataclass
class MomentumSystem:
    """Stacked equations A x = b (rows already scaled) for the unknown parameters."""

    A: np.ndarray
    b: np.ndarray
    names: tuple[str, ...]
    unknown_bodies: tuple[str, ...]
    length_scale: float
    n_samples: int
    experiments: tuple[tuple[str, ...], ...]
    omega_unknown: np.ndarray      # (n_samples, 3 * n_unknown_bodies) angular velocity of each unknown body

    @property
    def n_rows(self) -> int:
        return self.A.shape[0]


def stack_momentum_equations(model: FloatingBaseModel, experiments: Sequence[MomentumExperiment],
                             unknown_bodies: Sequence[str], theta_known: np.ndarray,
                             samples: str = "all", length_scale: float = 1.0,
                             stride: int = 1) -> MomentumSystem:
    """Stack ``Y_u x = -Y_k theta_k`` over experiments.

    theta_known: full parameter vector (model.names); the entries of unknown bodies are
    ignored. samples="all" uses every `stride`-th sample, "snapshot" one sample per
    experiment (the instant of largest joint rate, source C's 3 + 3 equations)."""
    unknown_bodies = tuple(unknown_bodies)
    for b in unknown_bodies:
        if b not in model.bodies:
            raise ModelError(f"unknown body {b!r} is not a body of the model ({', '.join(model.bodies)})")
    if not unknown_bodies:
        raise IdentificationError("no unknown body given")
    if not experiments:
        raise IdentificationError("no experiment given")
    if samples not in ("all", "snapshot"):
        raise ValueError(f"samples must be 'all' or 'snapshot', got {samples!r}")
    if not length_scale > 0:
        raise ValueError(f"length_scale must be > 0, got {length_scale}")
    theta_known = np.asarray(theta_known, float)
    if theta_known.shape != (model.n_params,):
        raise ModelError(f"theta_known has {theta_known.shape} entries, the model {model.n_params}")
    ucols = model.columns(unknown_bodies)
    kcols = np.setdiff1d(np.arange(model.n_params), ucols)
    if not np.any(theta_known[kcols]):
        raise IdentificationError(
            "all known parameters are zero: momentum conservation is homogeneous in the parameters, "
            "so the unknowns are determined only relative to known (CAD) bodies")
    rows_A, rows_b, omegas = [], [], []
    w = np.array([1, 1, 1, 1 / length_scale, 1 / length_scale, 1 / length_scale])
    n_samples = 0
    for e in experiments:
        if e.q.shape[1] != model.n:
            raise ValueError(f"experiment has {e.q.shape[1]} joints, the model {model.n}")
        idx = [e.peak_index()] if samples == "snapshot" else np.arange(0, e.t.shape[0], stride)
        Y = model.momentum_regressor(e.q[idx], e.qd[idx], e.base_twist[idx])   # (N, 6, p)
        Yw = Y * w[None, :, None]
        rows_A.append(Yw[:, :, ucols].reshape(-1, ucols.size))
        rows_b.append(-(Yw[:, :, kcols] @ theta_known[kcols]).reshape(-1))
        # each unknown body's angular velocity (own frame), for the inertia excitation check
        omegas.append(_body_omegas(model, e, idx, unknown_bodies))
        n_samples += len(idx)
    names = tuple(model.names[c] for c in ucols)
    return MomentumSystem(np.vstack(rows_A), np.concatenate(rows_b), names, unknown_bodies, float(length_scale),
                          n_samples, tuple(e.driven for e in experiments), np.vstack(omegas))


def _body_omegas(model: FloatingBaseModel, e: MomentumExperiment, idx, bodies) -> np.ndarray:
    out = np.empty((len(idx), 3 * len(bodies)))
    m, d = model.model, model.data
    for r, s in enumerate(idx):
        q, v = model.pin_state(e.q[s], e.qd[s], e.base_twist[s])
        pin.forwardKinematics(m, d, q, v)
        for k, b in enumerate(bodies):
            if b == model.payload_name:
                fr = m.frames[model._payload_fid]
                w = fr.placement.actInv(d.v[fr.parentJoint]).angular
            else:
                w = d.v[model.bodies.index(b) + 1].angular
            out[r, 3 * k: 3 * k + 3] = w
    return out


# ------------------------------------------------------------- identifiability
@dataclass
class IdentifiabilityReport:
    rank: int
    n_unknowns: int
    condition_number: float          # of the column-normalised matrix
    singular_values: np.ndarray      # of the column-normalised matrix, descending
    rank_rtol: float
    null_directions: list[dict[str, float]]   # per missing rank: the parameters it mixes
    omega_span: dict[str, np.ndarray]         # per unknown body: singular values of its angular velocities / max
    omega_rtol: float = 0.0
    weak_inertia: list[str] = field(default_factory=list)   # bodies whose omega span is below omega_rtol

    @property
    def full_rank(self) -> bool:
        return self.rank == self.n_unknowns

    @property
    def identifiable(self) -> bool:
        return self.full_rank and not self.weak_inertia

    def summary(self) -> str:
        spans = "; ".join(f"{b}: " + " ".join(f"{x:.2e}" for x in s) for b, s in self.omega_span.items())
        return (f"rank {self.rank} of {self.n_unknowns}, condition number {self.condition_number:.3g} "
                f"(column-normalised), angular-velocity span {spans}")


def check_identifiability(system: MomentumSystem, rank_rtol: float = 1e-6, omega_rtol: float = 0.03,
                          raise_on_singular: bool = True) -> IdentifiabilityReport:
    """Rank and condition number of the stacked system; IdentificationError when singular.

    rank_rtol: singular values of the column-normalised matrix below rank_rtol * largest
    count as zero (exact or near-exact singularity, e.g. two snapshots).
    omega_rtol: an unknown body's inertia also counts as singular when the third singular
    value of its stacked angular velocities is below omega_rtol * the first: the samples
    turn it about (nearly) coplanar axes, the case of two single-joint rest-to-rest
    experiments, where only the small drift of the rotation axis within each experiment
    separates the inertia direction n n^T (n normal to that plane) from zero -- a
    direction that velocity noise of a fraction nu perturbs by about nu / span. Rest-to-rest
    motions of 0.5 rad give spans of 0.3-2 % from that drift alone; an experiment that
    genuinely turns the base about a third axis gives 5-15 %. Set omega_rtol=0 to rely on
    the rank test only."""
    A = system.A
    norms = np.linalg.norm(A, axis=0)
    p = A.shape[1]
    if A.shape[0] < p:
        raise IdentificationError(f"{A.shape[0]} momentum equations for {p} unknowns: stack more experiments")
    zero = norms == 0
    An = A / np.where(zero, 1.0, norms)
    _, s, Vt = np.linalg.svd(An, full_matrices=False)
    rank = int(np.sum(s > rank_rtol * s[0]))
    cond = float(s[0] / s[-1]) if s[-1] > 0 else math.inf
    nulls = []
    for k in range(rank, p):
        vec = Vt[k]
        order = np.argsort(-np.abs(vec))
        nulls.append({system.names[i]: float(vec[i]) for i in order if abs(vec[i]) > 0.1})
    spans = {}
    for k, b in enumerate(system.unknown_bodies):
        W = system.omega_unknown[:, 3 * k: 3 * k + 3]
        sw = np.linalg.svd(W, compute_uv=False)
        spans[b] = sw / sw[0] if sw[0] > 0 else sw
    weak = [b for b, sp in spans.items() if len(sp) < 3 or sp[2] < omega_rtol]
    rep = IdentifiabilityReport(rank, p, cond, s, rank_rtol, nulls, spans, omega_rtol, weak)
    if raise_on_singular and rep.full_rank and weak:
        raise IdentificationError(
            f"the inertia of {', '.join(weak)} is not identifiable: its angular velocities turn about nearly "
            f"coplanar axes (third/first singular value of the stacked angular velocities "
            + ", ".join(f"{b} {spans[b][2] if len(spans[b]) > 2 else 0.0:.3g}" for b in weak)
            + f" < omega_rtol {omega_rtol:g}; {rep.summary()}). Excite at least three joints whose motions turn "
              "the body about independent axes (source C)")
    if raise_on_singular and not rep.full_rank:
        lines = [f"the stacked momentum equations are singular: {rep.summary()}."]
        for k, nd in enumerate(nulls):
            lines.append(f"unidentifiable combination {k + 1}: "
                         + ", ".join(f"{n} {v:+.2f}" for n, v in nd.items()))
        inertia_bad = any(any(n.split(".")[1] in ("Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz") for n in nd)
                          for nd in nulls)
        if inertia_bad:
            lines.append("the inertia needs base angular velocities in three independent directions: "
                         "excite at least three joints (source C), with rotation axes that are not coplanar")
        raise IdentificationError(" ".join(lines))
    return rep


# -------------------------------------------------------------------- estimators
@dataclass
class FloatingBaseEstimate:
    method: str
    names: tuple[str, ...]
    values: np.ndarray
    std: np.ndarray | None
    identifiability: IdentifiabilityReport
    residual_rms: float             # of the scaled momentum equations, kg*m/s
    n_samples: int
    n_rows: int
    wall_time: float
    extra: dict = field(default_factory=dict)

    def value(self, name: str) -> float:
        return float(self.values[self.names.index(name)])

    def body(self, body: str) -> np.ndarray:
        """The 10 parameters of one unknown body (Pinocchio order)."""
        return np.array([self.value(f"{body}.{s}") for s in INERTIAL_SYMBOLS])

    def physical(self) -> dict[str, tuple[bool, str]]:
        """Per estimated body: (physically consistent?, reason) -- positive mass, inertia about
        the centre of mass positive definite and satisfying the triangle inequalities."""
        from .io.urdf_export import body_is_physical
        bodies = dict.fromkeys(n.rsplit(".", 1)[0] for n in self.names)
        return {b: body_is_physical(self.body(b)) for b in bodies}

    def into(self, theta: np.ndarray, model: FloatingBaseModel) -> np.ndarray:
        """A copy of the full parameter vector theta with the estimated entries written in."""
        out = np.array(theta, float)
        for n, v in zip(self.names, self.values):
            out[model.names.index(n)] = v
        return out


def solve_least_squares(system: MomentumSystem, rank_rtol: float = 1e-6, omega_rtol: float = 0.03
                        ) -> FloatingBaseEstimate:
    """Least squares on the stacked momentum equations; refuses a singular system."""
    t0 = time.perf_counter()
    rep = check_identifiability(system, rank_rtol, omega_rtol)
    A, b = system.A, system.b
    norms = np.linalg.norm(A, axis=0)
    An = A / norms
    xn, *_ = np.linalg.lstsq(An, b, rcond=None)
    x = xn / norms
    r = b - A @ x
    dof = max(A.shape[0] - A.shape[1], 1)
    sigma2 = float(r @ r) / dof
    cov_n = sigma2 * np.linalg.inv(An.T @ An)
    std = np.sqrt(np.clip(np.diag(cov_n), 0, None)) / norms
    return FloatingBaseEstimate("ls", system.names, x, std, rep, float(np.sqrt(np.mean(r ** 2))),
                                system.n_samples, system.n_rows, time.perf_counter() - t0)


def ga_bounds(nominal10: np.ndarray, rel: float = 0.5, com_box: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Search box around a CAD guess of one body: mass and diagonal inertias +-rel, centre of
    mass +-com_box (m) around the guess, products of inertia +-rel of the mean diagonal
    inertia. Returns (lower, upper) in Pinocchio order."""
    x = np.asarray(nominal10, float)
    m = x[0]
    c = x[1:4] / m
    Ic = pin.Inertia.FromDynamicParameters(x).inertia
    dI = rel * np.trace(Ic) / 3
    lo, hi = np.empty(10), np.empty(10)
    lo[0], hi[0] = m * (1 - rel), m * (1 + rel)
    # first moments over the mass and centre-of-mass ranges
    for i in range(3):
        cands = [mm * cc for mm in (lo[0], hi[0]) for cc in (c[i] - com_box, c[i] + com_box)]
        lo[1 + i], hi[1 + i] = min(cands), max(cands)
    for k, idx in enumerate((4, 6, 9)):      # Ixx, Iyy, Izz about the joint frame
        lo[idx], hi[idx] = x[idx] * (1 - rel), x[idx] * (1 + rel)
    for idx in (5, 7, 8):                    # Ixy, Ixz, Iyz
        lo[idx], hi[idx] = x[idx] - dI, x[idx] + dI
    return lo, hi


def payload_ga_bounds(max_mass: float, max_distance: float) -> tuple[np.ndarray, np.ndarray]:
    """Search box for an unknown payload: mass in (0, max_mass], centre of mass within
    max_distance of the grasp frame, inertia about the grasp frame bounded accordingly."""
    J = max_mass * max_distance ** 2
    lo = np.array([0.0, -max_mass * max_distance, -max_mass * max_distance, -max_mass * max_distance,
                   0.0, -J / 2, 0.0, -J / 2, -J / 2, 0.0])
    hi = np.array([max_mass, max_mass * max_distance, max_mass * max_distance, max_mass * max_distance,
                   2 * J, J / 2, 2 * J, J / 2, J / 2, 2 * J])
    return lo, hi


def solve_ga(system: MomentumSystem, lower: np.ndarray, upper: np.ndarray, generations: int = 1600,
             population: int = 100, seed: int = 1, rounds: int = 8, shrink: float = 0.25, rank_rtol: float = 1e-6,
             omega_rtol: float = 0.03) -> FloatingBaseEstimate:
    """Genetic algorithm (pymoo GA: tournament selection, SBX crossover, polynomial mutation)
    minimising the squared momentum mismatch ||A x - b||^2 within the box [lower, upper]
    (source D). The cost is evaluated through the normal equations, so a generation costs
    microseconds. `rounds` > 1 restarts the GA (generations // rounds each) in a box
    centred on the best individual, of half-width max(4 standard deviations of the final
    population, `shrink` x the previous half-width) per variable, never outside the
    original box: in one wide box the GA's answer is limited to about 1e-4 of the box
    width, which for a payload's products of inertia is tens of percent. Defaults (1600
    generations in 8 rounds of 200, population 100, shrink 0.25) reached the noise-free
    optimum within 0.01 % (mass, inertia) on 12 of 12 seeds of the demo's base and payload;
    100-generation rounds sometimes shrank around a wrong point (7 % inertia error)."""
    from pymoo.algorithms.soo.nonconvex.ga import GA
    from pymoo.core.problem import Problem
    from pymoo.optimize import minimize

    t0 = time.perf_counter()
    rep = check_identifiability(system, rank_rtol, omega_rtol)
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    p = system.A.shape[1]
    if lower.shape != (p,) or upper.shape != (p,) or not np.all(upper > lower):
        raise IdentificationError(f"GA bounds must be {p} pairs with upper > lower")
    if rounds < 1 or generations < rounds:
        raise IdentificationError(f"GA needs rounds >= 1 and generations >= rounds, got {rounds}, {generations}")
    A, b = system.A, system.b
    lo, hi = lower.copy(), upper.copy()
    history = []
    x = None
    for r in range(rounds):
        centre, half = (hi + lo) / 2, (hi - lo) / 2
        Ah = A * half
        G = Ah.T @ Ah
        r0 = b - A @ centre
        g = Ah.T @ r0
        c0 = float(r0 @ r0)
        scale = c0 if c0 > 0 else 1.0

        class _Cost(Problem):
            def __init__(self):
                super().__init__(n_var=p, n_obj=1, xl=-np.ones(p), xu=np.ones(p))

            def _evaluate(self, Z, out, *args, **kwargs):
                out["F"] = (np.einsum("ij,jk,ik->i", Z, G, Z) - 2 * Z @ g + c0) / scale

        res = minimize(_Cost(), GA(pop_size=population, eliminate_duplicates=True),
                       ("n_gen", generations // rounds), seed=seed + r, verbose=False)
        x = centre + half * np.asarray(res.X, float)
        popX = centre + half * res.pop.get("X")
        history.append(float(res.F[0]) * scale)
        spread = np.maximum(4 * popX.std(axis=0), shrink * half)
        lo, hi = np.maximum(lower, x - spread), np.minimum(upper, x + spread)
    r = b - A @ x
    return FloatingBaseEstimate("ga", system.names, x, None, rep, float(np.sqrt(np.mean(r ** 2))),
                                system.n_samples, system.n_rows, time.perf_counter() - t0,
                                extra={"generations": generations, "population": population, "rounds": rounds,
                                       "cost": float(r @ r), "cost_per_round": history})


def identify(model: FloatingBaseModel, experiments: Sequence[MomentumExperiment], unknown_bodies: Sequence[str],
             theta_known: np.ndarray, method: str = "ls", samples: str = "all", length_scale: float = 1.0,
             stride: int = 1, rank_rtol: float = 1e-6, omega_rtol: float = 0.03, bounds: tuple[np.ndarray, np.ndarray] | None = None,
             **ga_options) -> FloatingBaseEstimate:
    """Stack the experiments and solve for the unknown bodies with "ls" or "ga".
    The estimate's wall_time includes stacking the equations."""
    if method not in ("ls", "ga"):
        raise IdentificationError(f"unknown method {method!r}: use 'ls' or 'ga'")
    if method == "ga" and bounds is None:
        raise IdentificationError("the GA needs search bounds (ga_bounds / payload_ga_bounds)")
    t0 = time.perf_counter()
    system = stack_momentum_equations(model, experiments, unknown_bodies, theta_known, samples,
                                      length_scale, stride)
    if method == "ls":
        est = solve_least_squares(system, rank_rtol, omega_rtol)
    else:
        est = solve_ga(system, bounds[0], bounds[1], rank_rtol=rank_rtol, omega_rtol=omega_rtol, **ga_options)
    est.wall_time = time.perf_counter() - t0
    return est


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
