"""Payload identification with the arm's model known.

A payload is a rigid body fixed to a link of the arm (the flange, e.g. ``tool0``). Its
10 inertial parameters ``phi`` (Pinocchio's order ``m, mx, my, mz, Ixx, Ixy, Iyy, Ixz,
Iyz, Izz``) are expressed in that link's frame. The body that carries it is the
moving body of the frame's parent joint; the payload adds ``T phi`` to that body's
parameters, where ``T`` (10 x 10) is the linear map of Pinocchio's ``Inertia.se3Action``
from the payload frame to the joint frame (built from Pinocchio, not re-derived).

Equations, rows of the joints that move (outside the friction dead band):

    tau_measured - tau_arm(q, qd, qdd) = Y_body(q, qd, qdd) T phi + Y_nuisance delta

``tau_arm`` comes from the known arm: a previous result (base parameters, friction,
offsets) or the URDF's CAD values. ``delta`` are corrections of the moving joints'
actuator parameters (offset drift always; armature and friction too when the arm
comes from the URDF, which knows none of them).

Which of the 10 the data determine: the weighted, column-scaled regressor
``[Y_body T, Y_nuisance]`` is decomposed by SVD; a parameter is *determined* when its
unit vector lies in the row space (its component in the numerical null space is below
1e-6), and *well determined* when in addition its standard deviation is below 10 % of
``max(|value|, floor)`` (floors: 10 g for the mass, m x 5 mm for the first moments,
m x (2 cm)^2 for the inertia). Undetermined directions are set by the minimum-norm
solution (scaled units) and are reported as such, never as an estimate.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from .. import defaults
from ..errors import ModelError, SignalError
from ..model.robot import INERTIAL_SYMBOLS, RobotModel

NULL_TOL = 1e-6          # null-space component below which a parameter is determined
RANK_TOL = 1e-7          # singular value / largest, scaled columns


def frame_transform_matrix(placement: pin.SE3) -> np.ndarray:
    """(10, 10) T with dyn_joint = T @ dyn_frame for any inertia expressed in the frame
    whose placement in the joint frame is `placement` (linear, built by Pinocchio on a
    basis of ten physical inertias)."""
    rng = np.random.default_rng(12345)
    P = np.empty((10, 10))
    Q = np.empty((10, 10))
    for k in range(10):
        R = pin.rpy.rpyToMatrix(*rng.uniform(-np.pi, np.pi, 3))
        I = pin.Inertia(float(rng.uniform(0.5, 2.0)), rng.uniform(-0.2, 0.2, 3),
                        R @ np.diag(rng.uniform(0.01, 0.02, 3)) @ R.T)
        P[:, k] = I.toDynamicParameters()
        Q[:, k] = placement.act(I).toDynamicParameters()
    return Q @ np.linalg.inv(P)


class PayloadModel:
    """Where the payload sits on the arm, and its regressor columns."""

    def __init__(self, model: RobotModel, frame: str = defaults.PAYLOAD_FRAME):
        pm = model.model
        if not pm.existFrame(frame, pin.FrameType.BODY):
            links = sorted({f.name for f in pm.frames if f.type == pin.FrameType.BODY})
            raise ModelError(f"payload frame {frame!r} is not a link of URDF {model.urdf_label}; "
                             f"links: {', '.join(links)}")
        f = pm.frames[pm.getFrameId(frame, pin.FrameType.BODY)]
        parent = int(f.parentJoint if hasattr(f, "parentJoint") else f.parent)
        if parent == 0:
            raise ModelError(f"payload frame {frame!r} is not moved by any identified joint "
                             f"({', '.join(model.joint_names)})")
        self.model = model
        self.frame = frame
        self.body = pm.names[parent]
        self.placement = pin.SE3(f.placement)
        self.T = frame_transform_matrix(self.placement)
        self.body_slice = model.layout.inertial_slice(self.body)

    def names(self) -> list[str]:
        return [f"payload.{s}" for s in INERTIAL_SYMBOLS]

    def columns(self, Y_standard: np.ndarray) -> np.ndarray:
        """(rows, 10) payload columns from a stacked standard regressor of `model`."""
        return Y_standard[:, self.body_slice] @ self.T

    def add_to(self, theta: np.ndarray, phi: np.ndarray) -> np.ndarray:
        """Standard parameter vector with the payload added to its carrying body."""
        out = np.array(theta, dtype=float, copy=True)
        out[self.body_slice] += self.T @ np.asarray(phi, float)
        return out

    def excited_joints(self, joints) -> list[str]:
        """The given joints that move the payload (on the path from the base to its body)."""
        pm = self.model.model
        jid = pm.getJointId(self.body)
        support = {pm.names[i] for i in pm.supports[jid]}
        return [j for j in joints if j in support]


@dataclass
class PayloadEstimate:
    frame: str
    values: np.ndarray                # (10,) in the payload frame
    std: np.ndarray                   # (10,)
    determined: np.ndarray            # (10,) bool: in the row space of the data
    well_determined: np.ndarray       # (10,) bool: determined and std below 10 % of the scale
    rank: int                         # of [payload, nuisance] columns together
    nuisance_names: list[str]
    nuisance_values: np.ndarray
    nuisance_std: np.ndarray
    joints_used: list[str]
    n_samples: int
    n_rows: int
    residual_rms: dict                # per joint used, raw effort minus prediction
    condition_number: float
    notes: list[str] = field(default_factory=list)
    # joints whose residual follows what the model lacks (structure_check.judge_structure)
    misses_structure: list = field(default_factory=list)

    @property
    def mass(self) -> float:
        return float(self.values[0])

    @property
    def com(self) -> np.ndarray:
        m = self.values[0]
        return self.values[1:4] / m if m > 0 else np.full(3, np.nan)

    @property
    def com_std(self) -> np.ndarray:
        """First-order std of the centre of mass (correlation of m and m c neglected)."""
        m = self.values[0]
        c = self.com
        return np.sqrt(self.std[1:4] ** 2 + (c * self.std[0]) ** 2) / abs(m) if m > 0 else np.full(3, np.nan)

    def inertia(self) -> pin.Inertia:
        return pin.Inertia.FromDynamicParameters(self.values)

    def physical(self) -> tuple[bool, str]:
        from ..model.pseudo_inertia import body_is_physical
        return body_is_physical(self.values)

    def physical_values(self) -> tuple[np.ndarray, str]:
        """The estimate, or the nearest physical body with the same mass and centre of
        mass (inertia about the centre of mass: eigenvalues raised to satisfy positivity
        and the triangle inequality), and a note saying which."""
        ok, why = self.physical()
        if ok:
            return self.values.copy(), ""
        m = self.mass
        if not m > 0:
            raise ModelError(f"identified payload mass {m:.4g} kg is not positive: no physical payload")
        Ic = pin.Inertia.FromDynamicParameters(self.values).inertia
        w, V = np.linalg.eigh(0.5 * (Ic + Ic.T))
        floor = max(1e-6, 1e-3 * max(w[-1], 0.0))
        w = np.maximum(w, floor)
        w[2] = min(w[2], w[0] + w[1])
        fixed = pin.Inertia(m, self.com, V @ np.diag(w) @ V.T).toDynamicParameters()
        return fixed, f"inertia projected to the nearest physical one ({why})"

    def to_dict(self) -> dict:
        names = [f"{s}" for s in INERTIAL_SYMBOLS]
        vals, note = self.physical_values() if self.mass > 0 else (self.values, "")
        I = pin.Inertia.FromDynamicParameters(vals) if self.mass > 0 else None
        d = {
            "frame": self.frame,
            "mass": float(self.mass), "mass_std": float(self.std[0]),
            "com": [float(v) for v in self.com], "com_std": [float(v) for v in self.com_std],
            "inertia_about_com": None if I is None else [[float(x) for x in row] for row in I.inertia],
            "parameters": [{"name": n, "value": float(v), "std": float(s), "determined": bool(dt),
                            "well_determined": bool(w)}
                           for n, v, s, dt, w in zip(names, self.values, self.std, self.determined,
                                                     self.well_determined)],
            "misses_structure": list(self.misses_structure),
            "rank": int(self.rank), "unknowns": 10 + len(self.nuisance_names),
            "condition_number": float(self.condition_number),
            "determined": [n for n, dt in zip(names, self.determined) if dt],
            "not_determined": [n for n, dt in zip(names, self.determined) if not dt],
            "poorly_determined": [n for n, dt, w in zip(names, self.determined, self.well_determined)
                                  if dt and not w],
            "nuisance": [{"name": n, "value": float(v), "std": float(s)}
                         for n, v, s in zip(self.nuisance_names, self.nuisance_values, self.nuisance_std)],
            "joints_used": list(self.joints_used), "samples": int(self.n_samples), "equations": int(self.n_rows),
            "residual_rms": {j: float(v) for j, v in self.residual_rms.items()},
            "notes": list(self.notes) + ([note] if note else []),
        }
        return d


def _scales(m: float) -> np.ndarray:
    m = max(abs(m), 0.01)
    return np.array([0.01] + [m * 0.005] * 3 + [m * 0.02 ** 2] * 6)


def solve_payload(A: np.ndarray, b: np.ndarray, row_joint: np.ndarray, n_payload: int = 10,
                  passes: int = 2):
    """Weighted LS of b = A x with per-joint weights from the residual variance.
    Returns (x, cov, determined, rank, cond, sigma_per_joint)."""
    joints = np.unique(row_joint)
    w = np.ones(len(b))
    for _ in range(passes):
        Aw, bw = A * w[:, None], b * w
        scale = np.linalg.norm(Aw, axis=0)
        scale[scale == 0] = 1.0
        U, s, Vt = np.linalg.svd(Aw / scale, full_matrices=False)
        r = int((s > RANK_TOL * s[0]).sum())
        z = Vt[:r].T @ ((U[:, :r].T @ bw) / s[:r])
        x = z / scale
        res = b - A @ x
        sig = np.ones(row_joint.max() + 1)
        for j in joints:
            rows = row_joint == j
            sig[j] = max(float(np.sqrt(np.mean(res[rows] ** 2))), 1e-12)
        w = 1.0 / sig[row_joint]
    # covariance of the determined part (pseudo-inverse), weights already 1/sigma
    Aw = A * w[:, None]
    scale = np.linalg.norm(Aw, axis=0)
    scale[scale == 0] = 1.0
    U, s, Vt = np.linalg.svd(Aw / scale, full_matrices=False)
    r = int((s > RANK_TOL * s[0]).sum())
    Vr = Vt[:r].T
    dof = max(len(b) - r, 1)
    chi = float(np.sum((w * (b - A @ x)) ** 2) / dof)
    cov_z = (Vr / s[:r] ** 2) @ Vr.T * chi
    cov = cov_z / np.outer(scale, scale)
    null = Vt[r:].T
    determined = np.ones(A.shape[1], dtype=bool) if null.size == 0 else np.linalg.norm(null, axis=1) < NULL_TOL
    cond = float(s[0] / s[r - 1]) if r == A.shape[1] else float("inf")
    return x, cov, determined, r, cond, sig


def identify_payload(model: RobotModel, pm: PayloadModel, q, qd, qdd, effort, row_mask, arm_prediction,
                     nuisance_symbols=("off",), min_range: float = 0.05) -> PayloadEstimate:
    """Estimate the payload from processed data of `model`'s joints.

    `row_mask` (N, n) selects usable rows (outside the dead band); only joints that move
    the payload and whose range exceeds `min_range` contribute. `arm_prediction` maps the
    stacked standard regressor (N*n, n_std) of the samples to the known arm's efforts (N*n,)
    (e.g. ``KnownArm.predict_from_regressor``)."""
    N, n = np.shape(q)
    moving = [j for k, j in enumerate(model.joint_names) if np.ptp(q[:, k]) > min_range]
    used = pm.excited_joints(moving)
    if not used:
        raise SignalError(f"no joint that carries payload frame {pm.frame!r} moves in the data "
                          f"(moving joints: {', '.join(moving) or 'none'})")
    Ys = model.regressor(q, qd, qdd)
    tau_arm = np.asarray(arm_prediction(Ys), float).reshape(N, n)
    Y = Ys.reshape(N, n, -1)
    cols = []
    nuis_names = []
    for j in used:
        for s in nuisance_symbols:
            name = f"{j}.{s}"
            if s in model.layout.actuator_symbols:
                cols.append(model.layout.index(name))
                nuis_names.append(name)
    k_used = np.array([model.joint_names.index(j) for j in used])
    mask = np.asarray(row_mask, bool)[:, k_used]
    s_idx, j_idx = np.nonzero(mask)
    jk = k_used[j_idx]
    if len(s_idx) < 30:
        raise SignalError(f"only {len(s_idx)} usable equations for the payload (joints {', '.join(used)} "
                          "outside the dead band): record a longer or faster excitation")
    Yr = Y[s_idx, jk]                                   # (rows, n_std), sample-major order kept
    A = np.hstack([pm.columns(Yr), Yr[:, cols]])
    b = np.asarray(effort)[s_idx, jk] - tau_arm[s_idx, jk]
    x, cov, det, r, cond, sig = solve_payload(A, b, j_idx)
    std = np.sqrt(np.maximum(np.diag(cov), 0.0))
    phi, phi_std = x[:10], std[:10]
    well = det[:10] & (phi_std < 0.1 * np.maximum(np.abs(phi), _scales(phi[0])))
    notes = []
    if r < A.shape[1]:
        notes.append(f"rank {r} of {A.shape[1]}: the motion does not determine "
                     + ", ".join(n for n, d in zip(pm.names() + nuis_names, det) if not d))
    if not phi[0] > 0:
        notes.append(f"identified mass {phi[0]:.4g} kg is not positive: is there a payload, is the arm model right?")
    rms = {j: float(sig[k]) for k, j in enumerate(used)}
    from ..data.signals import ProcessedData
    from .structure_check import structure_of_rows
    effort = np.asarray(effort, float)
    samples = ProcessedData(np.zeros(N), model.joint_names, np.asarray(q), np.asarray(qd), np.asarray(qdd), effort,
                            effort)
    _, missed = structure_of_rows(model, samples, s_idx, jk, A, b, x)
    return PayloadEstimate(pm.frame, phi, phi_std, det[:10], well, r, nuis_names, x[10:], std[10:], used,
                           int(N), int(len(b)), rms, cond, notes, missed)


# --------------------------------------------------------------------------- config
_PAYLOAD_KEYS = {"frame", "joints", "pose", "name", "known_arm"}


@dataclass(frozen=True)
class PayloadConfig:
    """The `payload:` section of the parameter file (every key optional)::

        payload:
          frame: tool0                      # link the payload is fixed to
          joints: [wrist_1, wrist_2, wrist_3]   # excited joints (design; default: the last
                                                # three identified joints that carry the frame)
          pose: {shoulder_lift: -1.2, elbow: 1.4}   # where the other joints are held (default 0
                                                    # or mid-range when 0 is outside the limits)
          name: payload                     # link name in the identified URDF
          known_arm: result_dir             # default arm model for the node (result folder)
    """

    frame: str = defaults.PAYLOAD_FRAME
    joints: tuple | None = None
    pose: dict = field(default_factory=dict)
    name: str = "payload"
    known_arm: str | None = None

    def excited(self, model: RobotModel) -> list[str]:
        pm = PayloadModel(model, self.frame)
        carrying = pm.excited_joints(model.joint_names)
        if self.joints is None:
            return carrying[-3:]
        bad = [j for j in self.joints if j not in carrying]
        if bad:
            raise ModelError(f"payload.joints: {', '.join(bad)} do(es) not carry frame {self.frame!r} "
                             f"(joints that do: {', '.join(carrying)})")
        return list(self.joints)

    def held_pose(self, model: RobotModel, excited) -> dict:
        out = {}
        lim = model.limits
        for k, j in enumerate(model.joint_names):
            if j in excited:
                continue
            v = float(self.pose.get(j, 0.0))
            if not lim.lower[k] <= v <= lim.upper[k]:
                if j in self.pose:
                    raise ModelError(f"payload.pose.{j}: {v} is outside the joint's limits "
                                     f"[{lim.lower[k]}, {lim.upper[k]}]")
                v = 0.5 * (lim.lower[k] + lim.upper[k])
            out[j] = v
        return out


def payload_config(section, model: RobotModel | None = None, where: str = "payload") -> PayloadConfig:
    from ..errors import ConfigError
    from ..util.config_keys import check_keys

    s = dict(section or {})
    check_keys(s, _PAYLOAD_KEYS, where)
    frame = s.get("frame", "tool0")
    name = s.get("name", "payload")
    for key, v in (("frame", frame), ("name", name)):
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{where}.{key}: expected a name, got {v!r}")
    joints = s.get("joints")
    if joints is not None:
        if not (isinstance(joints, (list, tuple)) and joints and all(isinstance(j, str) for j in joints)):
            raise ConfigError(f"{where}.joints: expected a list of joint names, got {joints!r}")
        joints = tuple(joints)
    pose = s.get("pose") or {}
    if not isinstance(pose, dict) and not hasattr(pose, "items"):
        raise ConfigError(f"{where}.pose: expected a mapping joint -> position")
    pose_d = {}
    for j, v in pose.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise ConfigError(f"{where}.pose.{j}: expected a number, got {v!r}")
        if model is not None and j not in model.joint_names:
            raise ConfigError(f"{where}.pose.{j}: not an identified joint ({', '.join(model.joint_names)})")
        pose_d[str(j)] = float(v)
    known = s.get("known_arm")
    if known is not None and not isinstance(known, str):
        raise ConfigError(f"{where}.known_arm: expected a result folder path, got {known!r}")
    cfg = PayloadConfig(frame, joints, pose_d, name, known)
    if model is not None:
        try:
            cfg.excited(model)
        except ModelError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
    return cfg
