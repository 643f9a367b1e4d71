"""Closed-chain and hybrid robots: spanning tree + loop closures, virtual-work regressor.

A closed-chain robot is described by

* a **spanning-tree URDF**: every joint of the mechanism except the ones cut to open
  the loops (typically the spherical joints at a moving platform), every tree joint a
  1-DOF revolute or prismatic joint, all of them in the Pinocchio model;
* **loop closures**: pairs of points (or frames) on two tree links that must coincide
  -- in position (``kind: position``, a cut spherical joint: 3 equations) or in full
  pose (``kind: pose``, a cut weld: 6 equations);
* the **actuated joints** (a subset of the tree joints; the others are passive).

With ``q`` the tree coordinates, the closures are ``phi(q) = 0`` with Jacobian
``J = [J_a J_p]`` (actuated / passive columns). Given the actuated coordinates:

* positions: damped Newton on ``phi(q_a, q_p) = 0`` for ``q_p`` (least-squares steps,
  so structurally redundant closure equations -- e.g. the out-of-plane one of a planar
  loop -- are fine); `ModelError` when it does not converge or ``J_p`` loses column
  rank (a singular pose, where the passive joints are not determined);
* velocities: ``qd = G qd_a`` with ``G = dq/dq_a = [I; -J_p^+ J_a]`` (rows in tree
  order);
* accelerations: ``qdd = G qdd_a + g`` with ``g_p = -J_p^+ (Jdot qd)``; ``Jdot qd`` is the
  difference of the two points' classical accelerations at zero joint acceleration.

Dynamics by the principle of virtual work: the actuator efforts ``f`` do the same work
as the tree joint efforts on any motion compatible with the closures, so
``f = G^T tau_tree(q, qd, qdd)`` and, the tree being linear in its standard parameters,

    Y_act(q_a, qd_a, qdd_a) = G^T Y_tree(q, G qd_a, G qdd_a + g)

(``Y_tree`` is Pinocchio's joint-torque regressor of the tree). The constraint forces do
no work on compatible motions and drop out. The actuated joints get the same
armature / Coulomb / viscous / offset columns as `RobotModel`'s.

**Tied bodies** (identical limbs): bodies listed in a tie group share one block of 10
inertial parameters (each body's about its own joint frame, so the limbs' URDF frames
must be laid out alike). With ``theta_full = T theta`` the regressor is ``Y_full T``.

`ClosedChainModel` duck-types the parts of `RobotModel` that base parameters,
`build_problem`, the estimators, validation and the excitation designer use:
``joint_names`` (the actuated joints), ``n``, ``layout``, ``nominal``, ``limits``,
``friction``, ``regressor``, ``efforts``, ``is_prismatic``, ``urdf_label``,
``locked_positions``, ``model`` (the tree's Pinocchio model).

The closure description lives next to the URDF (see ``urdf/hybrid5_closures.yaml``)::

    urdf: hybrid5.urdf
    actuated: [limb1_slide, limb2_slide, limb3_slide, head_a, head_c]
    closures:
      - {name: limb1_sphere, kind: position, link_a: limb1_rod, point_a: [0, 0, 0],
         link_b: platform, point_b: [0, 0.15, 0]}
    home: {gimbal2_a: 0.0, ...}          # initial guess of the passive joints (assembly mode)
    tie:  {limb_cylinder: [limb1_swing, limb2_swing, limb3_swing], ...}
    actuators: {limb1_slide: {type: screw, torque_constant: 0.95, lead: 0.01, ...}, ...}
"""
from .model import ClosedChainModel, finite_difference_G, load_closed_chain
from .spec import CLOSURE_KINDS, ClosedChainSpec, Closure

__all__ = ["Closure", "ClosedChainSpec", "ClosedChainModel", "load_closed_chain", "finite_difference_G", "CLOSURE_KINDS"]
