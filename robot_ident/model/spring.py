"""Springs between two links (gravity balancers) as part of the model.

A spring connects point ``a`` of link A to point ``b`` of link B (each in its link's
frame). Its length is ``L(q) = |p_b - p_a|`` and its force along the line, positive in
tension (pulling the points together; a compression balancer has a negative force):

    f = F0 + K (L - L_ref)

``K`` is the stiffness [N/m], ``F0`` the preload: the force at the reference length
``L_ref`` (by default the length at q = 0). The free length is ``L_ref - F0 / K``.
The torques the actuators must add are ``tau_spring = f dL/dq`` (the spring's
generalised force is ``-f dL/dq``), so for known attachment geometry they are linear in
``(K, F0)``:

    tau_spring = K (L - L_ref) dL/dq + F0 dL/dq

``dL/dq = u^T (J_b - J_a)`` with ``u`` the unit vector from a to b and ``J`` the
translational Jacobians of the points (Pinocchio's joint Jacobians in the
LOCAL_WORLD_ALIGNED frame, shifted to the point).

`SpringRobotModel` is a `RobotModel` whose standard layout ends with ``<spring>.K`` and
``<spring>.F0`` per spring, so base parameters, every estimator, the result file (with
standard deviations) and the validation treat them like the other parameters.
The ``springs:`` section of the parameter file::

    springs:
      balancer:
        link_a: turret_link             # link and point (in its frame) of one end
        point_a: [0.25, 0.0, 1.1]
        link_b: upper_arm
        point_b: [0.0, 0.0, 0.4]
        stiffness: 6000.0               # N/m: nominal (CAD) value, the prior
        free_length: 0.05               # m (or preload: N at the reference length)
        reference_length: null          # m, default: the length at q = 0
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, ModelError
from ..util.config_keys import check_keys
from .robot import ParameterLayout, RobotModel

SPRING_SYMBOLS = ("K", "F0")


@dataclass(frozen=True)
class SpringSpec:
    name: str
    link_a: str
    point_a: tuple
    link_b: str
    point_b: tuple
    stiffness: float = 0.0                 # nominal K [N/m]
    free_length: float | None = None       # m; or preload
    preload: float | None = None           # N at the reference length (tension positive)
    reference_length: float | None = None  # m; None: the length at q = 0


class SpringSet:
    """Geometry of the springs on a RobotModel: lengths and torque columns."""

    def __init__(self, model: RobotModel, specs):
        self.model = model
        self.specs = tuple(specs)
        pm = model.model
        self._ends = []
        for s in self.specs:
            ends = []
            for link, point in ((s.link_a, s.point_a), (s.link_b, s.point_b)):
                if not pm.existFrame(link, pin.FrameType.BODY):
                    raise ModelError(f"spring {s.name!r}: {link!r} is not a link of URDF {model.urdf_label}")
                f = pm.frames[pm.getFrameId(link, pin.FrameType.BODY)]
                jid = int(f.parentJoint if hasattr(f, "parentJoint") else f.parent)
                ends.append((jid, pin.SE3(f.placement).act(np.asarray(point, float))))
            if ends[0][0] == ends[1][0]:
                raise ModelError(f"spring {s.name!r}: {s.link_a!r} and {s.link_b!r} move together; "
                                 "the spring would never change length")
            self._ends.append(ends)
        q0 = np.zeros((1, model.n))
        self.reference_lengths = np.array([
            s.reference_length if s.reference_length is not None else self.lengths(q0)[0, k]
            for k, s in enumerate(self.specs)])
        self.nominal = np.zeros(2 * len(self.specs))
        for k, s in enumerate(self.specs):
            K = float(s.stiffness)
            if s.preload is not None:
                F0 = float(s.preload)
            elif s.free_length is not None:
                F0 = K * (self.reference_lengths[k] - float(s.free_length))
            else:
                F0 = 0.0
            self.nominal[2 * k: 2 * k + 2] = (K, F0)

    @property
    def names(self) -> list[str]:
        return [f"{s.name}.{sym}" for s in self.specs for sym in SPRING_SYMBOLS]

    def _points(self, data, ends):
        out = []
        for jid, p in ends:
            M = data.oMi[jid]
            out.append((jid, M.act(p), M.rotation))
        return out

    def lengths(self, q) -> np.ndarray:
        q = np.atleast_2d(np.asarray(q, float))
        m, d = self.model.model, self.model.model.createData()
        out = np.empty((q.shape[0], len(self.specs)))
        for s in range(q.shape[0]):
            pin.forwardKinematics(m, d, self.model.to_pinocchio_q(q[s]))
            for k, ends in enumerate(self._ends):
                (_, pa, _), (_, pb, _) = self._points(d, ends)
                out[s, k] = np.linalg.norm(pb - pa)
        return out

    def columns(self, q) -> np.ndarray:
        """(N, n, 2 * springs) effort columns of (K, F0) per spring, identified joint order."""
        q = np.atleast_2d(np.asarray(q, float))
        mdl = self.model
        m, d = mdl.model, mdl.model.createData()
        out = np.zeros((q.shape[0], mdl.n, 2 * len(self.specs)))
        idx_v = mdl._idx_v
        for s in range(q.shape[0]):
            pin.computeJointJacobians(m, d, mdl.to_pinocchio_q(q[s]))
            for k, ends in enumerate(self._ends):
                pts = self._points(d, ends)
                (_, pa, _), (_, pb, _) = pts
                L = float(np.linalg.norm(pb - pa))
                if L < 1e-9:
                    raise ModelError(f"spring {self.specs[k].name!r}: attachment points coincide")
                u = (pb - pa) / L
                dL = np.zeros(m.nv)
                for sign, (jid, p, _) in zip((-1.0, 1.0), pts):
                    if jid == 0:
                        continue
                    J = pin.getJointJacobian(m, d, jid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
                    r = p - d.oMi[jid].translation
                    Jp = J[:3] - pin.skew(r) @ J[3:]
                    dL += sign * (u @ Jp)
                g = dL[idx_v]
                out[s, :, 2 * k] = (L - self.reference_lengths[k]) * g
                out[s, :, 2 * k + 1] = g
        return out

    def torques(self, q, values=None) -> np.ndarray:
        """(N, n) actuator torques the springs require, parameters (K, F0, ...) default nominal."""
        v = self.nominal if values is None else np.asarray(values, float)
        return self.columns(q) @ v


class SpringRobotModel(RobotModel):
    """A RobotModel whose standard layout ends with every spring's K and F0."""

    def __init__(self, urdf, joints=None, locked_positions=None, friction=None, armature=None, springs=(),
                 transmission=None):
        super().__init__(urdf, joints, locked_positions, friction, armature, transmission=transmission)
        self.springs = SpringSet(self, springs)
        lay = self.layout
        self._n_rigid = lay.size
        self.layout = ParameterLayout(lay.names + tuple(self.springs.names), lay.body_joints,
                                      lay.actuator_joints, lay.actuator_symbols)
        self.nominal = np.concatenate([self.nominal, self.springs.nominal])

    def spring_slice(self) -> slice:
        return slice(self._n_rigid, self.layout.size)

    def _extra_columns(self, q, out: np.ndarray) -> None:
        out[:] = self.springs.columns(q)       # K and preload of each spring, after the actuators


