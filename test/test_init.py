"""`robot-ident init --urdf ARM.urdf`: a commented parameter file identify accepts for that
URDF, placeholders that refuse to convert currents until filled in, and no user file replaced
without --force."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from robot_ident.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "urdf" / "demo_arm.urdf"
UR5 = Path(sys.prefix).glob("lib/python3*/site-packages/cmeel.prefix/share/example-robot-data/robots/"
                            "ur_description/urdf/ur5_robot.urdf")
URDFS = [DEMO] + sorted(UR5)[:1]


def _identify_reads(cfg_path, urdf):
    """What `robot-ident identify` does with --config and --urdf before reading recordings."""
    from robot_ident.estimation.auto_cutoff import strip_auto_cutoff
    from robot_ident.estimation.pipeline import identification_config
    from robot_ident.io.config import load_config
    from robot_ident.io.model_loading import load_model
    cfg = load_config(cfg_path)
    icfg = identification_config(strip_auto_cutoff(cfg.section("identification"))[0])
    return cfg, load_model(str(urdf), cfg, icfg)


@pytest.mark.parametrize("urdf", URDFS, ids=lambda p: p.name)
def test_the_file_is_what_identify_accepts_for_the_urdf(tmp_path, urdf, capsys):
    from robot_ident.model.robot import RobotModel
    out = tmp_path / "arm.yaml"
    assert main(["init", "--urdf", str(urdf), "--output", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    cfg, model = _identify_reads(out, urdf)
    assert cfg.joints == RobotModel(str(urdf)).joint_names == model.joint_names
    assert cfg.current_source == "effort" and cfg.actuators.is_direct
    assert set(cfg.parameters) == {"joints", "current_source"}       # every other key is commented out
    text = out.read_text()
    for j in cfg.joints:                                             # each joint's limits, as a comment
        assert re.search(rf"^    #   {j}: (revolute|prismatic), position .*effort", text, re.M), j
    for section in ("sync", "identification", "excitation", "simulation", "payload", "springs", "transmissions"):
        assert f"\n    # {section}:" in text, section


def test_the_actuator_placeholders_refuse_to_convert_currents_until_filled_in(tmp_path):
    from robot_ident.errors import ConfigError
    from robot_ident.io.config import load_config
    out = tmp_path / "arm.yaml"
    assert main(["init", "--urdf", str(DEMO), "--output", str(out)]) == 0
    lines = out.read_text().splitlines()
    start = lines.index(next(line for line in lines if line.startswith("    # actuators:")))
    end = lines.index("", start)
    for k in range(start, end):                                      # uncomment the actuators, unedited
        lines[k] = "    " + lines[k][len("    # "):]
    text = "\n".join(lines).replace("current_source: effort", "current_source: joint_states_effort")
    edited = tmp_path / "currents.yaml"
    edited.write_text(text)
    with pytest.raises(ConfigError, match=r"actuators\.shoulder_pan\.torque_constant: .*must be a number, got None"):
        load_config(edited)
    edited.write_text(text.replace("torque_constant: null", "torque_constant: 0.1"))
    with pytest.raises(ConfigError, match=r"actuators\.shoulder_pan\.gear_ratio: .*must be a number, got None"):
        load_config(edited)
    edited.write_text(text.replace("torque_constant: null", "torque_constant: 0.1").replace(
        "gear_ratio: null", "gear_ratio: 100.0"))
    assert load_config(edited).actuators["elbow"].gain == pytest.approx(10.0)


def test_an_existing_file_is_replaced_only_with_force(tmp_path, capsys):
    out = tmp_path / "arm.yaml"
    out.write_text("mine\n")
    assert main(["init", "--urdf", str(DEMO), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert out.read_text() == "mine\n" and f"{out} exists" in err and "--force" in err
    assert main(["init", "--urdf", str(DEMO), "--output", str(out), "--force"]) == 0
    assert out.read_text().startswith("# robot_ident parameters for robot")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arm.yaml", "arm.yaml.bak"]   # no temporary file left
    assert (tmp_path / "arm.yaml.bak").read_text() == "mine\n"                # the replaced file kept


@pytest.mark.parametrize("urdf,fragment", [
    ("missing.urdf", "--urdf: {dir}/missing.urdf not found"),
    ("bad.urdf", "URDF {dir}/bad.urdf is not valid XML"),
])
def test_a_missing_or_invalid_urdf_is_one_line_naming_the_file(tmp_path, capsys, urdf, fragment):
    (tmp_path / "bad.urdf").write_text("<robot name='x'>")
    out = tmp_path / "arm.yaml"
    assert main(["init", "--urdf", str(tmp_path / urdf), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment.format(dir=tmp_path) in err, err
    assert not out.exists()


def test_an_output_folder_that_does_not_exist_is_named(tmp_path, capsys):
    assert main(["init", "--urdf", str(DEMO), "--output", str(tmp_path / "nope" / "a.yaml")]) == 2
    assert f"folder {tmp_path / 'nope'} not found" in capsys.readouterr().err



def test_mimic_joints_and_their_leaders_are_left_out_and_named(tmp_path, panda_urdf, capsys):
    out = tmp_path / "panda.yaml"
    assert main(["init", "--urdf", str(panda_urdf), "--output", str(out)]) == 0
    cfg, model = _identify_reads(out, panda_urdf)
    assert cfg.joints == model.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    assert "panda_finger_joint2 mimics panda_finger_joint1" in out.read_text()
