"""Issue 29 item 2: the combination of base parameters a motion cannot fix is named in
words with its cause -- the structure (no motion within the limits separates it: a URDF or
model matter) or the excitation (another design would)."""
import numpy as np
import pytest
from conftest import example_robot_urdf

from robot_ident.estimation.weak_directions import STRUCTURE_RATIO, from_regressor, motion_separation
from robot_ident.excitation import FourierTrajectory
from robot_ident.model.base import BaseParameters
from robot_ident.model.robot import RobotModel

JOINTS = [f"joint{i}" for i in range(1, 8)]


@pytest.fixture(scope="module")
def xarm_text():
    return example_robot_urdf("xarm_description", "xarm7.urdf").read_text()


def _regressor(m, b, only=None):
    tr = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                np.full(m.n, 8.0), seed=1)
    q, qd, qdd = tr.sample(np.linspace(0.0, tr.duration, 2000))
    if only is not None:                  # a poor excitation: the other joints held still
        still = np.setdiff1d(np.arange(m.n), only)
        q[:, still], qd[:, still], qdd[:, still] = 0.3, 0.0, 0.0
    return b.regressor(m.regressor(q, qd, qdd))


def test_an_angle_off_a_right_angle_is_named_as_the_structure(xarm_text):
    """The issue's case: rpy 3e-4 rad off pi/2 (too far to be taken as rounding) keeps
    joint2.Ia and joint2.Izz+... as two base parameters no motion separates."""
    m = RobotModel(xarm_text.replace("1.5708", "1.5705"), JOINTS)
    b = BaseParameters.from_model(m)
    assert b.size == 70
    weak = from_regressor(_regressor(m, b), m, b)
    assert weak["cause"] == "structure" and weak["separation"] < STRUCTURE_RATIO
    assert weak["parameters"][0] == "joint2.Ia" and weak["parameters"][1].startswith("joint2.Izz")
    assert "no motion within the joint limits separates them" in weak["advice"]


def test_a_poor_excitation_is_named_as_the_excitation(xarm_text):
    m = RobotModel(xarm_text, JOINTS)
    b = BaseParameters.from_model(m)
    weak = from_regressor(_regressor(m, b, only=[0, 1, 2]), m, b)
    assert weak["singular_value_ratio"] < 1e-10           # the wrists' parameters are not excited at all
    assert weak["cause"] == "excitation" and weak["separation"] > 0.1
    assert weak["parameters"][0].split(".")[0] in {"joint4", "joint5", "joint6", "joint7"}
    assert "another excitation would separate them" in weak["advice"]
    full = from_regressor(_regressor(m, b), m, b)          # a rich excitation: nothing near singular
    assert full["cause"] == "excitation" and full["singular_value_ratio"] > 1e-3


def test_the_separation_is_one_for_a_single_excited_parameter(xarm_text):
    m = RobotModel(xarm_text, JOINTS)
    b = BaseParameters.from_model(m)
    step = np.zeros(b.size)
    step[b.names.index("joint7.Ia")] = 1.0
    assert motion_separation(m, b, step) == pytest.approx(1.0)


def test_design_names_the_weakest_combination_and_its_cause(xarm_text):
    """`design` names, above cond 1e3, the combination its trajectory separates least and
    whether another design would help (before, a rank-deficient result blamed the family)."""
    from types import SimpleNamespace

    from robot_ident.cli.commands.design import weakest_line
    m = RobotModel(xarm_text.replace("1.5708", "1.5705"), JOINTS)
    tr = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                np.full(m.n, 8.0), seed=1)
    line = weakest_line(m, SimpleNamespace(trajectory=tr, cond=2.5e4, spec=SimpleNamespace(n_evaluation=1000)))
    assert line.startswith("note: cond 2.5e+04: this trajectory tells apart joint2.Ia and joint2.Izz")
    assert "no motion within the joint limits separates them" in line
    exact = RobotModel(xarm_text, JOINTS)
    line = weakest_line(exact, SimpleNamespace(trajectory=tr, cond=3e6, spec=SimpleNamespace(n_evaluation=1000)))
    assert line.startswith("warning: cond 3e+06") and "another excitation would separate them" in line
