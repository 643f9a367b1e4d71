"""Message <-> arrays with plain duck-typed objects and with rosbags' real message types."""
from types import SimpleNamespace as NS

import numpy as np
import pytest

from robot_ident.errors import SignalError
from robot_ident.data.msgs import (JointStreamCollector, dynamic_joint_state_message, dynamic_joint_state_values,
                              joint_state_arrays, joint_state_message, stamp_fields, stamp_ns)
from robot_ident.data.sync import synchronise


def header(sec, nanosec):
    return NS(stamp=NS(sec=sec, nanosec=nanosec), frame_id="")


def js(sec, nanosec, names, position, velocity=(), effort=()):
    return NS(header=header(sec, nanosec), name=list(names), position=list(position),
              velocity=list(velocity), effort=list(effort))


def djs(sec, nanosec, per_joint):
    """per_joint: {joint: {interface: value}}"""
    return NS(header=header(sec, nanosec), joint_names=list(per_joint),
              interface_values=[NS(interface_names=list(d), values=list(d.values())) for d in per_joint.values()])


def test_stamp_conversions():
    assert stamp_ns(js(12, 345, ["a"], [0.0])) == 12_000_000_345
    assert stamp_fields(12_000_000_345) == (12, 345)
    assert stamp_fields(-1) == (-1, 999_999_999)
    with pytest.raises(SignalError, match="header.stamp"):
        stamp_ns(NS(header=NS()))


def test_joint_state_arrays():
    a = joint_state_arrays(js(1, 5, ["x", "y"], [0.1, 0.2], [1.0, 2.0]))
    assert a.stamp_ns == 1_000_000_005 and a.names == ("x", "y")
    assert np.array_equal(a.position, [0.1, 0.2]) and np.array_equal(a.velocity, [1.0, 2.0])
    assert a.effort.size == 0
    with pytest.raises(SignalError, match="JointState message has no field 'name'"):
        joint_state_arrays(NS(header=header(0, 0)))


def test_dynamic_joint_state_picks_the_interface_by_name():
    m = djs(2, 0, {"j1": {"position": 1.0, "current": 0.5},
                   "j2": {"current": -0.25, "position": 3.0},
                   "j3": {"position": 7.0}})
    s, names, v = dynamic_joint_state_values(m, "current")
    assert s == 2 * 10**9 and names == ("j1", "j2", "j3")
    assert v[0] == 0.5 and v[1] == -0.25 and np.isnan(v[2])


def test_collector_to_stream_and_sync_with_varying_joint_order():
    js_col = JointStreamCollector("/joint_states", "joint_state")
    cur_col = JointStreamCollector("/dynamic_joint_states", "dynamic_joint_state", "current")
    for k in range(20):
        ns = 10**9 + k * 2_000_000
        names = ["b", "a"] if k % 3 else ["a", "b"]
        pos = {"a": 0.01 * k, "b": -0.02 * k}
        js_col.add(js(ns // 10**9, ns % 10**9, names, [pos[n] for n in names]))
    for k in range(40):
        ns = 10**9 + k * 1_000_000
        cur_col.add(djs(ns // 10**9, ns % 10**9, {"b": {"current": -k}, "a": {"current": k, "position": 0}}))
    st, cu = js_col.stream(), cur_col.stream()
    assert len(st) == 20 and len(cu) == 40
    res = synchronise(st, cu, ["a", "b"], effort_field="current")
    rec = res.segments[0]
    k = np.arange(rec.n_samples)
    assert np.allclose(rec.effort, np.column_stack([k, -k]))
    assert np.allclose(rec.q[:, 0], 0.005 * k) and np.allclose(rec.q[:, 1], -0.01 * k)
    assert rec.qd is None   # velocity arrays were empty


def test_rosbags_types_round_trip_through_cdr():
    from robot_ident.data.bag import make_typestore
    ts = make_typestore()
    T = ts.types
    m = joint_state_message(T["sensor_msgs/msg/JointState"], T["std_msgs/msg/Header"],
                            T["builtin_interfaces/msg/Time"], 1_700_000_000_123_456_789, ["a", "b"],
                            position=[0.5, -0.5], velocity=[1.0, 2.0])
    back = ts.deserialize_cdr(ts.serialize_cdr(m, "sensor_msgs/msg/JointState"), "sensor_msgs/msg/JointState")
    a = joint_state_arrays(back)
    assert a.stamp_ns == 1_700_000_000_123_456_789
    assert a.names == ("a", "b") and np.array_equal(a.position, [0.5, -0.5]) and a.effort.size == 0
    d = dynamic_joint_state_message(T["control_msgs/msg/DynamicJointState"], T["control_msgs/msg/InterfaceValue"],
                                    T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"], 42, ["a", "b"],
                                    {"position": [1.0, 2.0], "current": [0.1, 0.2]})
    back = ts.deserialize_cdr(ts.serialize_cdr(d, "control_msgs/msg/DynamicJointState"),
                              "control_msgs/msg/DynamicJointState")
    s, names, v = dynamic_joint_state_values(back, "current")
    assert s == 42 and names == ("a", "b") and np.array_equal(v, [0.1, 0.2])
