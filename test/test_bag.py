"""rosbag2 round trips: simulated arm -> currents through the inverse actuator model ->
bag (sqlite3 and mcap) -> read -> synchronise -> efforts through the actuator model."""
import math

import numpy as np
import pytest

pytest.importorskip("rosbags")

from robot_ident.data.bag import BagError, read_recordings_from_config, write_bag_from_config, write_simulation_bag  # noqa: E402
from robot_ident.data.bag_files import bag_topics  # noqa: E402
from robot_ident.errors import SignalError  # noqa: E402
from robot_ident.excitation.fourier import FourierTrajectory  # noqa: E402
from robot_ident.io.config import config_from_parameters  # noqa: E402
from robot_ident.model.robot import RobotModel  # noqa: E402
from robot_ident.sim.mujoco_arm import JointTruth, SimNoise, SimulatedArm  # noqa: E402

# A turntable, a tilting arm and a screw-driven slide (source A's lead-screw limb).
URDF = """<?xml version="1.0"?>
<robot name="screw_arm">
  <link name="base"><inertial><mass value="5"/><origin xyz="0 0 0"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <joint name="turn" type="revolute">
    <parent link="base"/><child link="column"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-2.5" upper="2.5" velocity="2.0" effort="100"/>
  </joint>
  <link name="column"><inertial><mass value="3"/><origin xyz="0.02 0.01 0.2"/>
    <inertia ixx="0.05" ixy="0.001" ixz="0.002" iyy="0.05" iyz="0.001" izz="0.02"/></inertial></link>
  <joint name="tilt" type="revolute">
    <parent link="column"/><child link="arm"/><origin xyz="0 0 0.4"/><axis xyz="0 1 0"/>
    <limit lower="-1.2" upper="1.2" velocity="2.0" effort="100"/>
  </joint>
  <link name="arm"><inertial><mass value="2"/><origin xyz="0.2 0 0.02"/>
    <inertia ixx="0.01" ixy="0" ixz="0.001" iyy="0.04" iyz="0" izz="0.04"/></inertial></link>
  <joint name="slide" type="prismatic">
    <parent link="arm"/><child link="carriage"/><origin xyz="0.3 0 0"/><axis xyz="1 0 0"/>
    <limit lower="-0.1" upper="0.1" velocity="0.3" effort="2000"/>
  </joint>
  <link name="carriage"><inertial><mass value="1.5"/><origin xyz="0.05 0 0.01"/>
    <inertia ixx="0.004" ixy="0" ixz="0" iyy="0.006" iyz="0" izz="0.006"/></inertial></link>
</robot>
"""
JOINTS = ("turn", "tilt", "slide")
PARAMS = {
    "joints": list(JOINTS),
    "current_source": "dynamic_joint_states",
    "current_interface": "current",
    "actuators": {
        "turn": {"type": "rotary", "torque_constant": 0.12, "gear_ratio": 100.0, "efficiency": 0.95,
                 "direction": -1, "current_offset": 0.01},
        "tilt": {"type": "rotary", "torque_constant": 0.08, "gear_ratio": 120.0},
        "slide": {"type": "screw", "torque_constant": 0.3, "gear_ratio": 2.0, "lead": 0.01, "efficiency": 0.9},
    },
}
CURRENT_STD = 0.002   # A


@pytest.fixture(scope="module")
def sim():
    model = RobotModel(URDF, JOINTS)
    truth = JointTruth(np.array([0.05, 0.05, 2.0]), np.array([1.0, 1.5, 20.0]),
                       np.array([0.5, 0.8, 50.0]), np.array([0.2, -0.3, 5.0]))
    traj = FourierTrajectory.random_within_limits(JOINTS, model.limits.lower, model.limits.upper,
                                                  model.limits.velocity, np.array([5.0, 5.0, 1.0]),
                                                  wf=math.pi, harmonics=3)
    # effort sensor noise off: the only effort noise is the current noise added in the bag
    return SimulatedArm(URDF, JOINTS, truth).run(traj, noise=SimNoise(effort_abs_std=np.zeros(3)))


