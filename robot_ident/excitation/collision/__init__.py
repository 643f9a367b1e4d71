"""Collision model and checks of excitation trajectories (self-collision, floor, boxes).

* spec.py -- the config's ``excitation: collision:`` section (`CollisionSpec`);
* resolve.py -- ``package://`` / relative mesh paths of the URDF's ``<collision>`` elements;
* srdf.py -- MoveIt SRDF ``disable_collisions`` pairs;
* model.py -- `CollisionModel`: Pinocchio GeometryModel + coal, checked pairs, signed
  distances and their exact Jacobians;
* check.py -- `check_collisions` (dense, 1 ms) and `CollisionReport`;
* constraint.py -- distance >= margin constraints of the excitation problem;
* design.py -- the designer's rounds that make the dense check pass;
* safety.py -- `verify_trajectory`: limits and collisions re-checked where a trajectory
  is used (simulate, the excitation node), never trusting a stored report;
  `build_collision_model` from a URDF and the config.
"""
from .check import CollisionReport, check_collisions
from .model import CollisionModel
from .spec import BoxSpec, CollisionSpec, parse_collision_section

__all__ = ["CollisionModel", "CollisionSpec", "BoxSpec", "CollisionReport", "check_collisions",
           "parse_collision_section"]
