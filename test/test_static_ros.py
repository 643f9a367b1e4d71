"""Static checks of the ROS side that run without ROS: the xacro description, the launch
files, package.xml against the imports, setup.py's installed files and entry points,
and the rule that only robot_ident/nodes imports ROS."""
import ast
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "robot_ident"
NODES = sorted(p for p in (PKG / "nodes").glob("*_node.py"))
LAUNCH = sorted((ROOT / "launch").glob("*.launch.py"))
JOINTS = ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3")
# Python packages from PyPI (setup.py install_requires) and their import names: not ROS packages.
PYPI_IMPORTS = {"numpy", "scipy", "yaml", "matplotlib", "pinocchio", "mujoco", "rosbags", "pymoo", "SALib"}
ROS_MESSAGE_OR_CLIENT = {"rclpy", "rcl_interfaces", "builtin_interfaces", "rosgraph_msgs", "std_msgs", "std_srvs",
                         "sensor_msgs", "trajectory_msgs", "control_msgs", "diagnostic_msgs", "action_msgs",
                         "launch", "launch_ros", "launch_testing", "launch_testing_ros", "ament_index_python"}


def xacro_urdf(**mappings) -> str:
    xacro = pytest.importorskip("xacro")
    doc = xacro.process_file(str(ROOT / "urdf" / "demo_arm.urdf.xacro"),
                             mappings={k: str(v) for k, v in mappings.items()})
    return doc.toxml()


def test_the_gazebo_world_steps_finely_enough_for_the_urdf_friction():
    """Measured in Gazebo Fortress (DART) on the demo arm: the Coulomb friction the arm feels
    exceeds the URDF's by 0.5 s/rad x friction x step / inertia (the inertia the joint sees,
    the diagonal of the mass matrix): wrist_3 +73 % at 1 ms, +15 % at 0.2 ms, +3.8 % at 0.05
    ms, wrist_2 +14 %, +2.8 %, +0.7 % (config/gazebo_world.sdf). The launch file's world keeps
    that within 2 % on every joint of the Gazebo description, at any pose within the limits."""
    import pinocchio as pin
    world = ET.parse(ROOT / "config" / "gazebo_world.sdf").getroot()
    step = float(world.find("world/physics/max_step_size").text)
    launch = (ROOT / "launch" / "gazebo.launch.py").read_text()
    assert 'PathJoinSubstitution([share, "config", "gazebo_world.sdf"])' in launch
    xml = xacro_urdf(use_gazebo="true", gz_flavour="ign", controllers_file="/tmp/controllers.yaml")
    model = pin.buildModelFromXML(xml)
    data = model.createData()
    friction = {j.get("name"): float(j.find("dynamics").get("friction", 0.0))
                for j in ET.fromstring(xml).iter("joint") if j.find("dynamics") is not None}
    rng = np.random.default_rng(0)
    lightest = np.full(model.nv, np.inf)
    for _ in range(50):
        q = rng.uniform(model.lowerPositionLimit, model.upperPositionLimit)
        lightest = np.minimum(lightest, np.diag(pin.crba(model, data, q)))
    inertia = {name: lightest[model.joints[model.getJointId(name)].idx_v] for name in friction}
    excess = {name: 0.5 * friction[name] * step / inertia[name] for name in friction}
    assert max(excess.values()) <= 0.02, excess
    assert 0.5 * friction["wrist_3"] * 1e-3 / inertia["wrist_3"] > 0.5        # Gazebo's 1 ms default: 73 %


