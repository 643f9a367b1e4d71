"""The excitation node's logic without ROS: plan, approach, excite, repeat, abort.

`ExcitationRun` is a state machine driven by events (joint states, goal responses,
results, the controller's state, a stop request) and by `tick(now)`; every event
returns the list of actions (`excitation_actions.Action`) the node must carry out
(send a trajectory, send the hold trajectory, publish the plan or the state). Times
are seconds of the node's clock (sim time when use_sim_time is set); the class never
reads a clock itself. Joint-state events and
`tick` may also carry `wall`, seconds of a steady (monotonic) clock: stale joint
states are then judged on both clocks, so the watchdog fires even when the node's
clock stops (sim time whose /clock source died with the joint-state publisher).

Phases::

    idle --start--> approaching --reached--> exciting --done--> done
      \\               |                         |
       +---------------+----- any fault --------+--> aborted

Safety, in the order it is checked:

* the excitation (repeated `repetitions` times) is checked densely (1 ms) against
  the URDF limits and the configured acceleration limits with margins before
  anything moves, and it must start at rest (velocity and acceleration zero);
* the current position must lie inside the URDF position limits; the approach
  from it to the start pose is a quintic (rest to rest) whose peak velocity and
  acceleration are a small fraction (`approach_speed`, `approach_acceleration`)
  of the limits, itself checked densely;
* while moving, every joint state is compared with the commanded path; a
  distance (over a short time window, to tolerate latency) above
  `max_tracking_error` aborts;
* joint states older than `joint_state_timeout` on two ticks in a row abort; a goal
  that is rejected, aborted or canceled by the controller aborts; no result within
  `result_timeout` after the expected end aborts; on the topic interface, a
  trajectory the controller's state does not show running within
  `acceptance_timeout` aborts (the controller only logs a refusal).

Aborting sends a one-point trajectory that comes to rest near the current position
within the acceleration limits, however late (within the measured latencies and a margin)
the controller takes it (hold.py): on the topic, or on the action interface as a new
goal that preempts the running one. The node cancels only when the controller refuses
that goal: the joint_trajectory_controller answers a cancel by holding the measured
position at once, a step from full speed to rest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import TrajectoryError
from ..excitation.constraints import LimitSpec, check_trajectory
from ..excitation.families import trajectory_points
from ..excitation.repeat import Repeated
from .approach import ApproachTrajectory, approach_limits, plan_approach, plan_safe_approach
from .excitation_actions import (
    ACTIVE,
    GOAL_STATUS,
    RESULT_ERRORS,
    STATUS_SUCCEEDED,
    ExcitationSettings,
    HoldPosition,
    Phase,
    PublishPlan,
    PublishState,
    SendTrajectory,
)
from .hold import hold_message, hold_note, path_ahead

DEFAULT_LATENCY = 0.02     # s, from sending a trajectory to the controller running it, before one is measured
FRESH_S = 0.1              # s: an abort's hold starts from a joint state at most this old, else from the path


# -------------------------------------------------------------------- state machine
@dataclass
class _Motion:
    phase: Phase
    trajectory: object
    points: dict
    sent_at: float
    started_at: float | None = None     # goal accepted (action) or sent (topic)
    result: tuple | None = None
    taken: bool = False                 # topic mode: the controller's state shows it running


class ExcitationRun:
    """One excitation run. Construct with the checked plan, call `start(now)` once the
    joint states arrive, feed events, call `tick(now)` periodically (>= 10 Hz)."""

    def __init__(self, trajectory, limits: LimitSpec, settings: ExcitationSettings | None = None,
                 model=None, collision=None):
        self.settings = settings or ExcitationSettings()
        s = self.settings
        self.joint_names = tuple(trajectory.joint_names)
        if self.joint_names != limits.joint_names:
            raise TrajectoryError(f"trajectory joints {self.joint_names} differ from the limit joints "
                                  f"{limits.joint_names}")
        self.limits, self.model = limits, model
        self.base_trajectory = trajectory
        _, qd0, qdd0 = trajectory.sample(np.array([0.0]))
        worst = float(max(np.abs(qd0).max(), np.abs(qdd0).max()))
        if worst > s.rest_tolerance:
            j = self.joint_names[int(np.argmax(np.maximum(np.abs(qd0[0]), np.abs(qdd0[0]))))]
            raise TrajectoryError(
                f"the excitation does not start at rest (joint {j!r}: velocity/acceleration {worst:.3g} at t=0); "
                "a controller cannot start it from a standstill; use a family that starts at rest "
                "(modified_fourier, polynomial7, joint_moves)")
        self.trajectory = Repeated(trajectory, s.repetitions) if s.repetitions > 1 else trajectory
        self.report = check_trajectory(self.trajectory, limits, model)
        if not self.report.valid:
            raise TrajectoryError(f"the excitation violates the limits: {self.report.summary()}")
        self.collision = collision      # CollisionModel: the excitation and the approach are checked with it
        if collision is not None:
            from ..excitation.collision.check import check_collisions
            # Repetitions pass through the same poses: the base trajectory is checked.
            self.collision_report = check_collisions(trajectory, collision)
            if not self.collision_report.valid:
                raise TrajectoryError(f"the excitation collides: {self.collision_report.summary()}")
        self.start_pose = trajectory.sample(np.array([0.0]))[0][0]
        self.phase, self.detail = Phase.IDLE, ""
        self.approach: ApproachTrajectory | None = None
        self._motion: _Motion | None = None
        self._q = self._qd = None      # the last joint state: positions, velocities (np.ndarray)
        self._last_js = self._last_js_stamp = self._last_js_wall = None    # ... taken, measured (stamp), steady
        self._stale_seen: tuple | None = None   # the last joint state's times, seen stale by a tick
        self.controller_joints: tuple | None = None   # from the controller's state, when it publishes one
        self.latencies: list[float] = []        # s from sending a trajectory to the controller running it
        self.controller_same_clock = False      # its state's stamps agree with our clock (within 1 s)
        self.max_tracking_error_seen, self._last_check = 0.0, -np.inf

    # ------------------------------------------------------------ helpers
    @property
    def active(self) -> bool:
        return self.phase in ACTIVE

    @property
    def has_joint_state(self) -> bool:
        return self._q is not None

    def joint_state_age(self, now: float) -> float | None:
        """Seconds since the last usable joint state, None if there was none."""
        return None if self._last_js is None else now - self._last_js

    @property
    def finished(self) -> bool:
        return self.phase in (Phase.DONE, Phase.ABORTED)

    def _set(self, phase: Phase, detail: str = "") -> PublishState:
        self.phase, self.detail = phase, detail
        return PublishState(phase, detail)

    def _points(self, traj) -> dict:
        return trajectory_points(traj, self.settings.point_rate)

    def _abort(self, now: float, reason: str) -> list:
        actions: list = []
        if self.active and not self.settings.dry_run:
            pts = self.hold_points(now)                                  # active: joint states known
            actions.append(HoldPosition(pts, reason, hold_note(pts, self.latency_range(), self.latencies[-5:])))
        self._motion = None
        actions.append(self._set(Phase.ABORTED, reason))
        return actions

    def _commanded(self, t: float):
        """(q, qd, ahead) of the running motion's commanded path at `t` (`hold.path_ahead`: its motion
        after t; at rest before its start and past its end), or None: no motion running."""
        m = self._motion
        if m is None or m.started_at is None:
            return None
        tau, end = t - m.started_at, float(m.trajectory.duration)
        q, qd = m.trajectory.sample(np.array([min(max(tau, 0.0), end)]))[:2]
        return q[0], qd[0] if 0.0 <= tau <= end else np.zeros_like(qd[0]), path_ahead(m.trajectory, tau)

    def _state_now(self, now: float | None) -> tuple:
        """(time, q, qd, ahead) the hold starts from: the last joint state when it is at most FRESH_S
        old (its velocity, else the commanded path's); else, the node having fallen behind its
        joint states, the running motion's commanded path at `now` (the arm follows it within
        max_tracking_error); else the last joint state at rest. The arm goes on along the commanded
        path until the controller takes the hold: `ahead` (None, no motion running: coasting)."""
        t = self._last_js_stamp if self._last_js_stamp is not None else self._last_js
        now = t if now is None else now
        cmd = self._commanded(t if now - t <= FRESH_S else now)
        rest = np.zeros_like(self._q)
        ahead = cmd[2] if cmd is not None else None
        if now - t <= FRESH_S:
            return t, self._q, (self._qd if self._qd is not None else cmd[1] if cmd is not None else rest), ahead
        if cmd is not None:
            return now, cmd[0], cmd[1], ahead
        return now, self._q, rest, None

    def latency_range(self) -> tuple[float, float]:
        """From sending a trajectory to the controller running it (s): half the shortest and the
        longest plus `stop_latency_jitter` of the last five measured (on the controller's state);
        DEFAULT_LATENCY before any."""
        recent = self.latencies[-5:] or [DEFAULT_LATENCY]
        return 0.5 * min(recent), max(recent) + self.settings.stop_latency_jitter

    def hold_points(self, now: float | None = None) -> dict:
        """The abort's hold trajectory (`hold.hold_message`) from `_state_now`, anchored in time
        when the controller runs on this clock."""
        t, q, qd, ahead = self._state_now(now)
        return hold_message(self.joint_names, self.limits, self.settings.stop_time, t, q, qd, now,
                            self.latency_range(), anchored=self.controller_same_clock and now is not None, ahead=ahead)

    def sent(self, now: float) -> None:
        """The node handed the last trajectory to the middleware at `now`: latencies count from here (building
        the message of a 1000-point excitation took 17-54 ms; the 1-point hold, 0.5 ms)."""
        if (m := self._motion) is not None and not m.taken:
            m.sent_at, m.started_at = now, m.started_at if self.settings.use_action else now

    def _send(self, now: float, phase: Phase, traj) -> list:
        self._last_check = -np.inf
        pts = self._points(traj)
        self._motion = _Motion(phase, traj, pts, now, None if self.settings.use_action else now)
        return [self._set(phase), SendTrajectory(phase, pts, float(traj.duration))]

    # ------------------------------------------------------------- events
    def on_joint_state(self, now: float, names: Sequence[str], position, velocity=(),
                       stamp: float | None = None, wall: float | None = None) -> list:
        """A joint state received at `now`, measured at `stamp` (its header stamp, same clock;
        None, 0 or more than 1 s away from `now`: `now`). Names are matched; other joints are ignored. While moving, the
        position is compared with the commanded path at the measurement time, at most every
        `tracking_period` seconds, so a backlog of queued messages is no tracking error."""
        index = {n: i for i, n in enumerate(names)}
        if any(j not in index for j in self.joint_names):
            return []          # another publisher's message, or a partial one
        pos = np.asarray(position, dtype=float)
        if pos.size != len(names):
            return []
        idx = [index[j] for j in self.joint_names]
        q = pos[idx]
        if not np.isfinite(q).all():
            return []
        vel = np.asarray(velocity, dtype=float)
        self._q = q
        self._qd = vel[idx] if vel.size == len(names) and np.isfinite(vel[idx]).all() else None
        self._last_js = now
        self._last_js_wall = wall
        # A stamp more than a second away from the receive time is on another clock: use `now`.
        t = float(stamp) if stamp and abs(float(stamp) - now) < 1.0 else now
        self._last_js_stamp = t
        m = self._motion
        if m is None or m.started_at is None or self.settings.dry_run:
            return []
        if t - self._last_check < self.settings.tracking_period:
            return []
        self._last_check = t
        err = self.tracking_error(t, q)
        self.max_tracking_error_seen = max(self.max_tracking_error_seen, err)
        if err > self.settings.max_tracking_error:
            return self._abort(now, f"tracking error {err:.4g} exceeds max_tracking_error "
                                    f"{self.settings.max_tracking_error:g} during {m.phase.value}")
        return []

    def tracking_error(self, t: float, q) -> float:
        """Distance (max over joints) from `q`, measured at `t`, to the commanded path within
        +-tracking_window of the expected time."""
        m = self._motion
        tau = t - m.started_at
        w = self.settings.tracking_window
        ts = np.clip(np.linspace(tau - w, tau + w, 41), 0.0, float(m.trajectory.duration))
        q_des = m.trajectory.sample(ts)[0]
        return float(np.abs(q_des - q[None, :]).max(axis=1).min())

    def start(self, now: float, clock=None) -> list:
        """Begin: plan the approach from the latest joint state (or publish the plan in dry run).
        Planning around obstacles can take a while: `clock()`, when given, is read after it,
        so the sent approach's time (the topic interface's tracking clock) starts when it is
        sent, not before the planning."""
        if self.phase != Phase.IDLE:
            return []
        s = self.settings
        if self._q is None:
            return self._abort(now, "no joint state received for the joints "
                                    f"{', '.join(self.joint_names)}; not starting")
        if now - self._last_js > s.joint_state_timeout:
            return self._abort(now, f"joint states are {now - self._last_js:.3g} s old; not starting")
        refused = self._controller_refusal()
        if refused:
            return self._abort(now, refused + "; not moving")
        lim = approach_limits(self.limits)
        outside = [j for k, j in enumerate(self.joint_names)
                   if not lim.lower[k] <= self._q[k] <= lim.upper[k]]
        if outside:
            return self._abort(now, f"current position of joint(s) {', '.join(outside)} is outside the URDF "
                                    "limits; not moving")
        b = lim.bounds()
        if self.collision is not None:
            try:
                self.approach = plan_safe_approach(self.joint_names, self._q, self.start_pose, lim, self.collision,
                                                   s.approach_speed, s.approach_acceleration,
                                                   s.approach_min_duration)
            except TrajectoryError as exc:
                return self._abort(now, str(exc))
        else:
            self.approach = plan_approach(self.joint_names, self._q, self.start_pose, b.velocity, b.acceleration,
                                          s.approach_speed, s.approach_acceleration, s.approach_min_duration)
        rep = check_trajectory(self.approach, lim)
        if not rep.valid:
            return self._abort(now, f"the approach violates the limits: {rep.summary()}")
        if hasattr(self.model, "closures"):     # a closed chain: its passive joints along the approach
            from ..mechanisms.closed_chain.config import passive_limit_violations
            bad = passive_limit_violations(self.model, self.approach, dt=0.02)
            if bad:
                return self._abort(now, "the approach takes passive joint(s) of the closed chain out of their "
                                        "limits or out of the workspace: "
                                        + "; ".join(f"{b['joint']} at t = {b['time']:.2f} s" for b in bad))
        if s.dry_run:
            return [PublishPlan(self._points(self.approach), self._points(self.trajectory)),
                    self._set(Phase.DONE, "dry run: plan published, nothing sent")]
        return self._send(clock() if clock is not None else now, Phase.APPROACHING, self.approach)

    def on_controller_state(self, now: float, joint_names: Sequence[str], reference_age: float,
                            stamp: float | None = None) -> list:
        """The trajectory controller's state (joint_trajectory_controller ``~/controller_state``):
        its joints and the time since the start of the trajectory it runs (``reference.
        time_from_start``), at `stamp` (the header's, same clock as `now`). On the topic
        interface a trajectory the controller refuses is only logged by the controller; here
        the controller's running trajectory must have started after ours was sent, within
        `acceptance_timeout`, else the run aborts naming the controller's joints. On both
        interfaces the controller's start of each sent trajectory sets the tracking clock and
        measures the latency from sending to running, which the abort's hold allows for."""
        self.controller_joints = tuple(joint_names)
        t = float(stamp) if stamp else now
        self.controller_same_clock = bool(stamp) and abs(t - now) < 1.0
        m = self._motion
        if m is None or m.taken or self.settings.dry_run or not self.active:
            return []
        if not self.controller_same_clock:      # the controller runs on another clock: no verdict possible
            return []
        started = t - float(reference_age)
        if started >= m.sent_at - 0.02:
            m.taken = True
            m.started_at = max(m.sent_at, min(started, t))   # the controller's own start: the tracking clock
            self.latencies.append(m.started_at - m.sent_at)
            return []
        if not self.settings.use_action and t - m.sent_at > self.settings.acceptance_timeout:
            return self._not_taken(now, m, f"its running trajectory started {m.sent_at - started:.3g} s before "
                                           "ours was sent")
        return []

    def _controller_refusal(self) -> str:
        """Topic interface, before anything is sent: why the controller will not run ours ('': none)."""
        s = self.settings
        if s.use_action or s.dry_run:
            return ""
        if self.controller_joints is None:
            return ("no state from the trajectory controller (its ~/controller_state): it is not active, or not a "
                    "joint_trajectory_controller (then set require_controller_state false)"
                    if s.require_controller_state else "")
        missing = [j for j in self.joint_names if j not in self.controller_joints]
        if missing:
            return (f"the controller does not command joint(s) {', '.join(missing)}; its joints are "
                    f"{', '.join(self.controller_joints)}")
        return ""

    def _not_taken(self, now: float, m: _Motion, why: str) -> list:
        theirs = list(self.controller_joints or ())
        hint = ""
        if theirs and sorted(theirs) != sorted(self.joint_names):
            hint = (f"; the controller's joints are {', '.join(theirs)}, the trajectory's "
                    f"{', '.join(self.joint_names)}")
        return self._abort(now, f"the controller did not take the {m.phase.value} trajectory within "
                                f"{self.settings.acceptance_timeout:g} s ({why}){hint}")

    def on_goal_response(self, now: float, accepted: bool, reason: str = "") -> list:
        m = self._motion
        if m is None or not self.active:
            return []
        if not accepted:
            self._motion = None
            return [self._set(Phase.ABORTED, f"the controller rejected the {m.phase.value} goal"
                                             + (f": {reason}" if reason else ""))]
        if not m.taken:                 # the controller's state, when it came first, is the better clock
            m.started_at = now
        return []

    def on_result(self, now: float, status: int, error_code: int = 0, error_string: str = "") -> list:
        """The action result (status: action_msgs GoalStatus; error_code: FollowJointTrajectory)."""
        m = self._motion
        if m is None or not self.active:
            return []
        if status != STATUS_SUCCEEDED or error_code != 0:
            self._motion = None
            what = RESULT_ERRORS.get(error_code, f"error {error_code}")
            st = GOAL_STATUS.get(status, str(status))
            return [self._set(Phase.ABORTED, f"{m.phase.value} goal ended {st} ({what})"
                                             + (f": {error_string}" if error_string else ""))]
        return self._finished_motion(now)

    def _finished_motion(self, now: float) -> list:
        m = self._motion
        if m.phase == Phase.APPROACHING:
            dev = np.abs(self._q - self.start_pose) if self._q is not None else np.array([np.inf])
            if dev.max() > self.settings.approach_tolerance:
                j = self.joint_names[int(np.argmax(dev))]
                return self._abort(now, f"start pose not reached: joint {j!r} is {dev.max():.4g} away "
                                        f"(approach_tolerance {self.settings.approach_tolerance:g})")
            return self._send(now, Phase.EXCITING, self.trajectory)
        self._motion = None
        return [self._set(Phase.DONE, f"{self.settings.repetitions} repetition(s) of "
                                      f"{float(self.base_trajectory.duration):.3f} s done")]

    def stop(self, now: float, reason: str = "stop requested") -> list:
        if self.finished:
            return []
        return self._abort(now, reason)

    def tick(self, now: float, wall: float | None = None) -> list:
        """Periodic checks: stale joint states, end of a topic-mode motion, missing results."""
        if not self.active or self.settings.dry_run:
            return []
        s = self.settings
        if self._last_js is None:
            return self._abort(now, "joint states stopped arriving (last never; "
                                    f"joint_state_timeout {s.joint_state_timeout:g} s)")
        # Stale (on the node's clock, or on the wall clock when the node's clock stopped) on
        # two ticks in a row with nothing received in between. After the executor was blocked
        # (a long planning in a callback, a stall of the loaded machine), it runs the timer
        # before the joint states queued meanwhile: the first tick alone is a false alarm.
        stale_node = now - self._last_js > s.joint_state_timeout
        stale_wall = (wall is not None and self._last_js_wall is not None
                      and wall - self._last_js_wall > s.joint_state_timeout)
        seen = (self._last_js, self._last_js_wall)
        confirmed = (stale_node or stale_wall) and self._stale_seen == seen
        self._stale_seen = seen if (stale_node or stale_wall) else None
        if confirmed:
            age = f"{now - self._last_js:.3g} s ago"
            if stale_wall and not stale_node:
                age = (f"{wall - self._last_js_wall:.3g} s ago on the wall clock, the node's clock reads "
                       f"{now - self._last_js:.3g} s")
            return self._abort(now, f"joint states stopped arriving (last {age}; "
                                    f"joint_state_timeout {s.joint_state_timeout:g} s)")
        m = self._motion
        if m is None or m.started_at is None:
            if m is not None and now - m.sent_at > s.result_timeout:
                return self._abort(now, f"no goal response within {s.result_timeout:g} s")
            return []
        if not s.use_action and self.controller_joints is not None and not m.taken \
                and now - m.sent_at > s.acceptance_timeout + 1.0:
            return self._not_taken(now, m, "the controller published its state before but none since")
        end = m.started_at + float(m.trajectory.duration)
        if s.use_action:
            if now > end + s.result_timeout:
                return self._abort(now, f"no result {s.result_timeout:g} s after the {m.phase.value} "
                                        "trajectory should have ended")
            return []
        if now >= end + s.settle_time:
            return self._finished_motion(now)
        return []
