"""Exceptions with messages that name the joint, field, topic or file at fault.

Every error a user can cause by bad input derives from `RobotIdentError`, so the
command line can print a one-line reason and exit non-zero instead of a traceback.
"""


class RobotIdentError(Exception):
    """Base class of all errors caused by bad input or an ill-posed problem."""


class ModelError(RobotIdentError):
    """The URDF, the joint selection or the parameter layout is unusable."""


class ConfigError(RobotIdentError):
    """A configuration file or value is invalid (the message names the key)."""


class SignalError(RobotIdentError):
    """A recording is unusable: NaNs, too few samples, non-monotonic time, ..."""


class IdentificationError(RobotIdentError):
    """The identification problem is ill-posed (rank deficient, too few samples, ...)."""


class TrajectoryError(RobotIdentError):
    """A trajectory is invalid or leaves the joint limits."""