@pytest.mark.parametrize("gazebo", [False, True])
@pytest.mark.parametrize("flavour", ["gz", "ign"])
def test_xacro_expands_to_the_demo_arm(gazebo, flavour):
    import pinocchio as pin

    from robot_ident.model.robot import RobotModel
    xml = xacro_urdf(use_gazebo=str(gazebo).lower(), gz_flavour=flavour, controllers_file="/tmp/controllers.yaml")
    model = pin.buildModelFromXML(xml)
    assert [model.names[i] for i in range(1, model.njoints)] == list(JOINTS)
    from robot_ident.model.description import kinematic_urdf
    ref = RobotModel(ROOT / "urdf" / "demo_arm.urdf", JOINTS)
    got = RobotModel(kinematic_urdf(xml), JOINTS)      # what the nodes do with a robot_description
    assert got.layout.names == ref.layout.names
    np.testing.assert_array_equal(got.nominal, ref.nominal)        # inertials, friction: identical
    for a, b in zip(("lower", "upper", "velocity", "effort"), ("lower", "upper", "velocity", "effort")):
        np.testing.assert_array_equal(getattr(got.limits, a), getattr(ref.limits, b))
    root = ET.fromstring(xml)
    (rc,) = root.findall("ros2_control")
    plugin = rc.find("hardware/plugin").text.strip()
    joints = rc.findall("joint")
    assert [j.get("name") for j in joints] == list(JOINTS)
    for j in joints:
        states = [s.get("name") for s in j.findall("state_interface")]
        commands = [c.get("name") for c in j.findall("command_interface")]
        assert states[:3] == ["position", "velocity", "effort"]
        if gazebo:
            assert commands == ["effort"] and "current" not in states
        else:
            assert commands == ["position", "velocity"] and "current" in states
    links = {link.get("name") for link in root.findall("link")}
    if gazebo:
        assert plugin == ("ign_ros2_control/IgnitionSystem" if flavour == "ign" else "gz_ros2_control/GazeboSimSystem")
        assert "world" in links
        assert root.find("gazebo/plugin/parameters").text == "/tmp/controllers.yaml"
    else:
        assert plugin == "mock_components/GenericSystem" and "world" not in links
        assert root.find("gazebo") is None


def test_xacro_output_runs_in_the_simulator():
    """sim_arm_node may get the xacro output as robot_description: MuJoCo must take it."""
    from robot_ident.sim import JointTruth, SimulatedArm
    from robot_ident.model.description import kinematic_urdf
    arm = SimulatedArm(kinematic_urdf(xacro_urdf(use_gazebo="false")), JOINTS, JointTruth.zeros(6))
    assert arm.mj_model.njnt == 6


@pytest.mark.parametrize("controllers,xacro_args", [
    ("controllers_position.yaml", {}),                                                    # mock hardware
    ("controllers_position.yaml", {"use_mock_hardware": "false", "hardware_plugin": "arm/System"}),
    ("controllers_gazebo.yaml", {"use_gazebo": "true", "controllers_file": "/c.yaml"}),
    ("controllers_gazebo.yaml", {"use_gazebo": "true", "gz_flavour": "ign", "controllers_file": "/c.yaml"}),
])
def test_each_controllers_file_activates_on_its_description(controllers, xacro_args):
    """The controller_manager activates a trajectory controller only if every joint exports the
    command and state interfaces it claims (issue 30: the effort file on the position xacro
    failed with "Not acceptable command interfaces combination")."""
    import yaml
    doc = yaml.safe_load((ROOT / "config" / controllers).read_text())
    cm = doc["controller_manager"]["ros__parameters"]
    assert cm["joint_state_broadcaster"]["type"] == "joint_state_broadcaster/JointStateBroadcaster"
    assert cm["joint_trajectory_controller"]["type"] == "joint_trajectory_controller/JointTrajectoryController"
    jtc = doc["joint_trajectory_controller"]["ros__parameters"]
    assert tuple(jtc["joints"]) == JOINTS
    # the JTC's accepted command combinations (joint_trajectory_controller's check_command_interface_type)
    assert jtc["command_interfaces"] in (["position"], ["position", "velocity"],
                                         ["position", "velocity", "acceleration"], ["velocity"], ["effort"])
    root = ET.fromstring(xacro_urdf(**xacro_args))
    for j in JOINTS:
        (joint,) = [e for e in root.findall("ros2_control/joint") if e.get("name") == j]
        assert set(jtc["command_interfaces"]) <= {c.get("name") for c in joint.findall("command_interface")}, j
        assert set(jtc["state_interfaces"]) <= {c.get("name") for c in joint.findall("state_interface")}, j
    if jtc["command_interfaces"] == ["effort"]:
        assert set(jtc["gains"]) == set(JOINTS) and all(g["p"] > 0 and g["d"] > 0 for g in jtc["gains"].values())
    from robot_ident.io.config import load_config
    assert load_config(ROOT / "config" / "demo_arm.yaml").joints == JOINTS


