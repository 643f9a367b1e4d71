"""The simulated arm one control period at a time, for the sim_arm_node.

`SimulatedArm.run` follows a whole trajectory in one call; a node needs to step
the physics, publish, and accept new trajectories between steps. `SteppingArm` does
that with the same MuJoCo model and the same controller as `SimulatedArm.run`
(feed-forward from the nominal model plus PD with gains from the nominal mass
matrix: effective inertias at the desired pose), so following the same trajectory from the same state gives the same
motion (tested).

`TrajectoryFollower` interpolates trajectory_msgs-style points the way the
joint_trajectory_controller does: quintic between points that carry positions,
velocities and accelerations, cubic with positions and velocities, linear with
positions only; from the current state to the first point when that point is not at
time 0; holding the last point afterwards. Joints a trajectory does not name keep
their position. Trajectories outside the position limits are rejected.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import TrajectoryError

# control_msgs/action/FollowJointTrajectory result codes used here
SUCCESSFUL = 0
INVALID_GOAL = -1
INVALID_JOINTS = -2
GOAL_TOLERANCE_VIOLATED = -5


# --------------------------------------------------------------------- follower
class _Hold:
    def __init__(self, q):
        self.q = np.asarray(q, dtype=float).copy()
        self.duration = 0.0

    def sample(self, t):
        t = np.atleast_1d(t)
        z = np.zeros((t.size, self.q.size))
        return self.q + z, z, z.copy()


class _Spline:
    """Piecewise polynomial through points (t, q[, qd[, qdd]]), held after the end."""

    def __init__(self, t, q, qd=None, qdd=None):
        self.t = np.asarray(t, dtype=float)
        self.q = np.asarray(q, dtype=float)
        self.qd = None if qd is None else np.asarray(qd, dtype=float)
        self.qdd = None if qdd is None else np.asarray(qdd, dtype=float)
        self.duration = float(self.t[-1])

    def sample(self, t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        n = self.q.shape[1]
        if self.t.size == 1:
            z = np.zeros((t.size, n))
            return self.q[0] + z, z, z.copy()
        tc = np.clip(t, self.t[0], self.t[-1])
        k = np.clip(np.searchsorted(self.t, tc, side="right") - 1, 0, self.t.size - 2)
        h = (self.t[k + 1] - self.t[k])[:, None]
        s = (tc - self.t[k])[:, None] / h
        p0, p1 = self.q[k], self.q[k + 1]
        if self.qd is None:
            v = (p1 - p0) / h
            q = p0 + s * (p1 - p0)
            qd, qdd = v, np.zeros_like(q)
        else:
            v0, v1 = self.qd[k] * h, self.qd[k + 1] * h      # derivatives in s
            a0 = a1 = np.zeros_like(p0)
            if self.qdd is not None:
                a0, a1 = self.qdd[k] * h * h, self.qdd[k + 1] * h * h
            if self.qdd is None:          # cubic Hermite

                h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
                d00, d10, d01, d11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
                e00, e10, e01, e11 = 12 * s - 6, 6 * s - 4, -12 * s + 6, 6 * s - 2
                q = h00 * p0 + h10 * v0 + h01 * p1 + h11 * v1
                qd = (d00 * p0 + d10 * v0 + d01 * p1 + d11 * v1) / h
                qdd = (e00 * p0 + e10 * v0 + e01 * p1 + e11 * v1) / h ** 2
            else:                          # quintic Hermite
                H = [1 - 10 * s**3 + 15 * s**4 - 6 * s**5, s - 6 * s**3 + 8 * s**4 - 3 * s**5,
                     0.5 * s**2 - 1.5 * s**3 + 1.5 * s**4 - 0.5 * s**5, 0.5 * s**3 - s**4 + 0.5 * s**5,
                     -4 * s**3 + 7 * s**4 - 3 * s**5, 10 * s**3 - 15 * s**4 + 6 * s**5]
                D = [-30 * s**2 + 60 * s**3 - 30 * s**4, 1 - 18 * s**2 + 32 * s**3 - 15 * s**4,
                     s - 4.5 * s**2 + 6 * s**3 - 2.5 * s**4, 1.5 * s**2 - 4 * s**3 + 2.5 * s**4,
                     -12 * s**2 + 28 * s**3 - 15 * s**4, 30 * s**2 - 60 * s**3 + 30 * s**4]
                E = [-60 * s + 180 * s**2 - 120 * s**3, -36 * s + 96 * s**2 - 60 * s**3,
                     1 - 9 * s + 18 * s**2 - 10 * s**3, 3 * s - 12 * s**2 + 10 * s**3,
                     -24 * s + 84 * s**2 - 60 * s**3, 60 * s - 180 * s**2 + 120 * s**3]
                coef = [p0, v0, a0, a1, v1, p1]
                q = sum(b * c for b, c in zip(H, coef))
                qd = sum(b * c for b, c in zip(D, coef)) / h
                qdd = sum(b * c for b, c in zip(E, coef)) / h ** 2
        after = (t >= self.t[-1])[:, None]
        qd = np.where(after, 0.0, qd)
        qdd = np.where(after, 0.0, qdd)
        return q, qd, qdd


class TrajectoryFollower:
    """The reference the simulated controller tracks (times in seconds of the sim clock)."""

    def __init__(self, joint_names: Sequence[str], lower, upper, q0):
        self.joint_names = tuple(joint_names)
        self.lower = np.asarray(lower, dtype=float)
        self.upper = np.asarray(upper, dtype=float)
        self._traj = _Hold(q0)
        self._t0 = 0.0
        self.goal_id = 0

    def check(self, joint_names: Sequence[str], positions) -> tuple[int, str]:
        """(SUCCESSFUL, '') or (error code, reason) for a trajectory's joints and positions."""
        names = tuple(joint_names)
        unknown = [j for j in names if j not in self.joint_names]
        if unknown or not names:
            return INVALID_JOINTS, (f"unknown joint(s) {', '.join(unknown)}; this arm has "
                                    f"{', '.join(self.joint_names)}" if unknown else "no joints named")
        pos = np.asarray(positions, dtype=float)
        if pos.ndim != 2 or pos.shape[1] != len(names) or pos.shape[0] == 0:
            return INVALID_GOAL, f"expected positions of shape (K, {len(names)}), got {pos.shape}"
        idx = [self.joint_names.index(j) for j in names]
        lo, hi = self.lower[idx], self.upper[idx]
        bad = (pos < lo) | (pos > hi)
        if bad.any():
            k, j = np.argwhere(bad)[0]
            return INVALID_GOAL, (f"point {k}: joint {names[j]!r} position {pos[k, j]:.4g} is outside "
                                  f"[{lo[j]:.4g}, {hi[j]:.4g}]")
        return SUCCESSFUL, ""

    def set(self, now: float, joint_names: Sequence[str], t, positions, velocities=None, accelerations=None,
            start_time: float | None = None, q_now=None, qd_now=None) -> int:
        """Replace the reference (like the JTC's preemption). Raises TrajectoryError if invalid.
        Returns a goal id."""
        code, why = self.check(joint_names, positions)
        if code != SUCCESSFUL:
            raise TrajectoryError(why)
        names = tuple(joint_names)
        t = np.asarray(t, dtype=float)
        pos = np.asarray(positions, dtype=float)
        n = len(self.joint_names)
        q_ref, _, _ = self.desired(now)
        q_cur = q_ref[0] if q_now is None else np.asarray(q_now, dtype=float)
        qd_cur = np.zeros(n) if qd_now is None else np.asarray(qd_now, dtype=float)
        idx = [self.joint_names.index(j) for j in names]
        K = t.size
        full = np.repeat(q_cur[None, :], K, axis=0)
        full[:, idx] = pos

        def widen(x):
            if x is None:
                return None
            out = np.zeros((K, n))
            out[:, idx] = np.asarray(x, dtype=float)
            return out

        vel, acc = widen(velocities), widen(accelerations)
        if acc is not None and vel is None:
            acc = None
        t0 = now if start_time is None or start_time <= 0 else float(start_time)
        if t[0] > 0:                    # start from the current state
            t = np.concatenate([[0.0], t])
            full = np.vstack([q_cur, full])
            if vel is not None:
                vel = np.vstack([qd_cur, vel])
            if acc is not None:
                acc = np.vstack([np.zeros(n), acc])
        self._traj = _Spline(t, full, vel, acc) if t.size > 1 else _Hold(full[0])
        self._t0 = t0
        self.goal_id += 1
        return self.goal_id

    def follow(self, now: float, trajectory) -> int:
        """Track any object with ``sample(t)`` and ``duration`` (and the same joints) from `now`."""
        if tuple(getattr(trajectory, "joint_names", self.joint_names)) != self.joint_names:
            raise TrajectoryError("trajectory joints differ from the arm's")
        self._traj, self._t0 = trajectory, float(now)
        self.goal_id += 1
        return self.goal_id

    def hold(self, q) -> None:
        self._traj = _Hold(q)
        self.goal_id += 1

    def desired(self, now: float):
        """(q, qd, qdd) desired at `now`, each of shape (1, n); held after the end."""
        tau = max(0.0, now - self._t0)
        if tau >= self._traj.duration:
            q, _, _ = self._traj.sample(np.array([self._traj.duration]))
            z = np.zeros_like(q)
            return q, z, z.copy()
        return self._traj.sample(np.array([tau]))

    def started(self) -> float:
        """When the current trajectory (or hold) started, on the sim clock."""
        return self._t0

    def end_time(self) -> float:
        return self._t0 + float(self._traj.duration)

    def final_position(self) -> np.ndarray:
        return self._traj.sample(np.array([self._traj.duration]))[0][0]


