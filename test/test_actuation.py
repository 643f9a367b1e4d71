import math

import numpy as np
import pytest

from robot_ident.model.actuation import Actuator, ActuatorSet
from robot_ident.errors import ConfigError
from robot_ident.data.signals import Recording


def test_rotary_formula_by_hand():
    a = Actuator("j1", "rotary", torque_constant=0.12, gear_ratio=100.0, efficiency=0.8,
                 direction=-1, current_offset=0.05)
    # tau = -1 * 0.8 * 100 * 0.12 * (2.05 - 0.05) = -19.2
    assert a.effort(2.05) == pytest.approx(-19.2)
    assert a.current(-19.2) == pytest.approx(2.05)


def test_screw_formula_by_hand():
    # A 0.3 N*m/A motor on a 10 mm/rev screw, 2:1 belt, 90 % efficient:
    # F = 0.9 * 2*pi * 2 * 0.3 * 1.5 A / 0.01 m = 508.94 N
    a = Actuator("q31", "screw", torque_constant=0.3, gear_ratio=2.0, lead=0.01, efficiency=0.9)
    assert a.effort(1.5) == pytest.approx(0.9 * 2 * math.pi * 2 * 0.3 * 1.5 / 0.01)
    assert a.effort(1.5) == pytest.approx(508.938, rel=1e-5)


def test_direct_is_identity_with_sign_and_offset():
    a = Actuator("j", "direct", direction=-1, current_offset=0.5)
    assert a.effort(2.5) == pytest.approx(-2.0)
    assert a.current(-2.0) == pytest.approx(2.5)


def _set():
    return ActuatorSet((
        Actuator("a", "rotary", torque_constant=0.12, gear_ratio=100.0, current_offset=0.02),
        Actuator("b", "screw", torque_constant=0.3, gear_ratio=1.0, lead=0.01, efficiency=0.9, direction=-1),
        Actuator("c", "direct"),
    ))


def test_vectorised_round_trip_and_columns_by_name():
    acts = _set()
    rng = np.random.default_rng(1)
    tau = rng.normal(size=(50, 3)) * [10.0, 300.0, 2.0]
    i = acts.currents(tau)
    assert np.allclose(acts.efforts(i), tau, rtol=1e-12, atol=1e-12)
    # each column matches the scalar formula of its own actuator
    for k, a in enumerate(acts):
        assert np.allclose(i[:, k], a.current(tau[:, k]))
    # the screw joint: current = F * lead / (2 pi k_t eff) * direction
    assert np.allclose(i[:, 1], -tau[:, 1] * 0.01 / (2 * math.pi * 0.3 * 0.9))
    # another column order is matched by name, not position
    i_rev = acts.currents(tau[:, ::-1], joints=["c", "b", "a"])
    assert np.allclose(i_rev, i[:, ::-1])


def test_apply_to_recording():
    acts = _set()
    t = np.arange(5) * 0.001
    cur = np.tile([1.0, 2.0, 3.0], (5, 1))
    rec = Recording(t, ("c", "a", "b"), np.zeros((5, 3)), cur[:, [2, 0, 1]])
    out = acts.apply(rec)
    assert np.allclose(out.effort[:, 0], 3.0)                      # c: direct
    assert np.allclose(out.effort[:, 1], 12.0 * (1.0 - 0.02))      # a
    assert np.allclose(out.effort[:, 2], -0.9 * 2 * math.pi * 0.3 * 2.0 / 0.01)
    assert out.meta["effort_from"] == "current"


@pytest.mark.parametrize("entry, field, fragment", [
    ({"type": "screw", "torque_constant": 0.3, "lead": 0.0}, "lead", "lead must be positive"),
    ({"type": "screw", "torque_constant": 0.3, "lead": -0.01}, "lead", "lead must be positive"),
    ({"type": "screw", "torque_constant": 0.3}, "lead", "needs 'lead'"),
    ({"type": "rotary", "torque_constant": 0.0}, "torque_constant", "torque_constant must be positive"),
    ({"type": "rotary", "torque_constant": -1.0}, "torque_constant", "torque_constant must be positive"),
    ({"type": "rotary"}, "torque_constant", "needs 'torque_constant'"),
    ({"type": "rotary", "torque_constant": 0.1, "gear_ratio": 0}, "gear_ratio", "gear_ratio must be positive"),
    ({"type": "linear", "torque_constant": 0.1}, "type", "unknown type 'linear'"),
    ({"torque_constant": 0.1}, "type", "'type' is missing"),
    ({"type": "rotary", "torque_constant": 0.1, "direction": 2}, "direction", "+1 or -1"),
    ({"type": "rotary", "torque_constant": 0.1, "efficiency": 1.2}, "efficiency", "(0, 1]"),
    ({"type": "rotary", "torque_constant": 0.1, "efficiency": 0.0}, "efficiency", "(0, 1]"),
    ({"type": "rotary", "torque_constant": 0.1, "lead": 0.01}, "lead", "does not apply to type 'rotary'"),
    ({"type": "rotary", "torque_constant": "0.1"}, "torque_constant", "must be a number"),
    ({"type": "rotary", "torque_const": 0.1}, "torque_const", "unexpected key"),
])
def test_config_errors_name_the_joint(entry, field, fragment):
    with pytest.raises(ConfigError) as exc:
        Actuator.from_dict("elbow", entry)
    assert "'elbow'" in str(exc.value)
    assert fragment in str(exc.value)
    assert exc.value.field == field


def test_missing_and_unknown_joint():
    with pytest.raises(ConfigError, match="joint 'b'.*no actuator given"):
        ActuatorSet.from_mapping(["a", "b"], {"a": {"type": "rotary", "torque_constant": 0.1}})
    with pytest.raises(ConfigError, match="joint 'x'.*no such identified joint"):
        ActuatorSet.from_mapping(["a"], {"a": {"type": "direct"}, "x": {"type": "direct"}})
    acts = ActuatorSet.from_mapping(["a", "b"], {"a": {"type": "rotary", "torque_constant": 0.1}},
                                    default_type="direct")
    assert [a.type for a in acts] == ["rotary", "direct"]
    with pytest.raises(ConfigError, match="joint 'z'"):
        acts.efforts(np.zeros((3, 2)), joints=["a", "z"])


def test_joint_kind_check():
    acts = _set()
    acts.check_joint_kinds({"a": False, "b": True, "c": True})
    with pytest.raises(ConfigError, match="joint 'b'.*revolute"):
        acts.check_joint_kinds({"a": False, "b": False})
    with pytest.raises(ConfigError, match="joint 'a'.*prismatic"):
        acts.check_joint_kinds({"a": True})


def test_shape_error():
    with pytest.raises(ValueError, match="3 columns"):
        _set().efforts(np.zeros((4, 2)))