def test_the_mock_hardware_starts_where_it_is_told():
    root = ET.fromstring(xacro_urdf(initial_positions="0.1 -0.5 0.8 0 0.5 -0.2"))
    assert root.find("ros2_control/hardware/plugin").text == "mock_components/GenericSystem"
    start = [float(e.find("state_interface[@name='position']/param").text) for e in root.findall("ros2_control/joint")]
    assert start == [0.1, -0.5, 0.8, 0.0, 0.5, -0.2]
    with pytest.raises(Exception, match="initial_positions: 2 values for 6 joints"):
        xacro_urdf(initial_positions="0 0")
    with pytest.raises(Exception, match="needs hardware_plugin"):
        xacro_urdf(use_mock_hardware="false")


def test_shipped_excitation_is_safe_for_the_node():
    """The trajectory sim.launch.py and gazebo.launch.py send by default passes the node's checks."""
    from robot_ident.online.excitation_plan import prepare_excitation
    from robot_ident.online.excitation_run import ExcitationRun, ExcitationSettings
    plan = prepare_excitation(ROOT / "urdf" / "demo_arm.urdf", ROOT / "config" / "demo_arm.yaml",
                              ROOT / "config" / "demo_arm_excitation.yaml")
    run = ExcitationRun(plan.trajectory, plan.limits, ExcitationSettings(repetitions=2), plan.model)
    assert run.report.valid and plan.trajectory.joint_names == JOINTS


@pytest.mark.parametrize("path", LAUNCH, ids=lambda p: p.name)
def test_launch_file_compiles_and_has_generate_launch_description(path):
    src = path.read_text()
    tree = ast.parse(src, str(path))
    compile(tree, str(path), "exec")
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    # the robot_ident executables a launch file starts exist as entry points
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Node":
            kw = {k.arg: k.value for k in node.keywords}
            if getattr(kw.get("package"), "value", None) == "robot_ident":
                assert kw["executable"].value in entry_points(), kw["executable"].value


def test_all_four_launch_files_exist():
    assert {p.name for p in LAUNCH} >= {"identify.launch.py", "replay.launch.py", "sim.launch.py",
                                        "gazebo.launch.py"}