# ------------------------------------------------------------------------- the arm
@dataclass(frozen=True)
class StepOutput:
    t: float                   # sim time after the step [s]
    q: np.ndarray              # measured (noisy) position before the step
    qd: np.ndarray
    effort: np.ndarray         # measured effort (commanded + offset + noise)
    q_true: np.ndarray
    qd_true: np.ndarray
    effort_true: np.ndarray    # commanded effort actually applied


class SteppingArm:
    """A `SimulatedArm` stepped one control period per `step()` call."""

    def __init__(self, arm, q0, noise=None, qd0=None):
        import mujoco

        from .mujoco_arm import BADQACC, SimNoise

        self.arm = arm
        self.noise = noise or SimNoise()
        self.joint_names = arm.joint_names
        n = len(self.joint_names)
        self.dt = 1.0 / arm.control_rate_hz
        q0 = np.asarray(q0, dtype=float)
        lim = arm.nominal.limits if tuple(arm.nominal.joint_names) == self.joint_names else arm.truth_model.limits
        self.lower = np.where(np.isfinite(lim.lower), lim.lower, -np.inf)
        self.upper = np.where(np.isfinite(lim.upper), lim.upper, np.inf)
        self.follower = TrajectoryFollower(self.joint_names, self.lower, self.upper, q0)
        self.kp, self.kd = arm._gains(q0)
        self._theta = arm.nominal.nominal
        self._rng = np.random.default_rng(self.noise.seed)
        self._tau_sq_sum = np.zeros(n)
        self.steps = 0
        m, d = arm.mj_model, arm.mj_data
        mujoco.mj_resetData(m, d)
        d.qpos[arm._qadr] = q0
        d.qvel[arm._dadr] = np.zeros(n) if qd0 is None else np.asarray(qd0, dtype=float)
        mujoco.mj_forward(m, d)
        self._mujoco = mujoco
        self._badqacc = BADQACC
        self._push = None

    def push(self, external) -> None:
        """A `mujoco_arm.ExternalForce` (its times in this arm's time) from now on; None: none."""
        self._push = None if external is None else self.arm._external(external)

    @property
    def time(self) -> float:
        return self.steps * self.dt

    @property
    def q_true(self) -> np.ndarray:
        return self.arm.mj_data.qpos[self.arm._qadr].copy()

    @property
    def qd_true(self) -> np.ndarray:
        return self.arm.mj_data.qvel[self.arm._dadr].copy()

    def effort_noise_std(self) -> np.ndarray:
        n = self._tau_sq_sum.size
        if self.noise.effort_abs_std is not None:
            return np.broadcast_to(np.asarray(self.noise.effort_abs_std, float), (n,)).copy()
        rms = np.sqrt(self._tau_sq_sum / max(self.steps, 1))
        return self.noise.effort_rel_std * rms

    def step(self) -> StepOutput:
        """One control period: measure, compute the command for the current desired state,
        apply it for `substeps` physics steps. The output holds the state measured at the
        start of the period and the effort applied during it (as `SimulatedArm.run` logs)."""
        arm, noise = self.arm, self.noise
        m, d = arm.mj_model, arm.mj_data
        t = self.time
        q_des, qd_des, qdd_des = self.follower.desired(t)
        q, qd = self.q_true, self.qd_true
        nq = self._rng.normal(0.0, noise.position_std, size=q.size)
        nqd = self._rng.normal(0.0, noise.velocity_std, size=q.size)
        qm, qdm = (q + nq, qd + nqd) if noise.controller_sees_noise else (q, qd)
        ff = arm.nominal.efforts(q_des, qd_des, qdd_des, self._theta)[0]
        self.kp, self.kd = arm._gains(q_des[0])      # scheduled along the motion, as SimulatedArm.run
        tau = ff + self.kp * (q_des[0] - qm) + self.kd * (qd_des[0] - qdm)
        if not np.isfinite(tau).all():
            raise TrajectoryError("the simulated arm diverged (non-finite command)")
        d.qfrc_applied[arm._dadr] = tau
        if self._push is not None:
            self._push(t)
        for _ in range(arm.substeps):
            self._mujoco.mj_step(m, d)
        if d.warning[self._badqacc].number or not np.isfinite(d.qpos).all():     # MuJoCo resets and carries on
            raise TrajectoryError(f"the simulation is unstable at t = {t:.4g} s (MuJoCo: NaN, Inf or huge "
                                  "accelerations): the simulated arm stops rather than publish a state it "
                                  "does not have")
        self.steps += 1
        self._tau_sq_sum += tau ** 2
        std = self.effort_noise_std()
        effort = tau + arm.truth.offset + self._rng.normal(size=q.size) * std
        return StepOutput(self.time, q + nq, qd + nqd, effort, q, qd, tau)


