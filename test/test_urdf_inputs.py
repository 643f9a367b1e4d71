"""Issue 29 item 3, URDFs as vendors ship them: `identify --package-dir` finds package://
meshes for the physical bounds (without it, the fallback to spheres is a warning line naming
the mesh and the places searched), and `--xacro-arg NAME:=VALUE` expands a xacro with that
argument on every command that takes --urdf."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import yaml

from robot_ident.cli import main
from robot_ident.data.signals import Recording
from robot_ident.data.table import write_table
from robot_ident.errors import ConfigError
from robot_ident.model.robot import RobotModel
from robot_ident.model.urdf_text import urdf_source

JOINTS = ("joint1", "joint2")
MESH = "package://tiny_arm/meshes/box.stl"

XACRO = """<?xml version="1.0"?>
<robot name="tiny_arm" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:arg name="len" default="0.3"/>
  <xacro:property name="link_length" value="$(arg len)"/>
  <link name="base_link"/>
  <joint name="joint1" type="revolute">
    <parent link="base_link"/><child link="link1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="50" velocity="3"/>
  </joint>
  <link name="link1">
    <inertial><origin xyz="0.02 0.01 ${link_length/2}"/><mass value="2.0"/>
      <inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.004"/></inertial>
    <collision><origin xyz="0 0 0.15"/><geometry><mesh filename="MESH"/></geometry></collision>
  </link>
  <joint name="joint2" type="revolute">
    <parent link="link1"/><child link="link2"/><origin xyz="0 0 ${link_length}"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="30" velocity="3"/>
  </joint>
  <link name="link2">
    <inertial><origin xyz="0.15 0.01 0.02"/><mass value="1.0"/>
      <inertia ixx="0.002" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
    <collision><origin xyz="0.15 0 0" rpy="0 1.5707963267948966 0"/><geometry><mesh filename="MESH"/></geometry>
    </collision>
  </link>
