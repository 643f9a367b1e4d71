"""Excitation trajectories: families, criteria, constraints and optimisers.

Families (each ``sample(t) -> q, qd, qdd``; `trajectory_points` gives trajectory_msgs-style
points): `FourierTrajectory` (source B), `ModifiedFourierTrajectory` (starts and ends at
rest), `PolynomialTrajectory` (source A's 7th order), `JointMovesTrajectory` (one joint at
a time). `design_excitation` optimises one within `LimitSpec` limits with the optimisers
of optimizers.py and checks it densely; trajectory_file.py reads and writes the YAML.
"""
from .constraints import LimitReport, LimitSpec, Margins, check_trajectory
from .designer import DesignResult, DesignSpec, design_excitation
from .families import JointMovesTrajectory, ModifiedFourierTrajectory, PolynomialTrajectory, trajectory_points
from .fourier import FourierTrajectory
from .trajectory_file import TrajectoryFile, load_trajectory, save_trajectory

__all__ = ["FourierTrajectory", "ModifiedFourierTrajectory", "PolynomialTrajectory", "JointMovesTrajectory",
           "trajectory_points", "LimitReport", "LimitSpec", "Margins", "check_trajectory", "DesignResult",
           "DesignSpec", "design_excitation", "TrajectoryFile", "load_trajectory", "save_trajectory"]
