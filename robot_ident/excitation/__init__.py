"""Excitation trajectories: families, criteria, constraints and optimisers."""
from .fourier import FourierTrajectory

__all__ = ["FourierTrajectory"]
