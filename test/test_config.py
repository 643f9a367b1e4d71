import math
import re
import textwrap
from pathlib import Path

import pytest

from robot_ident.errors import ConfigError
from robot_ident.io.config import config_from_parameters, load_config

ROOT = Path(__file__).resolve().parent.parent

EXAMPLE = """
robot_ident:
  ros__parameters:
    joints: [joint1, joint2]
    current_source: dynamic_joint_states   # or joint_states_effort, or effort
    current_interface: current
    actuators:
      joint1: {type: rotary, torque_constant: 0.12, gear_ratio: 100.0, efficiency: 1.0, direction: 1, current_offset: 0.0}
      joint2: {type: screw, torque_constant: 0.3, gear_ratio: 1.0, lead: 0.01, efficiency: 0.9, direction: 1, current_offset: 0.0}
    excitation: {harmonics: 5, base_frequency: 0.1, whatever: [1, 2]}
    identification: {method: wls}
"""


def write(tmp_path, text, name="cfg.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_example_parses_into_typed_objects(tmp_path):
    cfg = load_config(write(tmp_path, EXAMPLE))
    assert cfg.joints == ("joint1", "joint2")
    assert cfg.node_name == "robot_ident"
    assert cfg.current_source == "dynamic_joint_states" and cfg.current_interface == "current"
    assert cfg.current_topic == "/dynamic_joint_states" and cfg.joint_states_topic == "/joint_states"
    assert cfg.effort_field == "current" and cfg.current_kind == "dynamic_joint_state"
    a1, a2 = cfg.actuators
    assert (a1.type, a2.type) == ("rotary", "screw")
    assert a1.gain == pytest.approx(12.0)
    assert a2.gain == pytest.approx(0.9 * 2 * math.pi * 0.3 / 0.01)
    # other modules' sections pass through untouched, read-only
    assert cfg.section("excitation")["harmonics"] == 5
    assert cfg.section("identification")["method"] == "wls"
    assert cfg.section("absent") == {}
    with pytest.raises(TypeError):
        cfg.parameters["joints"] = ()
    assert cfg.sync.rate_hz is None and cfg.sync.max_gap_s is None


def test_wildcard_node_name_and_any_single_key(tmp_path):
    cfg = load_config(write(tmp_path, EXAMPLE.replace("robot_ident:", "/**:")))
    assert cfg.joints == ("joint1", "joint2")
    cfg = load_config(write(tmp_path, EXAMPLE.replace("robot_ident:", "my_identifier:")))
    assert cfg.node_name == "my_identifier"


def test_wildcard_merged_under_node_section(tmp_path):
    text = """
    /**:
      ros__parameters:
        joints: [a]
        current_source: effort
        sync: {rate_hz: 500.0}
    other_node:
      ros__parameters:
        use_sim_time: true
    identifier:
      ros__parameters:
        joints: [a, b]
        sync: {max_gap_s: 0.02}
    """
    cfg = load_config(write(tmp_path, text))          # the section listing joints is chosen
    assert cfg.node_name == "identifier" and cfg.joints == ("a", "b")
    assert cfg.current_source == "effort" and cfg.actuators.is_direct
    assert cfg.sync.rate_hz == 500.0 and cfg.sync.max_gap_s == 0.02
    assert load_config(write(tmp_path, text), node_name="other_node").joints == ("a",)
    with pytest.raises(ConfigError, match="no section for node 'nope'"):
        load_config(write(tmp_path, text), node_name="nope")


def test_dotted_parameters_from_a_node():
    params = {"joints": ["j"], "current_source": "joint_states_effort",
              "actuators.j.type": "rotary", "actuators.j.torque_constant": 0.2, "actuators.j.gear_ratio": 50.0}
    cfg = config_from_parameters(params)
    assert cfg.actuators["j"].gain == pytest.approx(10.0)
    assert cfg.current_topic == "/joint_states" and cfg.effort_field == "effort"


@pytest.mark.parametrize("old, new, key, fragment", [
    ("lead: 0.01", "lead: 0.0", "robot_ident.ros__parameters.actuators.joint2.lead", "lead must be positive"),
    ("lead: 0.01", "lead: -1", "robot_ident.ros__parameters.actuators.joint2.lead", "lead must be positive"),
    ("type: screw", "type: belt", "robot_ident.ros__parameters.actuators.joint2.type", "unknown type 'belt'"),
    ("torque_constant: 0.12", "torque_constant: 0", "robot_ident.ros__parameters.actuators.joint1.torque_constant",
     "torque_constant must be positive"),
    ("direction: 1, current_offset: 0.0}\n      joint2", "direction: 0, current_offset: 0.0}\n      joint2",
     "robot_ident.ros__parameters.actuators.joint1.direction", "+1 or -1"),
    ("efficiency: 0.9", "efficiency: 1.5", "robot_ident.ros__parameters.actuators.joint2.efficiency", "(0, 1]"),
    ("joints: [joint1, joint2]", "joints: [joint1, joint2, joint3]",
     "robot_ident.ros__parameters.actuators.joint3", "no actuator given"),
    ("joints: [joint1, joint2]", "joints: [joint1]",
     "robot_ident.ros__parameters.actuators.joint2", "no such identified joint"),
    ("joints: [joint1, joint2]", "joints: joint1", "robot_ident.ros__parameters.joints", "non-empty list"),
    ("joints: [joint1, joint2]", "joints: [joint1, joint1]", "robot_ident.ros__parameters.joints", "listed twice"),
    ("current_source: dynamic_joint_states", "current_source: torque",
     "robot_ident.ros__parameters.current_source", "must be one of"),
    ("current_source: dynamic_joint_states", "current_source: effort",
     "robot_ident.ros__parameters.actuators.joint1.type", "current_source is 'effort'"),
    ("current_interface: current", "current_interface: current\n    sync: {rate: 5}",
     "robot_ident.ros__parameters.sync.rate", "unknown key"),
    ("current_interface: current", "current_interface: current\n    sync: {rate_hz: -5}",
     "robot_ident.ros__parameters.sync.rate_hz", "must be a number >= 0"),
])
def test_errors_name_file_and_key(tmp_path, old, new, key, fragment):
    assert old in EXAMPLE
    p = write(tmp_path, EXAMPLE.replace(old, new))
    with pytest.raises(ConfigError) as exc:
        load_config(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: {key}: "), msg
    assert fragment in msg


def test_missing_actuators_and_joints(tmp_path):
    p = write(tmp_path, """
    robot_ident:
      ros__parameters:
        joints: [a]
    """)
    with pytest.raises(ConfigError, match=r"actuators: missing; current_source 'dynamic_joint_states' needs"):
        load_config(p)
    p = write(tmp_path, """
    robot_ident:
      ros__parameters:
        current_source: effort
    """)
    with pytest.raises(ConfigError, match=r"robot_ident.ros__parameters.joints: missing"):
        load_config(p)


def test_file_level_errors(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write(tmp_path, "robot_ident: [unclosed"))
    with pytest.raises(ConfigError, match="robot_ident: expected a 'ros__parameters' mapping"):
        load_config(write(tmp_path, "robot_ident: {joints: [a]}"))
    with pytest.raises(ConfigError, match="empty file"):
        load_config(write(tmp_path, ""))
    with pytest.raises(ConfigError, match="several node sections"):
        load_config(write(tmp_path, "a: {ros__parameters: {x: 1}}\nb: {ros__parameters: {y: 1}}\n"))


def test_a_misspelt_section_is_an_error_naming_the_likely_key(tmp_path):
    """Issue 29: `identifcation:` was silently ignored (defaults used)."""
    text = (ROOT / "config" / "demo_arm.yaml").read_text()
    assert "    identification:" in text
    bad = tmp_path / "typo.yaml"
    bad.write_text(text.replace("    identification:", "    identifcation:"))
    with pytest.raises(ConfigError, match=r"identifcation: unknown key; did you mean 'identification'\?"):
        load_config(bad)
    other = tmp_path / "other.yaml"          # a key of someone else's node is left alone
    other.write_text(text.replace("    identification:", "    my_vendor_gain: 3\n    identification:"))
    load_config(other)


def test_design_refuses_a_misspelt_excitation_section(tmp_path):
    """Issue 29: `design` reads only the excitation section, and a config whose section was
    spelt `excitaton:` was designed with every excitation default (start pose, limits) while
    the user's settings were silently ignored."""
    from robot_ident.excitation.config import load_excitation_config
    text = (ROOT / "config" / "demo_arm.yaml").read_text()
    assert "    excitation:" in text
    bad = tmp_path / "typo.yaml"
    bad.write_text(text.replace("    excitation:", "    excitaton:"))
    with pytest.raises(ConfigError, match=r"excitaton: unknown key; did you mean 'excitation'\?"):
        load_excitation_config(bad)
    other = tmp_path / "other.yaml"
    other.write_text(text.replace("    excitation:", "    my_vendor_gain: 3\n    excitation:"))
    assert load_excitation_config(other).joints


def test_the_node_parameter_list_names_every_parameter_the_nodes_declare():
    """io/config.NODE_PARAMETERS (for the typo check) and the generated reference
    (cli/node_parameters.py) against the nodes' declare(...) calls, read from their source
    with a regular expression (ROS is not needed): none missed, none stale."""
    import re

    from robot_ident.cli.node_parameters import node_parameters
    from robot_ident.io.config import NODE_PARAMETERS
    from robot_ident.monitor.observer import ObserverSettings
    from robot_ident.online.excitation_actions import GOAL_PARAMETERS, SETTING_PARAMETERS, ExcitationSettings
    declared, calls = set(), 0
    for f in (ROOT / "robot_ident" / "nodes").glob("*.py"):
        found = re.findall(r'declare\(\s*(?:self|node),\s*"([a-z_]+)"', f.read_text())
        declared |= set(found)
        calls += len(found) * (f.name.endswith("_node.py"))
    declared |= set(GOAL_PARAMETERS) | set(SETTING_PARAMETERS)      # declared in a loop by excitation_node
    assert declared | {"use_sim_time"} == set(NODE_PARAMETERS), sorted(declared ^ set(NODE_PARAMETERS))
    ref = node_parameters()
    assert {p.name for p in ref} == declared
    tables = set(GOAL_PARAMETERS) | set(SETTING_PARAMETERS)
    assert len([p for p in ref if not (p.node == "excitation_node" and p.name in tables)
                and p.name not in ("robot_description", "urdf_file")]) == calls
    by = {(p.node, p.name): p for p in ref}
    s = ObserverSettings()
    assert (by["monitor_node", "gain"].default, by["monitor_node", "threshold"].default) == (s.gain, s.threshold)
    assert by["excitation_node", "stop_time"].default == ExcitationSettings.stop_time
    assert (by["excitation_node", "stop_time"].low, by["excitation_node", "stop_time"].high) == SETTING_PARAMETERS[
        "stop_time"][1:]
    assert by["sim_arm_node", "control_rate"].default == 1000.0 and by["sim_arm_node", "urdf_file"].default == ""


@pytest.mark.parametrize("section, bad, message", [
    ("identification", {"filter": {"cutof_hz": 10}}, r"identification\.filter\.cutof_hz: unknown key; did you mean "
                                                      r"'cutoff_hz'"),
    ("simulation", {"joints": {"wrist_1": {"armture": 0.1}}}, r"simulation\.joints\.wrist_1\.armture: unknown key; "
                                                               r"did you mean 'armature'")])
def test_design_names_a_misspelt_key_in_a_section_it_does_not_read(tmp_path, capsys, section, bad, message):
    """Issue 29 item 4: `design` read only the excitation section, so a typo elsewhere
    surfaced only at `identify`, after the design and the recording."""
    import yaml

    from robot_ident.cli import main
    doc = yaml.safe_load((ROOT / "config" / "demo_arm.yaml").read_text())
    doc["robot_ident"]["ros__parameters"][section] = bad
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    assert main(["design", "--urdf", str(ROOT / "urdf" / "demo_arm.urdf"), "--config", str(cfg),
                 "--output", str(tmp_path / "t.yaml"), "--time-limit", "1"]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "t.yaml").exists()
