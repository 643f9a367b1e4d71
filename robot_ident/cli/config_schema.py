"""Every key of the parameter file in one table: its type, unit, default and meaning, per
section. docs/config.md is rendered from it (`config_reference.py`) and so is the file
`robot-ident init` writes (`config_template.py`).

The sections are checked where they are used (io/config.py, model/actuation.py, ...); this
table describes them. Defaults are read from the code's own defaults (robot_ident/defaults.py,
the dataclasses the sections become) wherever the code keeps them in one; the few typed
here are parsed back by test/test_config_schema.py and compared with what the validators
make of an empty section, which also checks that every key set equals the validator's.
The table imports the engine: only docs, `init` and the tests read it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .. import defaults
from ..data.lag import CORRECT_ABOVE_S, MAX_LAG_S
from ..data.signals import FilterOptions
from ..data.sync import SyncOptions
from ..estimation.body_bounds import PhysicalBounds
from ..estimation.payload import PayloadConfig
from ..estimation.pipeline import IdentificationSettings
from ..excitation.collision.spec import BoxSpec, CollisionSpec
from ..excitation.constraints import Margins
from ..excitation.designer import DesignSpec
from ..mechanisms.closed_chain.spec import Closure
from ..model.actuation import Actuator
from ..model.robot import FrictionOptions
from ..model.spring import SpringSpec
from ..sim.config import ARMATURE_RANGE, DEFAULT_ARMATURE_PER_EFFORT
from ..sim.mujoco_arm import SimNoise


class _Unset:
    """No default: the key is absent unless given (the meaning says what happens then)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()