def build_stepping_arm(urdf, config_path, q0=None, control_rate_hz: float = 1000.0) -> tuple[SteppingArm, object]:
    """The simulated arm of `robot-ident simulate` (config's ``simulation`` section: friction,
    armature, offsets, payload, noise) as a `SteppingArm`, and the parsed IdentConfig.
    `q0` defaults to the middle of the position range (0 where unlimited)."""

    from ..estimation.pipeline import identification_config
    from ..io.config import load_config
    from ..io.model_loading import load_model
    from ..io.urdf_export import write_parameters
    from ..model.robot import RobotModel
    from .config import simulation_config
    from .mujoco_arm import SimulatedArm

    cfg = load_config(config_path)
    icfg = identification_config(cfg.section("identification"))
    cad = load_model(urdf, cfg, icfg)
    sim = simulation_config(cfg.section("simulation"), cad)
    theta = sim.truth_parameters(cad)
    truth_urdf, _ = write_parameters(cad, theta)
    arm = SimulatedArm(truth_urdf, cad.joint_names, sim.truth, control_rate_hz=control_rate_hz,
                       nominal=RobotModel(cad.urdf_xml, cad.joint_names, transmission=cad.transmission),
                       transmission=cad.transmission)
    if q0 is None:
        lo, hi = cad.limits.lower, cad.limits.upper
        q0 = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)
    return SteppingArm(arm, q0, sim.noise), cfg


def goal_outcome(q_measured, q_goal, tolerance: float) -> tuple[int, str]:
    """Result code of a finished goal: GOAL_TOLERANCE_VIOLATED if any joint is further than
    `tolerance` (<= 0: no check) from the last point."""
    err = np.abs(np.asarray(q_measured, float) - np.asarray(q_goal, float))
    if tolerance > 0 and err.max() > tolerance:
        return GOAL_TOLERANCE_VIOLATED, f"final position error {err.max():.4g} > goal tolerance {tolerance:g}"
    return SUCCESSFUL, f"final position error {err.max():.3g}"