def _imports(path: Path) -> set[str]:
    out = set()
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(n, ast.Import):
            out.update(a.name.split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            out.add(n.module.split(".")[0])
    return out


def _launch_packages(path: Path) -> set[str]:
    """Packages a launch file uses by name: Node(package=...), FindPackageShare(...), executables."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(n, ast.Call):
            continue
        name = getattr(n.func, "id", getattr(n.func, "attr", None))
        kw = {k.arg: k.value for k in n.keywords}
        if name == "Node" and isinstance(kw.get("package"), ast.Constant):
            out.add(kw["package"].value)
        if name == "FindPackageShare" and n.args and isinstance(n.args[0], ast.Constant):
            out.add(n.args[0].value)
        if name == "FindExecutable" and isinstance(kw.get("name"), ast.Constant):
            out.add(kw["name"].value)
        if name == "ExecuteProcess" and isinstance(kw.get("cmd"), ast.List):
            words = [e.value for e in kw["cmd"].elts if isinstance(e, ast.Constant)]
            if words[:2] == ["ros2", "bag"]:
                out.add("ros2bag")
            elif words[:2] == ["ros2", "service"]:
                out.add("ros2service")
    return out - {"robot_ident"}


def package_xml_depends() -> set[str]:
    root = ET.parse(ROOT / "package.xml").getroot()
    return {e.text.strip() for e in root if e.tag in ("depend", "exec_depend", "build_depend", "test_depend")}


def test_package_xml_lists_every_ros_package_used():
    deps = package_xml_depends()
    stdlib = set(sys.stdlib_module_names)
    used = {}
    for path in sorted((PKG / "nodes").glob("*.py")) + LAUNCH:
        for mod in _imports(path):
            if mod in stdlib or mod in PYPI_IMPORTS or mod == "robot_ident":
                continue
            used.setdefault(mod, path.name)
        for pkg in _launch_packages(path):
            used.setdefault(pkg, path.name)
    for test in sorted((ROOT / "test").glob("test_launch_*.py")) + sorted((ROOT / "test").glob("test_nodes_*.py")):
        for mod in _imports(test):
            if mod in ROS_MESSAGE_OR_CLIENT:
                used.setdefault(mod, test.name)
    assert "rclpy" in used and "launch_ros" in used and "control_msgs" in used
    missing = {m: f for m, f in used.items() if m not in deps}
    assert not missing, f"package.xml lacks: {missing}"


def test_package_xml_names_the_gazebo_plugin_of_each_distro():
    """Humble + Fortress ships the ros2_control plugin as ign_ros2_control, Jazzy + Harmonic as
    gz_ros2_control: each conditioned on $ROS_DISTRO (REP 149), so rosdep resolves on both."""
    root = ET.parse(ROOT / "package.xml").getroot()
    cond = {e.text.strip(): e.get("condition") for e in root if e.tag == "exec_depend"}
    assert cond["ign_ros2_control"] == "$ROS_DISTRO == humble"
    assert cond["gz_ros2_control"] == "$ROS_DISTRO != humble"
    assert root.get("format") == "3"            # conditions need format 3


def test_only_nodes_import_ros():
    for path in PKG.rglob("*.py"):
        if (PKG / "nodes") in path.parents:
            continue
        # resources.py may use ament_index_python (guarded) to find the installed share folder
        bad = _imports(path) & (ROS_MESSAGE_OR_CLIENT - {"ament_index_python"})
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
    # and the command line (and every logic module) imports without rclpy
    code = ("import sys, robot_ident.cli, robot_ident.online.excitation_run, robot_ident.online.identification_window, "
            "robot_ident.online.torque_stream, robot_ident.online.msg_build, robot_ident.sim.stepper, robot_ident.nodes; "
            "assert not {m for m in sys.modules if m.split('.')[0] in ('rclpy', 'launch', 'launch_ros')}")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("path", NODES, ids=lambda p: p.name)
def test_node_files_are_thin_shells(path):
    tree = ast.parse(path.read_text(), str(path))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)
               and any(getattr(b, "id", None) == "Node" for b in n.bases)]
    assert len(classes) == 1, "one Node subclass per file"
    (main,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    assert [a.arg for a in main.args.args] == ["args"] and isinstance(main.args.defaults[0], ast.Constant)
    # main delegates to run_node (ros2/demos' init / spin / Ctrl-C / destroy / shutdown) ...
    (call,) = [n for n in ast.walk(main) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "run_node"]
    assert call.args[0].id == classes[0].name
    assert len(path.read_text().splitlines()) < 320


def test_run_node_spins_and_always_shuts_down():
    tree = ast.parse((ROOT / "robot_ident" / "nodes" / "_common.py").read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_node"]
    body = ast.dump(fn)
    # ... which handles SIGINT/SIGTERM itself (rclpy's handlers would shut the context down
    # before the node could stop the arm), stops first and always destroys and shuts down.
    assert "install_signal_handlers" in body and "run_until_stopped" in body and "safe_stop" in body
    assert "ExternalShutdownException" in body
    (init,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_init"]
    assert "SignalHandlerOptions" in ast.dump(init) and "NO" in ast.dump(init)
    (final,) = [n for n in ast.walk(fn) if isinstance(n, ast.Try) and n.finalbody]
    final_body = ast.dump(ast.Module(body=final.finalbody, type_ignores=[]))
    assert "destroy_node" in final_body and "shutdown" in final_body


def _setup_kwargs() -> dict:
    import runpy
    import setuptools
    captured = {}
    with mock.patch.object(setuptools, "setup", lambda **kw: captured.update(kw)):
        old = Path.cwd()
        import os
        os.chdir(ROOT)
        try:
            runpy.run_path(str(ROOT / "setup.py"), run_name="__main__")
        finally:
            os.chdir(old)
    return captured


def entry_points() -> dict:
    eps = {}
    for line in _setup_kwargs()["entry_points"]["console_scripts"]:
        name, _, target = (s.strip() for s in line.partition("="))
        eps[name] = target
    return eps


def test_setup_installs_launch_urdf_and_config_files():
    data = dict(_setup_kwargs()["data_files"])
    for folder in ("launch", "urdf", "config"):
        installed = {Path(f).name for f in data[f"share/robot_ident/{folder}"]}
        on_disk = {p.name for p in (ROOT / folder).iterdir() if p.is_file()}
        assert on_disk <= installed, (folder, on_disk - installed)
    assert {"sim.launch.py", "gazebo.launch.py", "identify.launch.py", "replay.launch.py"} <= {
        Path(f).name for f in data["share/robot_ident/launch"]}
    assert "demo_arm.urdf.xacro" in {Path(f).name for f in data["share/robot_ident/urdf"]}
    assert {"controllers_position.yaml", "controllers_gazebo.yaml", "demo_arm.yaml", "demo_arm_excitation.yaml"} <= {
        Path(f).name for f in data["share/robot_ident/config"]}


def test_entry_points_name_each_node_main():
    eps = entry_points()
    assert eps["robot-ident"] == "robot_ident.cli:run"
    for path in NODES:
        assert eps[path.stem] == f"robot_ident.nodes.{path.stem}:main"
    # console scripts land in lib/robot_ident, where `ros2 run` looks
    assert re.search(r"install_scripts\s*=\s*\$base/lib/robot_ident", (ROOT / "setup.cfg").read_text())


def test_kinematic_urdf_drops_control_blocks_only():
    from robot_ident.model.description import description_or_path, kinematic_urdf
    from robot_ident.errors import ModelError
    plain = (ROOT / "urdf" / "demo_arm.urdf").read_text()
    assert kinematic_urdf(plain) is plain
    xml = kinematic_urdf(xacro_urdf(use_gazebo="true", controllers_file="/c.yaml"))
    root = ET.fromstring(xml)
    assert root.find("ros2_control") is None and root.find("gazebo") is None
    assert len(root.findall("joint")) == 8 and len(root.findall("link")) == 9     # + world and its joint
    assert description_or_path(str(ROOT / "urdf" / "demo_arm.urdf")) == plain
    with pytest.raises(ModelError, match="not valid XML"):
        kinematic_urdf("<robot>")


def test_gazebo_gains_are_stable_on_the_light_wrists():
    """A PD held for each 1 ms cycle diverges when d h / M_eff > 2 (M_eff = 1 / (M^-1)_jj, the
    inertia a joint sees with the others free); the former wrist gains were 5-15x past it.
    Kept with a margin of 4 (and p h^2 / M_eff <= 0.1) along the shipped excitation."""
    import pinocchio as pin
    import yaml

    from robot_ident.online.excitation_plan import prepare_excitation
    plan = prepare_excitation(ROOT / "urdf" / "demo_arm.urdf", ROOT / "config" / "demo_arm.yaml",
                              ROOT / "config" / "demo_arm_excitation.yaml")
    nm, traj = plan.model, plan.trajectory
    q = traj.sample(np.linspace(0.0, float(traj.duration), 200))[0]
    meff = np.array([1.0 / np.diag(np.linalg.inv(pin.crba(nm.model, nm.data, nm.to_pinocchio_q(x))[
        np.ix_(nm._idx_v, nm._idx_v)])) for x in q]).min(axis=0)
    doc = yaml.safe_load((ROOT / "config" / "controllers_gazebo.yaml").read_text())
    h = 1.0 / doc["controller_manager"]["ros__parameters"]["update_rate"]
    gains = doc["joint_trajectory_controller"]["ros__parameters"]["gains"]
    for k, j in enumerate(traj.joint_names):
        assert gains[j]["d"] * h / meff[k] <= 0.5, (j, gains[j], meff[k])
        assert gains[j]["p"] * h ** 2 / meff[k] <= 0.1, (j, gains[j], meff[k])