@pytest.fixture(scope="module")
def config():
    return config_from_parameters(PARAMS, "test")


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_round_trip_recovers_simulated_efforts(tmp_path, sim, config, storage):
    rec = sim.recording
    path = tmp_path / f"run_{storage}"
    info = write_simulation_bag(path, sim, config.actuators, storage=storage, current_noise_std=CURRENT_STD,
                                extra_joints=("gripper",))
    assert rec.n_samples == 2001
    topics = bag_topics(path)
    assert topics["/joint_states"].msgtype == "sensor_msgs/msg/JointState"
    assert topics["/dynamic_joint_states"].msgtype == "control_msgs/msg/DynamicJointState"
    assert topics["/joint_states"].count == 1001 == info.topics["/joint_states"]        # 500 Hz
    assert topics["/dynamic_joint_states"].count == 2001                                # 1 kHz
    assert list((path).glob("*.mcap" if storage == "mcap" else "*.db3"))

    res = read_recordings_from_config(path, config)
    assert len(res.segments) == 1
    out = res.segments[0]
    assert out.joint_names == JOINTS
    assert out.n_samples == rec.n_samples
    assert np.allclose(out.t, rec.t, atol=1e-9)
    assert res.report.rate_hz == pytest.approx(1000.0)
    for s in res.report.streams.values():
        assert (s.duplicates, s.nan_samples, s.out_of_order) == (0, 0, 0)

    # positions: exact where a joint-state message was sent, interpolated in between
    assert np.allclose(out.q[::2], rec.q[::2], rtol=0, atol=1e-12)
    assert np.allclose(out.q[1::2], sim.q_true[1::2], atol=2e-4)
    assert np.allclose(out.qd[::2], rec.qd[::2], rtol=0, atol=1e-12)

    # efforts: the simulated measured effort (commanded + offset) within the current noise
    expected = sim.effort_true + np.array([0.2, -0.3, 5.0])
    assert np.allclose(expected, rec.effort)
    gains = np.abs(config.actuators.gains)
    resid = (out.effort - expected) / gains          # back in amperes
    rms = np.sqrt(np.mean(resid ** 2, axis=0))
    assert np.all(rms > 0.9 * CURRENT_STD) and np.all(rms < 1.1 * CURRENT_STD), rms
    assert np.all(np.abs(resid) < 5 * CURRENT_STD)
    # the screw joint's force really went through F = eff 2 pi N k_t i / lead
    assert gains[2] == pytest.approx(0.9 * 2 * math.pi * 2.0 * 0.3 / 0.01)
    assert out.meta["effort_from"] == "current" and out.meta["bag"] == str(path)


def test_bag_stores_the_control_msgs_definitions(tmp_path, sim, config):
    from rosbags.highlevel import AnyReader
    path = tmp_path / "defs"
    write_simulation_bag(path, sim, config.actuators, storage="mcap")
    with AnyReader([path]) as reader:        # no default type store: definitions come from the bag
        conn = next(c for c in reader.connections if c.topic == "/dynamic_joint_states")
        raw = next(r for _, _, r in reader.messages(connections=[conn]))
        msg = reader.deserialize(raw, conn.msgtype)
    assert list(msg.joint_names) == ["slide", "tilt", "turn"]       # reversed: matched by name
    assert list(msg.interface_values[0].interface_names) == ["position", "current"]


def test_currents_in_joint_state_effort_field(tmp_path, sim):
    cfg = config_from_parameters(dict(PARAMS, current_source="joint_states_effort"), "test")
    assert cfg.current_topic == "/joint_states"
    path = tmp_path / "effort_field"
    write_bag_from_config(path, sim.recording, cfg)
    assert set(bag_topics(path)) == {"/joint_states"}
    res = read_recordings_from_config(path, cfg)
    out = res.segments[0]
    assert res.report.rate_hz == pytest.approx(500.0)       # both streams are the 500 Hz messages
    assert np.allclose(out.effort, sim.recording.effort[::2], rtol=1e-9, atol=1e-9)


def test_direct_efforts(tmp_path, sim):
    cfg = config_from_parameters({"joints": list(JOINTS), "current_source": "effort",
                                  "current_topic": "/joint_efforts"}, "test")
    path = tmp_path / "direct"
    write_bag_from_config(path, sim.recording, cfg, storage="mcap", joint_states_rate_hz=250.0)
    res = read_recordings_from_config(path, cfg)
    out = res.segments[0]
    assert res.report.rate_hz == pytest.approx(1000.0)
    assert np.allclose(out.effort, sim.recording.effort, atol=1e-9)
    assert out.meta["effort_from"] == "direct"


def test_missing_topic_wrong_type_and_bad_paths(tmp_path, sim, config):
    path = tmp_path / "bag"
    write_simulation_bag(path, sim, config.actuators)
    cfg = config_from_parameters(dict(PARAMS, current_topic="/motor_currents"), "test")
    with pytest.raises(BagError, match=f"bag {path} has no topic '/motor_currents'.*its topics: "
                                       "/dynamic_joint_states"):
        read_recordings_from_config(path, cfg)
    cfg = config_from_parameters(dict(PARAMS, current_source="joint_states_effort",
                                      current_topic="/dynamic_joint_states"), "test")
    with pytest.raises(BagError, match="topic '/dynamic_joint_states' in bag .* has type "
                                       "control_msgs/msg/DynamicJointState, expected sensor_msgs/msg/JointState"):
        read_recordings_from_config(path, cfg)
    with pytest.raises(BagError, match="bag not found"):
        read_recordings_from_config(tmp_path / "nope", config)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BagError, match="no metadata.yaml"):
        read_recordings_from_config(tmp_path / "empty", config)
    with pytest.raises(BagError, match="exists already"):
        write_simulation_bag(path, sim, config.actuators)