</robot>
""".replace("MESH", MESH)


def box_stl(hx=0.05, hy=0.05, hz=0.15) -> str:
    """An ASCII STL of a box centred on the origin (12 triangles)."""
    corners = np.array(list(itertools.product((-hx, hx), (-hy, hy), (-hz, hz))))
    faces = []
    for axis in range(3):
        for sign in (-1, 1):
            quad = [c for c in corners if np.sign(c[axis]) == sign]
            a, b, c, d = quad[0], quad[1], quad[3], quad[2]          # a cycle around the face
            n = np.zeros(3)
            n[axis] = sign
            for tri in ((a, b, c), (a, c, d)):
                if np.dot(np.cross(tri[1] - tri[0], tri[2] - tri[0]), n) < 0:
                    tri = (tri[0], tri[2], tri[1])
                faces.append((n, tri))
    lines = ["solid box"]
    for n, tri in faces:
        lines += [f"facet normal {n[0]:g} {n[1]:g} {n[2]:g}", "outer loop"]
        lines += [f"vertex {v[0]:g} {v[1]:g} {v[2]:g}" for v in tri] + ["endloop", "endfacet"]
    return "\n".join(lines + ["endsolid box"]) + "\n"


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """The tiny arm's xacro in <tmp>/robot (away from its meshes), its package under
    <tmp>/packages/tiny_arm, and a config."""
    monkeypatch.delenv("ROS_PACKAGE_PATH", raising=False)
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    (tmp_path / "robot").mkdir()
    xacro = tmp_path / "robot" / "tiny_arm.urdf.xacro"
    xacro.write_text(XACRO)
    mesh = tmp_path / "packages" / "tiny_arm" / "meshes" / "box.stl"
    mesh.parent.mkdir(parents=True)
    mesh.write_text(box_stl())
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"robot_ident": {"ros__parameters": {
        "joints": list(JOINTS), "current_source": "effort",
        "identification": {"method": "physical", "filter": {"cutoff_hz": 10.0}}}}}))
    return xacro, tmp_path / "packages", cfg


def table(path, model, duration=20.0, rate=200.0, seed=0):
    t = np.arange(int(duration * rate)) / rate
    rng = np.random.default_rng(seed)
    q, qd, qdd = (np.zeros((t.size, model.n)) for _ in range(3))
    for k in range(model.n):
        for h, amp in ((1, 0.8), (2, 0.4), (3, 0.25), (5, 0.12)):
            w, ph = 2 * np.pi * 0.1 * h, rng.uniform(0, 2 * np.pi)
            q[:, k] += amp * np.sin(w * t + ph)
            qd[:, k] += amp * w * np.cos(w * t + ph)
            qdd[:, k] -= amp * w * w * np.sin(w * t + ph)
    tau = model.efforts(q, qd, qdd)
    tau += 0.01 * tau.std(axis=0) * rng.normal(size=tau.shape)
    return write_table(path, Recording(t, model.joint_names, q, tau))


def test_a_xacro_argument_gives_the_other_length(tiny):
    xacro, _, _ = tiny
    z = {}
    for args in ((), ("len:=0.5",)):
        m = RobotModel(urdf_source(xacro, args), JOINTS)
        z[args] = m.model.jointPlacements[m.model.getJointId("joint2")].translation[2]
    assert z[()] == pytest.approx(0.3) and z[("len:=0.5",)] == pytest.approx(0.5)


def test_a_bad_xacro_argument_is_a_one_line_error(tiny, tmp_path, capsys):
    xacro, _, cfg = tiny
    for args, words in ((["--xacro-arg", "len=0.5"], "--xacro-arg 'len=0.5': expected NAME:=VALUE"),
                        (["--xacro-arg", "lenght:=0.5"], "--xacro-arg lenght: not an argument of"),
                        (["--xacro-arg", ":=0.5"], "expected NAME:=VALUE")):
        assert main(["init", "--urdf", str(xacro), "--output", str(tmp_path / "i.yaml"), *args]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
    with pytest.raises(ConfigError, match="is not a xacro file"):
        plain = tmp_path / "plain.urdf"
        plain.write_text(RobotModel(xacro).urdf_xml)
        RobotModel(urdf_source(plain, ["len:=0.5"]))
    # every command that takes --urdf takes it
    for command in ("init", "design", "simulate", "identify", "validate", "monitor"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--xacro-arg NAME:=VALUE" in capsys.readouterr().out, command


def test_init_expands_the_xacro_with_its_arguments(tiny, tmp_path, capsys):
    xacro, _, _ = tiny
    assert main(["init", "--urdf", str(xacro), "--xacro-arg", "len:=0.5", "--output", str(tmp_path / "i.yaml")]) == 0
    assert "joint1" in (tmp_path / "i.yaml").read_text()


def test_identify_finds_the_meshes_through_package_dir(tiny, tmp_path, capsys):
    """Without --package-dir the physical bounds fall back to kinematic spheres, said in a
    warning line naming the mesh and the places searched; with it they are the meshes' boxes.
    The xacro is expanded with --xacro-arg (the data are those of the 0.5 m arm)."""
    xacro, packages, cfg = tiny
    model = RobotModel(urdf_source(xacro, ["len:=0.5"]), JOINTS)
    data = table(tmp_path / "data.npz", model)
    common = ["identify", "--table", str(data), "--urdf", str(xacro), "--xacro-arg", "len:=0.5",
              "--config", str(cfg), "--no-plots", "--quiet"]

    assert main(common + ["--output", str(tmp_path / "spheres")]) == 0
    err = capsys.readouterr().err
    warning = [ln for ln in err.splitlines() if "kinematic spheres" in ln]
    assert warning and warning[0].startswith("warning: ")
    assert f"mesh '{MESH}' of link 'link1' not found; searched folders given (none)" in warning[0]
    assert "the URDF's folder and those above it" in warning[0] and "ROS_PACKAGE_PATH (none)" in warning[0]
    assert "--package-dir" in warning[0]
    doc = yaml.safe_load((tmp_path / "spheres" / "result.yaml").read_text())
    assert {b["com_region"]["source"] for b in doc["standard_parameters"]["bodies"].values()} == {"kinematics"}

    assert main(common + ["--package-dir", str(packages), "--output", str(tmp_path / "boxes")]) == 0
    assert "kinematic spheres" not in capsys.readouterr().err
    doc = yaml.safe_load((tmp_path / "boxes" / "result.yaml").read_text())
    regions = {j: b["com_region"] for j, b in doc["standard_parameters"]["bodies"].items()}
    assert {r["kind"] for r in regions.values()} == {"box"} and {r["source"] for r in regions.values()} == {"collision"}
    assert "sphere" not in yaml.safe_dump(doc.get("settings", {})) + yaml.safe_dump(doc.get("model_quality", {}))
    # the link1 box: the 0.1 x 0.1 x 0.3 m mesh padded by geometry_margin (0.02 m)
    np.testing.assert_allclose(regions["joint1"]["half_extent"], [0.07, 0.07, 0.17], atol=1e-6)
    # the identified model is the 0.5 m arm the xacro argument asked for
    ident = RobotModel(tmp_path / "boxes" / "model.urdf", JOINTS)
    assert ident.model.jointPlacements[ident.model.getJointId("joint2")].translation[2] == pytest.approx(0.5)
