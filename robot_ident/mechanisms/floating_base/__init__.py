"""Identification of a free-floating space robot from momentum conservation.

A spacecraft body (the *base*, the URDF's root link) carries an arm; nothing outside
acts on the system, so its linear and angular momentum are conserved. The momentum is
linear in every body's 10 inertial parameters, which gives equations without any force,
torque or acceleration measurement: only the base twist, the joint angles and the
joint rates are needed.

Momentum regressor
------------------
The model is Pinocchio's with a free-flyer root joint (named ``base`` by default). Body
``i`` with spatial velocity ``v_i`` (its joint frame, LOCAL) has spatial momentum
``I_i v_i`` = ``pin.bodyRegressor(0, v_i) @ theta_i`` (6 x 10, Pinocchio's parameter
order ``m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz`` about the joint frame). Mapping it
to a common frame with the dual (force) action matrix and summing over bodies gives::

    h = [p; L] = Y_h(q, v) @ theta          (linear momentum p, angular momentum L)

`FloatingBaseModel.momentum_regressor_pin` returns Y_h in the world frame about any
point (checked in the tests against ``pin.computeCentroidalMomentum``) or in the base
frame about the base frame origin. The identification uses the latter: there the
momentum of a system released from rest is zero at every instant, and Y_h depends only
on the joint angles, the joint rates and the base twist *in base coordinates* (what a
gyro and a relative-navigation sensor give) -- not on the base's position or attitude.

A grasped payload is one more body, rigidly attached to a named frame (``tool0``),
with its 10 parameters about that frame; its columns come after the arm's.

Identification and scaling
--------------------------
For a system released from rest, ``Y_h theta = 0``. Split the columns into unknown
(``u``: the base; later the payload) and known (``k``: the arm links from the URDF, and
in the second stage the base identified in the first)::

    Y_u theta_u = - Y_k theta_k

The equations are homogeneous in *all* parameters (doubling every mass and inertia
changes nothing), so momentum alone fixes the parameters only up to a common scale.
The known parameters supply the scale: the unknowns are identified *relative to* the
arm's CAD parameters, and a relative error in those (e.g. every link 2 % heavier)
appears as the same relative error in the identified base. At least one known body
with a non-zero contribution must move; without known parameters the problem is refused.

Identifiability (source C): the base's inertia enters only through ``I_0 omega_0``. If
the base angular velocities of all samples lie in a plane with normal ``n``, the
inertia change ``n n^T`` does not change any equation: the inertia is singular. One
joint moved from rest turns the base about a nearly fixed axis, so two single-joint
experiments leave (nearly) a plane and at least three joints with independent axes
must be excited, whose motions turn the base about independent axes (three parallel
pitch joints do not count as three). `check_identifiability` applies two tests and
`solve_*` refuse with `IdentificationError` when either fails:

* rank: the *snapshot* form of the equations (source C's "drive a joint with an
  initial velocity and measure"; ``samples="snapshot"``) has one instant per
  experiment, 3 + 3 equations each; with two joints it is exactly singular (rank 9 of
  10, the null vector an inertia combination). Singular values of the
  column-normalised matrix below ``rank_rtol`` (1e-6) x the largest count as zero.
* angular-velocity span: over whole rest-to-rest motions (``samples="all"``) the
  base's rotation axis drifts a little with the configuration, so two joints give a
  full-rank but nearly singular system whose inertia along n n^T only that drift
  determines. `IdentifiabilityReport.omega_span` holds the singular values of each
  unknown body's stacked angular velocities over the largest; a third one below
  ``omega_rtol`` (3 %) is refused. On the demo robot two joints give 0.9-1.5 %, three
  joints with yaw, pitch and roll axes 9-14 %.

Scaling for rank, condition number and least squares: angular-momentum rows are
divided by a length (``length_scale``, default 1 m) so both row groups carry kg*m/s,
and columns are normalised to unit norm before the SVD (the reported condition
number is that of the column-normalised matrix).

Estimators: least squares (with standard deviations from the residual,
sigma^2 (A^T A)^-1), and a genetic algorithm (pymoo) that minimises the same squared
momentum mismatch within box bounds (source D). The GA cannot beat least squares on
this cost -- both minimise it; the GA's interest is that it needs no linear algebra
and accepts bounds.

Guidance (source C): each arm link's mass should be 3-30 % of the base mass, so the
base moves measurably yet stays controllable; `guidance()` computes the ratios and
the base linear and angular speed the joint rates of the experiments produce.
"""
from .experiments import (
                          IdentifiabilityReport,
                          MomentumExperiment,
                          MomentumSystem,
                          check_identifiability,
                          stack_momentum_equations,
)
from .guidance import Guidance, guidance, rest_to_rest
from .model import FloatingBaseModel, _dual_action
from .solve import FloatingBaseEstimate, ga_bounds, identify, payload_ga_bounds, solve_ga, solve_least_squares

__all__ = [
    "FloatingBaseModel", "MomentumExperiment", "MomentumSystem", "IdentifiabilityReport",
    "FloatingBaseEstimate", "Guidance", "stack_momentum_equations", "check_identifiability",
    "solve_least_squares", "solve_ga", "ga_bounds", "payload_ga_bounds", "guidance",
    "rest_to_rest", "identify", "_dual_action",
]