# --------------------------------------------------------------------------- config
_KEYS = {"link_a", "point_a", "link_b", "point_b", "stiffness", "free_length", "preload", "reference_length"}


def _point(v, where):
    if not (isinstance(v, (list, tuple)) and len(v) == 3 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)):
        raise ConfigError(f"{where}: expected three numbers [x, y, z] in metres, got {v!r}")
    return tuple(float(x) for x in v)


def _opt_number(d, key, where, positive=False):
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}.{key}: expected a number, got {v!r}")
    if positive and v <= 0:
        raise ConfigError(f"{where}.{key}: must be positive, got {v!r}")
    return float(v)


def spring_specs(section, where: str = "springs") -> list[SpringSpec]:
    """Parse the `springs:` section: a mapping name -> spring."""
    if not section:
        return []
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: expected a mapping of spring names")
    out = []
    for name, s in section.items():
        w = f"{where}.{name}"
        if not isinstance(s, Mapping):
            raise ConfigError(f"{w}: expected a mapping")
        check_keys(s, _KEYS, w)
        for k in ("link_a", "link_b"):
            if not isinstance(s.get(k), str):
                raise ConfigError(f"{w}.{k}: expected a link name, got {s.get(k)!r}")
        if s.get("free_length") is not None and s.get("preload") is not None:
            raise ConfigError(f"{w}: give free_length or preload, not both")
        stiffness = _opt_number(s, "stiffness", w)
        if stiffness is not None and stiffness < 0:
            raise ConfigError(f"{w}.stiffness: must be >= 0, got {stiffness}")
        out.append(SpringSpec(str(name), s["link_a"], _point(s.get("point_a"), f"{w}.point_a"), s["link_b"],
                              _point(s.get("point_b"), f"{w}.point_b"), stiffness or 0.0,
                              _opt_number(s, "free_length", w), _opt_number(s, "preload", w),
                              _opt_number(s, "reference_length", w, positive=True)))
    return out


def spring_model(urdf, joints=None, locked_positions=None, friction=None, armature=None, config=None,
                 transmission=None):
    """A SpringRobotModel when the config (an IdentConfig) has a `springs:` section, else a RobotModel."""
    specs = spring_specs(config.section("springs")) if config is not None else []
    if specs:
        return SpringRobotModel(urdf, joints, locked_positions, friction, armature, springs=specs,
                                transmission=transmission)
    return RobotModel(urdf, joints, locked_positions, friction, armature, transmission=transmission)


def spring_model_from_file(urdf, joints, config_path, node: str = "robot_ident"):
    """`spring_model` for commands that read only part of the parameter file (e.g. design):
    the springs of ``<node>.ros__parameters.springs`` (or ``/**``), if any."""
    import yaml

    try:
        doc = yaml.safe_load(open(config_path, encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read parameter file {config_path}: {exc}") from exc
    section = None
    for key in (node, "/**"):
        params = (doc.get(key) or {}).get("ros__parameters") if isinstance(doc.get(key), Mapping) else None
        if isinstance(params, Mapping) and params.get("springs"):
            section = params["springs"]
            break
    specs = spring_specs(section, f"{config_path}: springs")
    if specs:
        return SpringRobotModel(urdf, joints, springs=specs)
    return RobotModel(urdf, joints)
