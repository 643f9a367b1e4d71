"""Message building and reading for the nodes, and the torque node's conversion, with
rosbags' message classes for the same types (serialised through CDR to prove the
messages are well formed)."""
import numpy as np
import pytest

from robot_ident.model.actuation import ActuatorSet
from robot_ident.errors import SignalError
from robot_ident.excitation.families import ModifiedFourierTrajectory, trajectory_points
from robot_ident.data.bag import make_typestore
from robot_ident.online.msg_build import (MessageTypes, clock_message, diagnostic_array, joint_trajectory_arrays,
                                   joint_trajectory_message, labelled_array)
from robot_ident.data.msgs import dynamic_joint_state_message, joint_state_arrays, joint_state_message
from robot_ident.online.torque_stream import EffortConverter


@pytest.fixture(scope="module")
def ts():
    return make_typestore()


@pytest.fixture(scope="module")
def types(ts):
    return MessageTypes.from_rosbags(ts)


def roundtrip(ts, msg):
    t = msg.__msgtype__
    return ts.deserialize_cdr(ts.serialize_cdr(msg, t), t)


def test_joint_trajectory_round_trip(ts, types):
    tr = ModifiedFourierTrajectory(("a", "b"), 2.0, np.array([0.1, -0.2]), np.array([[0.3], [0.1]]),
                                   np.array([[0.0], [0.2]]))
    pts = trajectory_points(tr, 50.0)
    msg = roundtrip(ts, joint_trajectory_message(types, pts, stamp_ns=0))
    assert msg.header.stamp.sec == 0 and list(msg.joint_names) == ["a", "b"]
    arr = joint_trajectory_arrays(msg)
    t = np.linspace(0, tr.duration, len(pts["points"]))
    q, qd, qdd = tr.sample(arr.t)
    np.testing.assert_allclose(arr.t, [p["time_from_start"]["sec"] + 1e-9 * p["time_from_start"]["nanosec"]
                                       for p in pts["points"]], atol=1e-9)
    assert arr.t[-1] == pytest.approx(tr.duration, abs=1e-9) and t.size == arr.t.size
    np.testing.assert_allclose(arr.positions, q, atol=1e-12)
    np.testing.assert_allclose(arr.velocities, qd, atol=1e-12)
    np.testing.assert_allclose(arr.accelerations, qdd, atol=1e-12)
    # positions only -> no velocities
    pts2 = {"joint_names": ["a"], "points": [{"positions": [0.0], "time_from_start": {"sec": 1, "nanosec": 5}}]}
    arr2 = joint_trajectory_arrays(roundtrip(ts, joint_trajectory_message(types, pts2, 7)))
    assert arr2.velocities is None and arr2.accelerations is None and arr2.stamp_ns == 7
    assert arr2.t[0] == pytest.approx(1.000000005)


def test_bad_trajectories_are_refused(ts, types):
    bad = {"joint_names": ["a", "b"], "points": [
        {"positions": [0.0, 1.0], "time_from_start": {"sec": 1, "nanosec": 0}},
        {"positions": [0.0], "time_from_start": {"sec": 2, "nanosec": 0}}]}
    with pytest.raises(SignalError, match="point 1: positions has 1 values for 2 joints"):
        joint_trajectory_arrays(joint_trajectory_message(types, bad))
    back = {"joint_names": ["a"], "points": [
        {"positions": [0.0], "time_from_start": {"sec": 2, "nanosec": 0}},
        {"positions": [0.0], "time_from_start": {"sec": 1, "nanosec": 0}}]}
    with pytest.raises(SignalError, match="strictly increasing"):
        joint_trajectory_arrays(joint_trajectory_message(types, back))
    twice = {"joint_names": ["a", "a"], "points": []}
    with pytest.raises(SignalError, match="twice"):
        joint_trajectory_arrays(joint_trajectory_message(types, twice))


def test_estimates_diagnostics_and_clock(ts, types):
    m = roundtrip(ts, labelled_array(types, "base_parameters", [1.0, 2.5, -3.0]))
    assert m.layout.dim[0].label == "base_parameters" and m.layout.dim[0].size == 3
    assert m.layout.dim[0].stride == 3 and list(m.data) == [1.0, 2.5, -3.0]
    d = roundtrip(ts, diagnostic_array(types, 5 * 10**9 + 3, "robot_ident/identification", "done",
                                       [("method", "wls"), ("a.m", "1 +- 0.1")], level=1, hardware_id="arm"))
    (st,) = d.status
    assert d.header.stamp.sec == 5 and d.header.stamp.nanosec == 3
    assert st.level == 1 and st.name == "robot_ident/identification" and st.hardware_id == "arm"
    assert [(kv.key, kv.value) for kv in st.values] == [("method", "wls"), ("a.m", "1 +- 0.1")]
    c = roundtrip(ts, clock_message(types, 12_345_000_000_001))
    assert (c.clock.sec, c.clock.nanosec) == (12345, 1)


def _acts():
    return ActuatorSet.from_mapping(("j1", "j2"), {
        "j1": {"type": "rotary", "torque_constant": 0.1, "gear_ratio": 100.0, "efficiency": 0.9},
        "j2": {"type": "rotary", "torque_constant": 0.05, "gear_ratio": 50.0, "direction": -1,
               "current_offset": 0.2}})