def code_default(cls, name: str):
    """The default of dataclass field `name` of `cls` (a tuple as a list, as YAML writes it)."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Key:
    name: str
    type: str                     # bool, int, float, str, list[str], [x, y, z], joint -> float, section, ...
    unit: str = ""
    default: Any = UNSET
    meaning: str = ""
    section: str | None = None    # the path of the section this key holds (type 'section')
    example: Any = UNSET          # shown (commented) by `robot-ident init` when there is no default


@dataclass(frozen=True)
class Section:
    path: str                     # '' (the node's parameters), 'identification.filter', 'actuators.<joint>', ...
    meaning: str
    checked_by: str               # the module that validates it
    keys: tuple[Key, ...]

    def names(self) -> set[str]:
        return {k.name for k in self.keys}

    def key(self, name: str) -> Key:
        return next(k for k in self.keys if k.name == name)


def _sub(name: str, path: str, meaning: str, type_: str = "section") -> Key:
    return Key(name, type_, "", UNSET, meaning, section=path)


ANGLE = "rad or m"
TOP = Section("", "The node's parameters (`robot_ident: ros__parameters:`).", "io/config.py", (
    Key("joints", "list[str]", "", UNSET, "the identified joints (required), in the order of the efforts and results",
        example=["joint1", "joint2"]),
    Key("current_source", "str", "", "dynamic_joint_states",
        "where the efforts come from: `effort` (JointState effort already is the joint effort, as ros2_control "
        "reports it), `joint_states_effort` (motor currents in JointState effort) or `dynamic_joint_states` "
        "(motor currents in a DynamicJointState interface); the two current sources need `actuators`"),
    Key("current_interface", "str", "", "current", "the DynamicJointState interface holding the currents"),
    Key("joint_states_topic", "str", "", "/joint_states", "the JointState topic of positions and velocities"),
    Key("current_topic", "str", "", UNSET,
        "the topic of the currents or efforts (unset: /dynamic_joint_states for dynamic_joint_states, "
        "else /joint_states)"),
    _sub("actuators", "actuators.<joint>", "per joint: how its current becomes its effort (needed for currents)",
         "joint -> section"),
    _sub("sync", "sync", "how the two topics are joined onto one time grid"),
    _sub("transmissions", "transmissions.<group>", "motors that drive several joints (coupled groups)",
         "group -> section"),
    Key("acceleration_limits", "joint -> float", "rad/s^2 or m/s^2", UNSET,
        "the joints' acceleration limits for the excitation design (`excitation.acceleration_limits` wins)",
        example={"joint1": 10.0}),
    _sub("identification", "identification", "estimator, filter, friction model, plausibility bounds"),
    _sub("excitation", "excitation", "the excitation trajectory's design: family, optimiser, limits, collisions"),
    _sub("simulation", "simulation", "how the simulated arm differs from the URDF (robot-ident simulate)"),
    _sub("payload", "payload", "payload identification with the arm known (identify --payload)"),
    _sub("springs", "springs.<name>", "springs between links (gravity balancers), identified with the arm",
         "name -> section"),
    Key("closures", "str", "path", UNSET,
        "the loop-closure YAML of a closed chain (relative: next to this file, then the package's urdf/); "
        "its keys: '(closures file)' in docs/config.md", example="arm_closures.yaml"),
))

_TYPES = "`rotary` (revolute joint), `screw` (prismatic joint) or `direct` (the value already is the effort)"
ACTUATOR = Section("actuators.<joint>", "One joint's actuator: effort = gain * (current - current_offset).",
                   "model/actuation.py", (
    Key("type", "str", "", UNSET, f"{_TYPES}; required (`direct` when current_source is effort)", example="rotary"),
    Key("torque_constant", "float", "N*m/A", UNSET, "the motor's torque constant (rotary, screw: required)"),
    Key("gear_ratio", "float", "", code_default(Actuator, "gear_ratio"),
        "motor revolutions per joint (or screw) revolution (rotary, screw)"),
    Key("lead", "float", "m/rev", UNSET, "the screw's lead (screw: required)"),
    Key("efficiency", "float", "", code_default(Actuator, "efficiency"), "a factor in (0, 1] (rotary, screw)"),
    Key("direction", "int", "", code_default(Actuator, "direction"),
        "+1 or -1: the sign between the motor current and the joint axis"),
    Key("current_offset", "float", "A", code_default(Actuator, "current_offset"),
        "subtracted from the current (effort units for `direct`)"),
))

SYNC = Section("sync", "Joining joint states and currents onto one grid (0 = automatic).", "io/config.py", (
    Key("rate_hz", "float", "Hz", 0.0, "the grid's rate (0: the faster stream's median rate)"),
    Key("max_gap_s", "float", "s", 0.0,
        "a longer gap splits the recording (0: max(5 T, min(20 T, 10 ms)), T the slower stream's period)"),
    Key("min_segment_s", "float", "s", code_default(SyncOptions, "min_segment_s"), "shorter segments are dropped"),
    Key("max_lag_s", "float", "s", 0.0, f"the bound of the lag search between the topics (0: {MAX_LAG_S:g} s)"),
    Key("lag_threshold_s", "float", "s", 0.0, f"larger lags are corrected (0: {CORRECT_ABOVE_S:g} s)"),
))

TRANSMISSION = Section("transmissions.<group>", "Coupled motors: qd_motor = M qd_joint, tau_joint = M^T tau_motor.",
                       "model/transmission.py", (
    Key("joints", "list[str]", "", UNSET, "the group's joints (at least two; required)",
        example=["joint5", "joint6"]),
    Key("motors", "list[str]", "", UNSET, "the motors' names (unset: `<group>_m1` .. `<group>_mK`)"),
    Key("motor_from_joint", "matrix", "", UNSET, "M, rows of numbers (or a flat row-major list); this or the next",
        example=[[1.0, 0.0], [-1.0, 1.0]]),
    Key("joint_from_motor", "matrix", "", UNSET, "C = M^-1 instead of M"),
))

_ESTIMATORS = "ols, wls, robust, rls, physical, sobol-ga, sobol-ls"
IDENTIFICATION = Section("identification", "The identification's settings.", "estimation/pipeline.py", (
    Key("method", "str", "", defaults.METHOD, f"the estimator: {_ESTIMATORS}"),
    Key("holdout", "float", "", defaults.HOLDOUT,
        "the last fraction of all samples (in input order) kept for validation, in [0, 0.9)"),
    _sub("filter", "identification.filter", "low-pass, differentiation and decimation"),
    _sub("dead_band", "identification.dead_band", "the samples friction is not fitted on"),
    _sub("model", "identification.model", "which friction and armature parameters are identified"),
    Key("base_samples", "int", "", code_default(IdentificationSettings, "base_samples"),
        "random states of the base-parameter reduction (at most 100000)"),
    Key("base_seed", "int", "", code_default(IdentificationSettings, "base_seed"), "their seed"),
    _sub("physical", "identification.physical", "plausibility bounds of the physical estimator's bodies"),
))

FILTER = Section("identification.filter", "Low-pass (zero-phase Butterworth), differentiation, decimation.",
                 "estimation/pipeline.py", (
    Key("cutoff_hz", "float or auto", "Hz", "auto",
        "the low-pass cutoff (auto: cross-validated on the data, 20 Hz when the data cannot decide)"),
    Key("order", "int", "", code_default(FilterOptions, "order"), "the Butterworth filter's order"),
    Key("target_rate_hz", "float or null", "Hz", code_default(FilterOptions, "target_rate_hz"),
        "the rate the samples are decimated to (null: keep the recording's)"),
    Key("trim_s", "float", "s", code_default(FilterOptions, "trim_s"), "dropped at both ends (filter transients)"),
    Key("use_measured_velocity", "auto or bool", "", "auto",
        "auto: the measured velocity unless it lags dq/dt; true: measured; false: differentiated positions"),
))

DEAD_BAND = Section("identification.dead_band", "Samples left out of the friction fit.", "estimation/pipeline.py", (
    Key("velocity", "float", "rad/s or m/s", code_default(IdentificationSettings, "moving_threshold"),
        "|qd| at or below this is in the dead band"),
    Key("reversal_guard_s", "float or null", "s", code_default(IdentificationSettings, "reversal_guard_s"),
        "so is a sample this close to a velocity reversal (null: 1 / cutoff)"),
))

MODEL = Section("identification.model", "The per-joint parameters besides the bodies.", "estimation/pipeline.py", (
    Key("armature", "bool", "", code_default(FrictionOptions, "armature"),
        "identify the rotor inertia (Ia); false where the efforts come from joint torque sensors after the gear "
        "(Franka, KUKA LWR/iiwa), which do not see the rotor"),
    Key("coulomb", "bool", "", code_default(FrictionOptions, "coulomb"), "identify Coulomb friction (Fc)"),
    Key("viscous", "bool", "", code_default(FrictionOptions, "viscous"), "identify viscous friction (Fv)"),
    Key("offset", "bool", "", code_default(FrictionOptions, "offset"), "identify a constant effort offset (off)"),
    Key("coulomb_velocity_scale", "float", "rad/s or m/s", code_default(FrictionOptions, "coulomb_velocity_scale"),
        "v_s of the smooth Coulomb model Fc tanh(qd / v_s)"),
    Key("locked_positions", "joint -> float", ANGLE, {}, "where joints that are not identified are held"),
    Key("armature_nominal", "joint -> float", "kg*m^2 or kg", {}, "the armature's prior (CAD has none)"),
))

PHYSICAL = Section("identification.physical", "Where the physical estimator's bodies may plausibly be.",
                   "estimation/body_bounds.py", (
    Key("prior_relative_std", "float", "", code_default(PhysicalBounds, "prior_relative_std"),
        "how far from CAD a body may plausibly be"),
    Key("mass_ratio", "[min, max]", "", code_default(PhysicalBounds, "mass_ratio"), "per-body mass range, x CAD mass"),
    Key("mass_absolute", "[min, max] or null", "kg", code_default(PhysicalBounds, "mass_absolute"),
        "the range of bodies whose CAD mass is below 1 g (null: [0, total CAD mass, at least 1 kg])"),
    Key("total_mass", "[min, max] or null", "kg", code_default(PhysicalBounds, "total_mass"),
        "the range of all moving bodies together (null: none)"),
    Key("com_region", "str", "", code_default(PhysicalBounds, "com_region"),
        "where a centre of mass may be: geometry (bounding box), sphere or none"),
    Key("com_radius", "float or null", "m", code_default(PhysicalBounds, "com_radius"),
        "the sphere's radius (null: from the kinematics)"),
    Key("geometry_margin", "float", "m", code_default(PhysicalBounds, "geometry_margin"),
        "added to each side of a geometry bounding box"),
    _sub("bodies", "identification.physical.bodies.<joint>", "per-body overrides, keyed by the body's joint",
         "joint -> section"),
))

BODY = Section("identification.physical.bodies.<joint>", "One body's override.", "estimation/body_bounds.py", (
    Key("mass", "[min, max]", "kg", UNSET, "the body's mass range", example=[0.2, 3.0]),
    Key("com_radius", "float", "m", UNSET, "the radius of its centre-of-mass sphere"),
))

EXCITATION = Section("excitation", "The excitation trajectory's design (robot-ident design, the excitation node).",
                     "excitation/config.py", (
    Key("family", "str", "", code_default(DesignSpec, "family"),
        "fourier, modified_fourier, polynomial7 or joint_moves"),
    Key("optimizer", "str", "", code_default(DesignSpec, "optimizer"), "slsqp, ga, pso or qga"),
    Key("criterion", "str", "", code_default(DesignSpec, "criterion"),
        "cond (condition number) or logdet (D-optimality) of the base regressor"),
    Key("harmonics", "int", "", code_default(DesignSpec, "harmonics"), "Fourier harmonics per joint"),
    Key("base_frequency", "float", "rad/s", code_default(DesignSpec, "base_frequency"),
        "the Fourier base frequency (period 2 pi / base_frequency)"),
    Key("duration", "float", "s", code_default(DesignSpec, "duration"), "the polynomial7 trajectory's duration"),
    Key("move_duration", "float", "s", code_default(DesignSpec, "move_duration"), "joint_moves: seconds per move"),
    _sub("margins", "excitation.margins", "what is kept in reserve from each limit"),
    Key("acceleration_limits", "joint -> float", "rad/s^2 or m/s^2", UNSET,
        "every joint's acceleration limit (URDFs have none; also accepted at the top level)",
        example={"joint1": 10.0}),
    Key("effort_limits", "bool", "", False, "true: also keep the nominal efforts within the URDF's effort limits"),
    Key("start_pose", "joint -> float or list", ANGLE, UNSET,
        "where the trajectory starts and ends (unset: free for Fourier, else mid-range)"),
    Key("position_limits", "joint -> [lower, upper]", ANGLE, UNSET,
        "the design's range per joint, within the URDF's (unset: the URDF's; continuous: +-pi around the start)"),
    Key("joint_weights", "joint -> float or list", "", UNSET, "the joints' weights in the criterion (unset: 1)"),
    Key("max_time", "float", "s", code_default(DesignSpec, "max_time"), "the optimiser's wall-time budget"),
    Key("max_evaluations", "int", "", 0, "the optimiser's evaluation budget (0: none)"),
    Key("seed", "int", "", code_default(DesignSpec, "seed"), "the optimiser's random seed"),
    Key("samples", "int", "", code_default(DesignSpec, "n_samples"), "samples of the criterion over the trajectory"),
    Key("constraint_points", "int", "", code_default(DesignSpec, "n_constraint"), "the limits' constraint grid"),
    Key("check_dt", "float", "s", code_default(DesignSpec, "check_dt"), "the dense check's step"),
    Key("point_rate", "float", "Hz", code_default(DesignSpec, "point_rate"), "trajectory_msgs points per second"),
    _sub("collision", "excitation.collision", "self-collision and environment checks"),
))

MARGINS = Section("excitation.margins", "Reserve kept from each limit.", "excitation/config.py", (
    Key("position", "float", ANGLE, code_default(Margins, "position"), "inside each end of the range"),
    Key("velocity", "float", "", code_default(Margins, "velocity"), "fraction of the velocity limit, in [0, 1)"),
    Key("acceleration", "float", "", code_default(Margins, "acceleration"),
        "fraction of the acceleration limit, in [0, 1)"),
    Key("effort", "float", "", code_default(Margins, "effort"), "fraction of the effort limit, in [0, 1)"),
))

COLLISION = Section("excitation.collision", "Distances kept between the robot's bodies and to the environment.",
                    "excitation/collision/spec.py", (
    Key("margin", "float", "m", code_default(CollisionSpec, "margin"),
        "kept between every checked pair and to the environment"),
    Key("floor", "float or null", "m", code_default(CollisionSpec, "floor"),
        "z of a plane in the root link's frame the robot stays above (null: none)"),
    _sub("boxes", "excitation.collision.boxes.<name>", "boxes of the environment (or a list of them with name)",
         "name -> section"),
    Key("srdf", "str or null", "path", code_default(CollisionSpec, "srdf"),
        "a MoveIt SRDF whose disable_collisions pairs are not checked (relative: to this file)"),
    Key("package_dirs", "list[str]", "path", code_default(CollisionSpec, "package_dirs"),
        "where `package://<pkg>/` meshes are looked up (`<dir>/<pkg>/...`) by the collision checks and the "
        "physical bounds: after --package-dir, before the folders above the URDF, ROS_PACKAGE_PATH, "
        "AMENT_PREFIX_PATH and the ament index (relative: to this file)"),
    Key("allow_without_collision_model", "bool", "", code_default(CollisionSpec, "allow_without_collision_model"),
        "excitation node: run even if the URDF has no collision geometry"),
))

BOX = Section("excitation.collision.boxes.<name>", "One box of the environment.", "excitation/collision/spec.py", (
    Key("name", "str", "", UNSET, "the box's name (unset: its key, or `box<i>` in a list)"),
    Key("size", "[x, y, z]", "m", UNSET, "full edge lengths (required)", example=[0.6, 0.1, 0.8]),
    Key("xyz", "[x, y, z]", "m", code_default(BoxSpec, "xyz"), "the centre in the root link's frame"),
    Key("rpy", "[r, p, y]", "rad", code_default(BoxSpec, "rpy"), "the orientation"),
))

SIMULATION = Section("simulation", "How the simulated arm differs from the URDF, and its sensors' noise.",
                     "sim/config.py", (
    Key("effort_noise", "float", "", code_default(SimNoise, "effort_rel_std"),
        "effort noise std, fraction of each joint's effort RMS"),
    Key("position_noise", "float", ANGLE, code_default(SimNoise, "position_std"), "position noise std"),
    Key("velocity_noise", "float", "rad/s or m/s", code_default(SimNoise, "velocity_std"), "velocity noise std"),
    Key("current_noise", "float", "A", 0.0, "added to the recorded currents"),
    Key("seed", "int", "", code_default(SimNoise, "seed"), "the noise's seed"),
    _sub("joints", "simulation.joints.<joint>", "per joint (or motor): its true friction and armature",
         "joint -> section"),
    _sub("payload", "simulation.payload", "a mass added to the last body (the CAD lacks it)"),
))

SIM_JOINT = Section("simulation.joints.<joint>", "One joint's (or motor's) truth.", "sim/config.py", (
    Key("armature", "float", "kg*m^2 or kg", UNSET,
        "rotor inertia reflected to the joint (unset: a geared drive's rotor, "
        f"{DEFAULT_ARMATURE_PER_EFFORT:g} per N*m (N) of the URDF effort limit within {ARMATURE_RANGE[0]:g}-"
        f"{ARMATURE_RANGE[1]:g}, where identification.model.armature is on; else 0)"),
    Key("coulomb", "float", "N*m or N", UNSET, "Coulomb friction (unset: the URDF's `<dynamics friction>`, else 0)"),
    Key("viscous", "float", "N*m*s/rad or N*s/m", UNSET,
        "viscous friction (unset: the URDF's `<dynamics damping>`, else 0)"),
    Key("offset", "float", "N*m or N", 0.0, "a constant effort offset"),
))

SIM_PAYLOAD = Section("simulation.payload", "A point-like mass added to the last body.", "sim/config.py", (
    Key("mass", "float", "kg", 0.0, "its mass"),
    Key("com", "[x, y, z]", "m", [0.0, 0.0, 0.0], "its position in the last body's frame"),
))

PAYLOAD = Section("payload", "Payload identification with the arm known.", "estimation/payload.py", (
    Key("frame", "str", "", code_default(PayloadConfig, "frame"), "the link the payload is fixed to"),
    Key("joints", "list[str]", "", UNSET,
        "the joints excited in the design (unset: the last three identified joints that carry the frame)"),
    Key("pose", "joint -> float", ANGLE, code_default(PayloadConfig, "pose"),
        "where the other joints are held (a joint not listed: 0, or mid-range when 0 is outside the limits)"),
    Key("name", "str", "", code_default(PayloadConfig, "name"), "the payload's link name in the identified URDF"),
    Key("known_arm", "str or null", "path", code_default(PayloadConfig, "known_arm"),
        "the arm's result folder the node uses by default"),
))

SPRING = Section("springs.<name>", "A spring between two links (its stiffness and preload are identified).",
                 "model/spring.py", (
    Key("link_a", "str", "", UNSET, "one end's link (required)", example="base_link"),
    Key("point_a", "[x, y, z]", "m", UNSET, "the end's point in that link's frame (required)",
        example=[0.0, 0.1, 0.0]),
    Key("link_b", "str", "", UNSET, "the other end's link (required)", example="upper_arm"),
    Key("point_b", "[x, y, z]", "m", UNSET, "its point (required)", example=[0.0, 0.0, 0.3]),
    Key("stiffness", "float", "N/m", code_default(SpringSpec, "stiffness"), "the nominal stiffness K"),
    Key("free_length", "float or null", "m", code_default(SpringSpec, "free_length"),
        "the unloaded length (or preload, not both)"),
    Key("preload", "float or null", "N", code_default(SpringSpec, "preload"),
        "the tension at the reference length"),
    Key("reference_length", "float or null", "m", code_default(SpringSpec, "reference_length"),
        "where the preload holds (null: the length at q = 0)"),
))

CLOSURES_FILE = Section("(closures file)", "The loop-closure YAML the `closures` key names (not in the parameter "
                        "file; e.g. urdf/hybrid5_closures.yaml).", "mechanisms/closed_chain/spec.py", (
    Key("urdf", "str", "path", UNSET, "the tree URDF (relative: to the closures file; required)"),
    Key("actuated", "list[str]", "", UNSET, "the actuated joints (required; the config's joints)"),
    _sub("closures", "(closures file).closures[]", "the loop closures (required)", "list of sections"),
    Key("home", "joint -> float", ANGLE, UNSET, "initial guesses of the tree joints (passive) and home (actuated)"),
    Key("tie", "group -> list[str]", "", UNSET, "tree joints whose bodies are identical (one set of parameters)"),
    Key("actuators", "joint -> section", "", UNSET, "current -> effort per actuated joint, as `actuators.<joint>`"),
))

CLOSURE = Section("(closures file).closures[]", "Two points on two tree links that must coincide.",
                  "mechanisms/closed_chain/spec.py", (
    Key("name", "str", "", UNSET, "the closure's name (unset: `closure<i>`)"),
    Key("link_a", "str", "", UNSET, "one link (required)"),
    Key("point_a", "[x, y, z]", "m", code_default(Closure, "point_a"), "the point in link_a's frame"),
    Key("link_b", "str", "", UNSET, "the other link (required)"),
    Key("point_b", "[x, y, z]", "m", code_default(Closure, "point_b"), "the point in link_b's frame"),
    Key("kind", "str", "", code_default(Closure, "kind"), "position (3 constraints) or pose (6)"),
    Key("rpy_a", "[r, p, y]", "rad", code_default(Closure, "rpy_a"), "pose closures: the cut frame in link_a"),
    Key("rpy_b", "[r, p, y]", "rad", code_default(Closure, "rpy_b"), "pose closures: the cut frame in link_b"),
))

SECTIONS = (TOP, ACTUATOR, SYNC, TRANSMISSION, IDENTIFICATION, FILTER, DEAD_BAND, MODEL, PHYSICAL, BODY,
            EXCITATION, MARGINS, COLLISION, BOX, SIMULATION, SIM_JOINT, SIM_PAYLOAD, PAYLOAD, SPRING,
            CLOSURES_FILE, CLOSURE)
BY_PATH = {s.path: s for s in SECTIONS}


def section(path: str) -> Section:
    return BY_PATH[path]
