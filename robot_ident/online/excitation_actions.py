"""What the excitation node's state machine (`excitation_run`) says and is told: its
phases, the actions it asks the node to carry out, its settings, and the codes of the
controller's answers (control_msgs FollowJointTrajectory, action_msgs GoalStatus)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from ..errors import TrajectoryError


class Phase(str, Enum):
    IDLE = "idle"
    APPROACHING = "approaching"
    EXCITING = "exciting"
    DONE = "done"
    ABORTED = "aborted"


ACTIVE = (Phase.APPROACHING, Phase.EXCITING)

# control_msgs/action/FollowJointTrajectory result error codes.
RESULT_ERRORS = {
    0: "SUCCESSFUL",
    -1: "INVALID_GOAL",
    -2: "INVALID_JOINTS",
    -3: "OLD_HEADER_TIMESTAMP",
    -4: "PATH_TOLERANCE_VIOLATED",
    -5: "GOAL_TOLERANCE_VIOLATED",
}
# action_msgs/msg/GoalStatus codes.
GOAL_STATUS = {0: "UNKNOWN", 1: "ACCEPTED", 2: "EXECUTING", 3: "CANCELING", 4: "SUCCEEDED", 5: "CANCELED",
               6: "ABORTED"}
STATUS_SUCCEEDED = 4


# ------------------------------------------------------------------------ actions
@dataclass(frozen=True)
class SendTrajectory:
    """Send `points` (the plain dict of `excitation.trajectory_points`) to the controller."""
    phase: Phase
    points: dict
    duration: float


@dataclass(frozen=True)
class HoldPosition:
    """Stop by commanding this one-point trajectory: on the topic, or as a new goal that
    preempts the running one (a cancel would make the joint_trajectory_controller hold the
    measured position at once, a step from full speed to rest)."""
    points: dict
    reason: str = ""
    note: str = ""             # for the log: when it is due, for which latencies


@dataclass(frozen=True)
class PublishState:
    phase: Phase
    detail: str = ""


@dataclass(frozen=True)
class PublishPlan:
    """dry_run: the trajectories that would be sent, in order."""
    approach: dict
    excitation: dict


Action = SendTrajectory | HoldPosition | PublishState | PublishPlan


# ----------------------------------------------------------------------- settings
@dataclass(frozen=True)
class ExcitationSettings:
    repetitions: int = 1
    use_action: bool = True
    dry_run: bool = False
    approach_speed: float = 0.1           # fraction of the velocity limit
    approach_acceleration: float = 0.1    # fraction of the acceleration limit
    approach_min_duration: float = 2.0    # s
    approach_tolerance: float = 0.02      # rad or m: start pose reached
    joint_state_timeout: float = 0.5      # s
    max_tracking_error: float = 0.1       # rad or m
    tracking_window: float = 0.25         # s either side of the expected time
    tracking_period: float = 0.01         # s of measurement time between two tracking checks
    point_rate: float = 100.0             # trajectory points per second
    settle_time: float = 0.5              # topic mode: wait after the last point
    result_timeout: float = 5.0           # action mode: wait for the result after the last point
    stop_time: float = 0.1                # shortest time to come to rest when aborting, longer where the
    #                                       acceleration limits need it (measured on ROS: docs/ros2.md)
    stop_latency_jitter: float = 0.03     # s: the hold stays within the limits (hold.HOLD_PEAK) for a
    #                                       controller that takes it up to this much later than the slowest measured
    acceptance_timeout: float = 0.5       # topic mode: the controller's state must show the sent trajectory
    #                                       as started within this [s] (when it publishes ~/controller_state)
    require_controller_state: bool = True   # topic mode: refuse to start without the controller's state
    rest_tolerance: float = 1e-6          # |qd(0)|, |qdd(0)| of the excitation

    def __post_init__(self):
        if int(self.repetitions) != self.repetitions or self.repetitions < 1:
            raise TrajectoryError(f"repetitions must be an integer >= 1, got {self.repetitions}")
        for name in ("approach_speed", "approach_acceleration"):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise TrajectoryError(f"{name} is a fraction of the limit in (0, 1], got {v}")
        for name in ("approach_min_duration", "approach_tolerance", "joint_state_timeout",
                     "max_tracking_error", "tracking_window", "tracking_period", "point_rate", "settle_time",
                     "result_timeout",
                     "stop_time", "stop_latency_jitter", "acceptance_timeout"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise TrajectoryError(f"{name} must be a positive number, got {v}")


# The node's parameter for each setting (same name): description, low, high (None: no range).
SETTING_PARAMETERS = {
    "repetitions": ("how many times the excitation is run back to back", 1, 1000),
    "dry_run": ("only publish the planned trajectories, move nothing", None, None),
    "approach_speed": ("approach peak velocity, fraction of the velocity limit", 0.01, 0.5),
    "approach_acceleration": ("approach peak acceleration, fraction of the limit", 0.01, 0.5),
    "approach_min_duration": ("shortest approach [s]", 0.5, 600.0),
    "approach_tolerance": ("start pose reached within this [rad or m]", 1e-4, 0.5),
    "joint_state_timeout": ("abort when joint states are older than this on two timer ticks (50 ms apart) "
                            "in a row [s]", 0.01, 10.0),
    "max_tracking_error": ("abort when the arm is further than this from the commanded path [rad or m]",
                           1e-3, 1.0),
    "tracking_window": ("time window for the path distance (latency allowance) [s]", 0.001, 2.0),
    "point_rate": ("trajectory points per second", 1.0, 1000.0),
    "settle_time": ("topic interface: wait after the last point [s]", 0.01, 10.0),
    "result_timeout": ("action interface: abort when no result this long after the expected end [s]", 0.1, 60.0),
    "stop_time": ("an abort's hold trajectory comes to rest in this time, or longer where the acceleration "
                  "limits need it [s]", 0.02, 5.0),
    "stop_latency_jitter": ("an abort's hold keeps its deceleration within 1.35x the acceleration limits "
                            "for a controller that takes it up to this much later than the slowest latency measured "
                            "(it comes to rest later the larger this is) [s]", 0.001, 1.0),
    "require_controller_state": ("topic interface: refuse to start when the controller publishes no "
                                 "~/controller_state (an inactive joint_trajectory_controller; false: another "
                                 "controller, refusals then seen only through the tracking error)", None, None),
    "acceptance_timeout": ("topic interface: abort when the controller's ~/controller_state does not show "
                           "the sent trajectory running within this [s]", 0.01, 5.0),
}
# The node's goal tolerances (FollowJointTrajectory): default, description, low, high.
GOAL_PARAMETERS = {
    "path_tolerance": (0.1, "position path tolerance sent with the goal, per joint [rad or m]; 0: the "
                            "controller's", 0.0, 1.0),
    "goal_tolerance": (0.02, "position goal tolerance sent with the goal [rad or m]; 0: the controller's", 0.0, 1.0),
    "goal_time_tolerance": (1.0, "goal time tolerance [s]", 0.0, 60.0),
}

