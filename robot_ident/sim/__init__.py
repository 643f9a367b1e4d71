"""Simulated arms (MuJoCo) used as ground truth and by `robot-ident demo`."""
from .mujoco_arm import JointTruth, SimNoise, SimulatedArm, SimulationResult

__all__ = ["JointTruth", "SimNoise", "SimulatedArm", "SimulationResult"]
