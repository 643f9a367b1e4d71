"""One-joint momentum experiments, their stacked equations, and the identifiability check
(rank and the span of base rotation axes)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pinocchio as pin

from ...errors import IdentificationError, ModelError
from .model import FloatingBaseModel


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