def test_wrong_interface_or_joint_names_the_topic(tmp_path, sim, config):
    path = tmp_path / "bag"
    write_simulation_bag(path, sim, config.actuators)
    cfg = config_from_parameters(dict(PARAMS, current_interface="torque"), "test")
    with pytest.raises(SignalError, match="joint 'turn' has no finite 'torque' value .*'/dynamic_joint_states'"):
        read_recordings_from_config(path, cfg)
    params = dict(PARAMS, joints=["turn", "tilt", "slide", "wrist"])
    params["actuators"] = dict(PARAMS["actuators"], wrist={"type": "rotary", "torque_constant": 0.1})
    with pytest.raises(SignalError, match="joint 'wrist' is missing from topic '/joint_states'"):
        read_recordings_from_config(path, config_from_parameters(params, "test"))


def test_identification_from_the_bag_matches_the_in_memory_path(tmp_path, config):
    """Currents are the only effort source, the slide is screw-driven: the base parameters
    identified from the bag agree with those from the simulator's in-memory recording."""
    estimation = pytest.importorskip("robot_ident.estimation")
    from robot_ident.data.signals import FilterOptions, process
    from robot_ident.model.base import BaseParameters
    model = RobotModel(URDF, JOINTS)
    truth = JointTruth(np.array([0.05, 0.05, 2.0]), np.array([1.0, 1.5, 20.0]),
                       np.array([0.5, 0.8, 50.0]), np.array([0.2, -0.3, 5.0]))
    traj = FourierTrajectory.random_within_limits(JOINTS, model.limits.lower, model.limits.upper,
                                                  model.limits.velocity, np.array([5.0, 5.0, 1.0]),
                                                  wf=math.pi / 2, harmonics=5, seed=1)
    arm = SimulatedArm(URDF, JOINTS, truth)
    sim = arm.run(traj, duration=12.0, noise=SimNoise(effort_rel_std=0.01, seed=2))
    base = BaseParameters.from_model(model)
    phi = base.project(arm.true_parameters(model))

    def identify(rec):
        return estimation.wls(estimation.build_problem(model, base, process(rec, FilterOptions())))

    mem = identify(sim.recording)
    write_simulation_bag(tmp_path / "bag", sim, config.actuators, storage="mcap")
    res = read_recordings_from_config(tmp_path / "bag", config)
    assert len(res.segments) == 1
    bag = identify(res.segments[0])
    # same estimates up to a small fraction of their standard deviation (positions at 500 Hz
    # are interpolated to the 1 kHz grid, so they are not bit-identical)
    assert np.max(np.abs(bag.values - mem.values) / mem.std) < 0.5
    # and therefore the same accuracy against the simulator's truth
    err_mem = np.median(np.abs(mem.values - phi) / mem.std)
    err_bag = np.median(np.abs(bag.values - phi) / bag.std)
    assert err_bag < 1.2 * err_mem + 0.1


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_bags_are_written_for_humble_by_default(tmp_path, sim, config, storage):
    """rosbag2 metadata version 8 by default: Humble's `ros2 bag play` reads it (it
    rejects version 9, whose QoS profiles are a YAML list, not a string)."""
    import yaml
    write_simulation_bag(tmp_path / "v8", sim, config.actuators, storage=storage)
    meta = yaml.safe_load((tmp_path / "v8" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == 8
    for t in meta["topics_with_message_count"]:
        assert isinstance(t["topic_metadata"]["offered_qos_profiles"], str)
    write_simulation_bag(tmp_path / "v9", sim, config.actuators, storage=storage, version=9)
    meta9 = yaml.safe_load((tmp_path / "v9" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta9["version"] == 9
    assert all(isinstance(t["topic_metadata"]["offered_qos_profiles"], list)
               for t in meta9["topics_with_message_count"])
    a = read_recordings_from_config(tmp_path / "v8", config)
    b = read_recordings_from_config(tmp_path / "v9", config)
    assert np.array_equal(a.segments[0].effort, b.segments[0].effort)
    with pytest.raises(BagError, match="metadata version 7"):
        write_simulation_bag(tmp_path / "v7", sim, config.actuators, version=7)