def test_torque_conversion_from_dynamic_joint_states(ts):
    T = ts.types
    JS, H, Tm = T["sensor_msgs/msg/JointState"], T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
    DJS, IV = T["control_msgs/msg/DynamicJointState"], T["control_msgs/msg/InterfaceValue"]
    acts = _acts()
    conv = EffortConverter(("j1", "j2"), acts, "dynamic_joint_state", "current", max_state_age_s=0.01)
    assert conv.on_joint_state(roundtrip(ts, joint_state_message(
        JS, H, Tm, 10**9, ["x", "j2", "j1"], [9.0, 0.2, 0.1], [0.0, -1.0, 1.0]))) is None
    cur = dynamic_joint_state_message(DJS, IV, H, Tm, 10**9 + 4_000_000, ["j2", "j1"],
                                      {"position": [0.2, 0.1], "current": [1.2, 3.0]})
    s = conv.on_current(roundtrip(ts, cur))
    assert s.stamp_ns == 10**9 + 4_000_000 and s.names == ("j1", "j2")
    np.testing.assert_allclose(s.effort, [0.9 * 100 * 0.1 * 3.0, -1 * 50 * 0.05 * (1.2 - 0.2)])
    np.testing.assert_allclose(s.effort, acts.efforts(np.array([[3.0, 1.2]]))[0])
    np.testing.assert_allclose(s.position, [0.1, 0.2])
    np.testing.assert_allclose(s.velocity, [1.0, -1.0])
    # the joint state is now 20 ms old: the sample goes out without positions
    cur2 = dynamic_joint_state_message(DJS, IV, H, Tm, 10**9 + 20_000_000, ["j1", "j2"],
                                       {"current": [0.0, 0.2]})
    s2 = conv.on_current(roundtrip(ts, cur2))
    assert s2.position.size == 0 and np.allclose(s2.effort, 0.0)
    # a message without j2's current is skipped and counted
    cur3 = dynamic_joint_state_message(DJS, IV, H, Tm, 10**9, ["j1"], {"current": [1.0]})
    assert conv.on_current(cur3) is None and conv.skipped == 1
    # the output message builds and round-trips as a JointState
    out = roundtrip(ts, joint_state_message(JS, H, Tm, s.stamp_ns, s.names, s.position, s.velocity, s.effort))
    a = joint_state_arrays(out)
    assert a.stamp_ns == s.stamp_ns and np.allclose(a.effort, s.effort)


def test_torque_conversion_from_the_joint_state_effort_field(ts):
    from types import SimpleNamespace as NS
    acts = _acts()
    conv = EffortConverter(("j1", "j2"), acts, "joint_state", shared_topic=True)
    msg = NS(header=NS(stamp=NS(sec=3, nanosec=0)), name=["j2", "j1"], position=[0.5, 0.4], velocity=[],
             effort=[0.7, 2.0])
    s = conv.on_joint_state(msg)
    np.testing.assert_allclose(s.effort, acts.efforts(np.array([[2.0, 0.7]]))[0])
    np.testing.assert_allclose(s.position, [0.4, 0.5]) and s.velocity.size == 0
    assert s.stamp_ns == 3 * 10**9
    # NaN effort (the broadcaster's 'no interface') is skipped
    msg.effort = [float("nan"), 1.0]
    assert conv.on_joint_state(msg) is None and conv.skipped == 1


def test_synthesised_currents_convert_back_to_the_efforts(ts):
    from types import SimpleNamespace as NS

    from robot_ident.online.torque_stream import CurrentSynthesiser
    T = ts.types
    H, Tm = T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
    DJS, IV = T["control_msgs/msg/DynamicJointState"], T["control_msgs/msg/InterfaceValue"]
    acts = _acts()
    synth = CurrentSynthesiser(("j1", "j2"), acts)
    msg = NS(header=NS(stamp=NS(sec=4, nanosec=7)), name=["j2", "j1", "x"], position=[0.2, 0.1, 0.0],
             velocity=[], effort=[-1.5, 12.0, 99.0])
    s = synth.on_joint_state(msg)
    np.testing.assert_allclose(s.effort, acts.currents(np.array([[12.0, -1.5]]))[0])
    djs = roundtrip(ts, dynamic_joint_state_message(DJS, IV, H, Tm, s.stamp_ns, s.names, {"current": s.effort}))
    back = EffortConverter(("j1", "j2"), acts, "dynamic_joint_state", "current").on_current(djs)
    np.testing.assert_allclose(back.effort, [12.0, -1.5], rtol=1e-12)
    assert back.stamp_ns == 4 * 10**9 + 7
    msg.effort = []
    assert synth.on_joint_state(msg) is None and synth.skipped == 1


def test_currents_are_synthesised_from_the_controllers_commanded_efforts():
    """Gazebo Fortress: /joint_states efforts read 0; the effort trajectory controller's state
    carries what it commands (output.effort), which the simulator applies."""
    from types import SimpleNamespace as NS

    from robot_ident.online.torque_stream import CurrentSynthesiser
    acts = _acts()
    synth = CurrentSynthesiser(("j1", "j2"), acts)
    msg = NS(header=NS(stamp=NS(sec=5, nanosec=1)), joint_names=["j2", "j1"],
             feedback=NS(positions=[0.2, 0.1]), output=NS(effort=[-1.5, 12.0]))
    s = synth.on_controller_state(msg)
    np.testing.assert_allclose(s.effort, acts.currents(np.array([[12.0, -1.5]]))[0])
    np.testing.assert_allclose(s.position, [0.1, 0.2])
    assert s.stamp_ns == 5 * 10**9 + 1
    msg.output = NS(effort=[])                  # a position controller commands no effort
    assert synth.on_controller_state(msg) is None
