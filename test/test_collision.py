"""Excitation that cannot hurt the robot: collision model, pair filtering, constraints in the
design, and the re-checks where a trajectory is used (simulate, the excitation node).

The designed trajectories are verified by an independent dense check written here:
the floor clearance from the URDF's own mesh vertices (numpy, no coal), the self
distances from coal's mesh-to-mesh (BVH) distance on the original meshes, not the
convex hulls the designer uses."""
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from conftest import PANDA_ARM, example_robot_urdf
from robot_ident.errors import ConfigError, ModelError, TrajectoryError
from robot_ident.excitation.collision import CollisionModel, CollisionSpec, check_collisions, parse_collision_section
from robot_ident.excitation.collision.spec import BoxSpec
from robot_ident.excitation.constraints import LimitSpec
from robot_ident.excitation.designer import DesignSpec, design_excitation
from robot_ident.excitation.families import JointMovesTrajectory
from robot_ident.excitation.trajectory_file import TrajectoryFile, load_trajectory, save_trajectory
from robot_ident.model.robot import RobotModel

ROOT = Path(__file__).resolve().parent.parent
UR5_ACC = [5.0, 5.0, 6.0, 8.0, 8.0, 8.0]
UR5_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint")
# A pose of the UR5 whose wrist is inside its base (found by sampling; checked below).
THROUGH_BASE = np.array([0.0, -0.07, 2.71, 0.22, 2.1, -2.67])


def share_dir() -> Path:
    return example_robot_urdf("ur_description", "ur5_robot.urdf").parents[4]


@pytest.fixture(scope="module")
def ur5_urdf():
    return example_robot_urdf("ur_description", "ur5_robot.urdf")


@pytest.fixture(scope="module")
def ur5(ur5_urdf):
    return RobotModel(ur5_urdf)


@pytest.fixture(scope="module")
def ur5_cm(ur5):
    return CollisionModel(ur5, CollisionSpec(package_dirs=(str(share_dir()),)))


# ------------------------------------------------------------- independent dense check
def independent_check(urdf, joints, traj, pair_links, floor=0.0, dt_floor=1e-3, dt_self=0.04):
    """({geometry: min floor clearance of its mesh vertices}, min mesh-mesh distance over `pair_links`)
    along traj."""
    full = pin.buildModelFromUrdf(str(urdf))
    gm = pin.buildGeomFromUrdf(full, str(urdf), pin.COLLISION, package_dirs=[str(share_dir())])
    data = full.createData()
    link = [full.frames[g.parentFrame].name for g in gm.geometryObjects]
    for i in range(len(link)):
        for j in range(i + 1, len(link)):
            if frozenset((link[i], link[j])) in pair_links:
                gm.addCollisionPair(pin.CollisionPair(i, j))
    gd = pin.GeometryData(gm)
    idx_q = [full.joints[full.getJointId(j)].idx_q for j in joints]
    moving = [k for k, g in enumerate(gm.geometryObjects) if g.parentJoint != 0]
    verts = {k: np.asarray(gm.geometryObjects[k].geometry.vertices()) if hasattr(
        gm.geometryObjects[k].geometry, "vertices") else None for k in moving}

    def qfull(q):
        x = pin.neutral(full)
        x[idx_q] = q
        return x

    T = float(traj.duration)
    Q = traj.sample(np.linspace(0, T, int(np.ceil(T / dt_floor)) + 1))[0]
    R = {k: np.empty((len(Q), 3, 3)) for k in moving}
    p = {k: np.empty((len(Q), 3)) for k in moving}
    for s, q in enumerate(Q):
        pin.framesForwardKinematics(full, data, qfull(q))
        pin.updateGeometryPlacements(full, data, gm, gd)
        for k in moving:
            R[k][s], p[k][s] = gd.oMg[k].rotation, gd.oMg[k].translation
    low = {}
    for k in moving:
        if verts[k] is None:     # a box (the UR5's ee_link): its 8 corners
            h = np.asarray(gm.geometryObjects[k].geometry.halfSide)
            verts[k] = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * h
        z = np.einsum("vj,sj->sv", verts[k], R[k][:, 2, :]) + p[k][:, 2:3]     # z of every vertex
        name = link[k]
        low[name] = min(low.get(name, np.inf), float(z.min()) - floor)
    self_min = np.inf
    if gm.collisionPairs:
        for q in traj.sample(np.linspace(0, T, int(np.ceil(T / dt_self)) + 1))[0]:
            pin.computeDistances(full, data, gm, gd, qfull(q))
            self_min = min(self_min, min(r.min_distance for r in gd.distanceResults))
    return low, self_min


def floor_ok(cm, low):
    """Every geometry's independent floor clearance >= its floor pair's margin (3 cm, or the
    reduced margin of a structurally close link); returns the overall minimum."""
    margins = {link: m for p, m in zip(cm.pairs, cm.margins) if p.second == "floor" for link in p.first.split("+")}
    for name, z in low.items():
        assert z >= margins.get(name, cm.margin) - 1e-6, (name, z)
    return min(low.values())


def self_pair_links(cm):
    """Link pairs behind the checked body pairs (a body geometry is named link+link+...)."""
    return {frozenset((a, b)) for p in cm.pairs if p.kind == "self"
            for a in p.first.split("+") for b in p.second.split("+")}


# ------------------------------------------------------------------ model and filtering
def test_pairs_skip_same_and_adjacent_bodies_and_keep_base_against_forearm(ur5_cm):
    labels = {p.label for p in ur5_cm.pairs}
    assert "base_link - forearm_link" in labels and "base_link - wrist_1_link" in labels
    # hulls of the base and the upper arm are 1.4 cm apart at the zero pose: skipped, listed
    assert ("base_link", "upper_arm_link") in {p[:2] for p in ur5_cm.skipped_neutral}
    assert "base_link - shoulder_link" not in labels          # adjacent
    # one hull per body: wrist 3 and the tool box (ee_link) are one geometry
    assert "wrist_3_link+ee_link" in {p.first for p in ur5_cm.pairs} | {p.second for p in ur5_cm.pairs}
    assert "forearm_link - floor" in labels and "base_link - floor" not in labels
    # UR5's upper arm turns about an axis 8.9 cm above its base plane: its margin is reduced, listed
    assert [p[:2] for p in ur5_cm.reduced_margin] == [("shoulder_link", "floor"), ("upper_arm_link", "floor")]
    assert "upper_arm_link - floor" in ur5_cm.describe()


def test_distance_gradient_matches_finite_differences(demo_urdf):
    r = RobotModel(demo_urdf)
    cm = CollisionModel(r)
    q = np.array([0.3, 0.8, 1.1, -0.7, 0.4, 0.2])
    D, J = cm.distances_and_jacobians(q[None])
    e = 1e-5     # curved primitives: distances are exact to the GJK tolerance (1e-9 m) only
    fd = np.array([(cm.distances((q + e * np.eye(6)[k])[None])[0] - cm.distances((q - e * np.eye(6)[k])[None])[0])
                   / (2 * e) for k in range(6)]).T
    np.testing.assert_allclose(J[0], fd, atol=1e-3)
    assert np.abs(fd).max() > 0.1


def test_srdf_disable_collisions_removes_exactly_those_pairs(panda_urdf, tmp_path):
    r = RobotModel(panda_urdf, PANDA_ARM)
    base = CollisionModel(r, CollisionSpec(package_dirs=(str(share_dir()),)))
    srdf = tmp_path / "arm.srdf"
    srdf.write_text('<robot name="panda"><disable_collisions link1="panda_link1" link2="panda_link5" '
                    'reason="Never"/><disable_collisions link1="panda_link7" link2="panda_link0" reason="Never"/>'
                    '</robot>')
    cm = CollisionModel(r, CollisionSpec(package_dirs=(str(share_dir()),), srdf=str(srdf)))
    removed = {(p.link1, p.link2) for p in base.pairs} - {(p.link1, p.link2) for p in cm.pairs}
    # link 7's body also holds the hand and fingers, which the SRDF does not disable against
    # link 0: that body pair stays checked
    assert removed == {("panda_link1", "panda_link5")}
    assert len(cm.skipped_srdf) == 1 and cm.n_pairs == base.n_pairs - 1
    vendor = CollisionModel(r, CollisionSpec(package_dirs=(str(share_dir()),),
                                             srdf=str(panda_urdf.parents[1] / "srdf" / "panda.srdf")))
    assert vendor.n_pairs < base.n_pairs and "by the SRDF" in vendor.describe()
    # neutral-pose contacts are listed (the hand's hull touches link 5 when the arm is at zero)
    assert ("panda_link5", "panda_link7+panda_hand+panda_leftfinger+panda_rightfinger") in \
        {p[:2] for p in base.skipped_neutral}
    with pytest.raises(ConfigError, match="SRDF file not found"):
        CollisionModel(r, CollisionSpec(package_dirs=(str(share_dir()),), srdf=str(tmp_path / "none.srdf")))


def test_package_resolution_and_missing_mesh_names_the_link(ur5_urdf, tmp_path, monkeypatch):
    monkeypatch.delenv("ROS_PACKAGE_PATH", raising=False)
    with pytest.raises(ModelError, match=r"link 'base_link'.*package://example-robot-data.*--package-dir"):
        CollisionModel(RobotModel(ur5_urdf))
    # relative mesh paths are relative to the URDF's folder
    xml = ur5_urdf.read_text().replace("package://example-robot-data/robots/ur_description/", "../")
    # the same layout beside the test: <tmp>/urdf/ur5.urdf and <tmp>/meshes -> the package's meshes
    (tmp_path / "urdf").mkdir()
    (tmp_path / "meshes").symlink_to(ur5_urdf.parent.parent / "meshes", target_is_directory=True)
    local = tmp_path / "urdf" / "ur5.urdf"
    local.write_text(xml)
    assert CollisionModel(RobotModel(local)).n_robot_geometries == 7     # one hull per body


def test_collision_section_parsing(tmp_path):
    spec = parse_collision_section({"margin": 0.05, "floor": None, "srdf": "arm.srdf", "package_dirs": ["meshes"],
                                    "boxes": [{"name": "table_edge", "size": [0.6, 0.1, 0.8],
                                               "xyz": [0.5, 0.0, -0.4], "rpy": [0, 0, 0]}]},
                                   base_dir=str(tmp_path))
    assert spec.margin == 0.05 and spec.floor is None and spec.boxes[0].name == "table_edge"
    assert spec.srdf == str(tmp_path / "arm.srdf") and spec.package_dirs == (str(tmp_path / "meshes"),)
    assert parse_collision_section(None) == CollisionSpec()
    as_map = parse_collision_section({"boxes": {"table_edge": {"size": [0.6, 0.1, 0.8], "xyz": [0.5, 0.0, -0.4]}}})
    assert as_map.boxes == (BoxSpec("table_edge", (0.6, 0.1, 0.8), (0.5, 0.0, -0.4)),)
    for bad, match in (({"margin": -1}, "margin"), ({"boxes": [{"name": "b"}]}, r"boxes\[0\]: missing size"),
                       ({"boxes": [{"size": [1, 0, 1]}]}, "positive"), ({"flor": 0}, "unknown key"),
                       ({"floor": "low"}, "floor")):
        with pytest.raises(ConfigError, match=match):
            parse_collision_section(bad)


# ------------------------------------------------------------------------------ design
def test_ur5_design_keeps_the_margin_by_an_independent_check(ur5_urdf, ur5, ur5_cm):
    lim = LimitSpec.from_model(ur5, UR5_ACC)
    spec = DesignSpec(family="fourier", harmonics=2, base_frequency=2 * np.pi / 5, max_time=None, max_evals=800,
                      seed=1, n_samples=40, n_constraint=60, collision_samples=60)
    res = design_excitation(ur5, lim, spec, collision=ur5_cm)
    assert res.valid and res.collision_report.valid and res.cond < 1e4
    floor_clear, self_min = independent_check(ur5_urdf, ur5.joint_names, res.trajectory, self_pair_links(ur5_cm))
    # the shoulder (2.4 cm above the base plane at any angle) and the upper arm keep reduced margins
    assert floor_ok(ur5_cm, floor_clear) >= 0.023 - 1e-6
    assert self_min >= 0.03 - 1e-6
    crep = res.collision_report
    assert crep.closest_distance >= ur5_cm.margins.min() - 1e-9 and crep.closest_pair in {p.label for p in ur5_cm.pairs}
    # the same design without the constraint goes through the floor: the check is not vacuous
    res0 = design_excitation(ur5, lim, DesignSpec(family="fourier", harmonics=2, base_frequency=2 * np.pi / 5,
                                                  max_time=3.0, seed=1, n_samples=40, n_constraint=60))
    assert not check_collisions(res0.trajectory, ur5_cm).valid


def test_panda_design_keeps_the_margin_by_an_independent_check(panda_urdf):
    r = RobotModel(panda_urdf, PANDA_ARM)
    cm = CollisionModel(r, CollisionSpec(package_dirs=(str(share_dir()),)))
    lim = LimitSpec.from_model(r, [15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])
    spec = DesignSpec(family="fourier", harmonics=2, base_frequency=2 * np.pi / 5, max_time=None, max_evals=800,
                      seed=0, n_samples=40, n_constraint=60, collision_samples=60)
    res = design_excitation(r, lim, spec, collision=cm)
    assert res.valid and res.collision_report.valid
    floor_clear, self_min = independent_check(panda_urdf, r.joint_names, res.trajectory, self_pair_links(cm))
    assert floor_ok(cm, floor_clear) >= 0.03 - 1e-6 and self_min >= 0.03 - 1e-6


def test_population_optimiser_respects_collisions(demo_urdf):
    r = RobotModel(demo_urdf)
    cm = CollisionModel(r)
    lim = LimitSpec.from_model(r, [6, 6, 8, 10, 10, 10])
    spec = DesignSpec(family="modified_fourier", optimizer="pso", harmonics=2, base_frequency=2 * np.pi / 5,
                      max_evals=400, max_time=None, n_samples=30, n_constraint=40, collision_samples=40)
    res = design_excitation(r, lim, spec, collision=cm)
    assert res.collision_report.valid and check_collisions(res.trajectory, cm, 1e-3).valid


def through_base(ur5):
    return JointMovesTrajectory(ur5.joint_names, np.zeros(6), UR5_JOINTS, THROUGH_BASE, [2.0] * 6)


def test_hand_made_trajectory_through_the_base_is_refused_by_designs_check(ur5):
    cm = CollisionModel(ur5, CollisionSpec(floor=None, package_dirs=(str(share_dir()),)))
    traj = through_base(ur5)
    rep = check_collisions(traj, cm)
    assert not rep.valid and rep.closest_distance < -0.02
    assert any(v["pair"].startswith("base_link -") for v in rep.violations)
    from robot_ident.excitation.collision.safety import verify_trajectory
    with pytest.raises(TrajectoryError, match="collides: .*base_link -"):
        verify_trajectory(traj, LimitSpec.from_model(ur5, UR5_ACC), ur5, cm)


def without_collision(urdf, tmp_path) -> Path:
    import xml.etree.ElementTree as ET
    root = ET.fromstring(urdf.read_text())
    for link in root.findall("link"):
        for c in link.findall("collision"):
            link.remove(c)
    out = tmp_path / "bare.urdf"
    out.write_text(ET.tostring(root, encoding="unicode"))
    return out


def ur5_config(tmp_path, floor=None) -> Path:
    """config/demo_arm.yaml with the UR5's joint names (<joint>_joint) and its mesh folder."""
    doc = yaml.safe_load((ROOT / "config" / "demo_arm.yaml").read_text())
    p = doc["robot_ident"]["ros__parameters"]

    def rename(x):
        if isinstance(x, dict):
            return {(k + "_joint" if k in JOINT_MAP else k): rename(v) for k, v in x.items()}
        if isinstance(x, list):
            return [v + "_joint" if isinstance(v, str) and v in JOINT_MAP else rename(v) for v in x]
        return x

    p = rename(p)
    p["excitation"]["collision"] = {"floor": floor, "package_dirs": [str(share_dir())]}
    doc["robot_ident"]["ros__parameters"] = p
    out = tmp_path / "ur5.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


JOINT_MAP = ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3")


def test_simulate_and_excitation_node_refuse_the_trajectory_through_the_base(ur5_urdf, ur5, tmp_path):
    from robot_ident.offline.bag_workflow import simulate_to_bag
    from robot_ident.online.excitation_plan import prepare_excitation
    from robot_ident.online.excitation_run import ExcitationRun

    cfg = ur5_config(tmp_path)
    tf = tmp_path / "traj.yaml"
    # a report claiming the trajectory is fine is not trusted
    from robot_ident.excitation.collision.check import CollisionReport
    save_trajectory(tf, TrajectoryFile(through_base(ur5), collision_report=CollisionReport(
        True, True, 0.03, 1e-3, 12001, 20, "base_link_0 - forearm_link_0", 0.3, 1.0)))
    assert load_trajectory(tf).collision_report.valid
    with pytest.raises(TrajectoryError, match="collides: .*base_link -"):
        simulate_to_bag(ur5_urdf, cfg, tf, tmp_path / "bag")
    assert not (tmp_path / "bag").exists()
    with pytest.raises(TrajectoryError, match="collides: .*base_link -"):
        prepare_excitation(ur5_urdf, cfg, tf)
    cm = CollisionModel(ur5, CollisionSpec(floor=None, package_dirs=(str(share_dir()),)))
    with pytest.raises(TrajectoryError, match="the excitation collides"):
        ExcitationRun(through_base(ur5), LimitSpec.from_model(ur5, UR5_ACC), model=ur5, collision=cm)


def test_excitation_node_refuses_without_collision_geometry_unless_allowed(demo_urdf, tmp_path):
    from robot_ident.online.excitation_plan import prepare_excitation

    bare = without_collision(demo_urdf, tmp_path)
    cfg = ROOT / "config" / "demo_arm.yaml"
    tf = ROOT / "config" / "demo_arm_excitation.yaml"
    with pytest.raises(ConfigError, match="no <collision> geometry.*allow_without_collision_model"):
        prepare_excitation(bare, cfg, tf)
    plan = prepare_excitation(bare, cfg, tf, allow_without_collision_model=True)
    assert plan.collision is None
    plan = prepare_excitation(demo_urdf, cfg, tf)
    assert plan.collision is not None and plan.collision_report.valid


def test_shipped_demo_excitation_is_collision_free(demo_urdf):
    tf = load_trajectory(ROOT / "config" / "demo_arm_excitation.yaml")
    r = RobotModel(demo_urdf, tf.trajectory.joint_names)
    rep = check_collisions(tf.trajectory, CollisionModel(r), 1e-3)
    assert rep.valid and rep.closest_distance >= 0.03


def test_design_cli_warns_loudly_without_collision_geometry(demo_urdf, tmp_path, capsys):
    from robot_ident.cli import main

    bare = without_collision(demo_urdf, tmp_path)
    cfg = tmp_path / "c.yaml"
    doc = yaml.safe_load((ROOT / "config" / "demo_arm.yaml").read_text())
    doc["robot_ident"]["ros__parameters"]["excitation"].update(harmonics=1, max_time=1.0)
    cfg.write_text(yaml.safe_dump(doc))
    assert main(["design", "--urdf", str(bare), "--config", str(cfg), "--output", str(tmp_path / "t.yaml")]) == 0
    err = capsys.readouterr().err
    assert "WARNING: the URDF has no <collision> geometry" in err


# ---------------------------------------------------------------------------- approach
def test_approach_goes_around_an_obstacle_or_refuses(demo_urdf):
    from robot_ident.online.approach import ViaApproach, approach_limits, plan_approach, plan_safe_approach

    r = RobotModel(demo_urdf)
    cm = CollisionModel(r, CollisionSpec(boxes=(BoxSpec("crate", (0.2, 1.0, 0.6), (0.55, 0.0, 0.3)),)))
    lim = approach_limits(LimitSpec.from_model(r, [6, 6, 8, 10, 10, 10]))
    a = np.array([1.2, 1.3, 0.3, 0, 0, 0])
    b = np.array([-1.2, 1.3, 0.3, 0, 0, 0])
    bd = lim.bounds()
    straight = plan_approach(r.joint_names, a, b, bd.velocity, bd.acceleration)
    assert not check_collisions(straight, cm).valid            # a straight joint move cuts through the crate
    ap = plan_safe_approach(r.joint_names, a, b, lim, cm)
    assert isinstance(ap, ViaApproach)
    q, qd, _ = ap.sample(np.array([0.0, ap.duration]))
    np.testing.assert_allclose(q, [a, b], atol=1e-12)
    np.testing.assert_allclose(qd, 0.0, atol=1e-12)
    assert check_collisions(ap, cm, 1e-3).valid
    from robot_ident.excitation.constraints import check_trajectory
    assert check_trajectory(ap, lim).valid
    inside = np.array([0.0, 1.3, 0.3, 0, 0, 0])                 # the arm is in the crate now
    with pytest.raises(TrajectoryError, match="in collision at its current pose"):
        plan_safe_approach(r.joint_names, inside, b, lim, cm)


def test_excitation_run_aborts_before_moving_when_no_safe_approach(demo_urdf):
    from robot_ident.online.excitation_run import ExcitationRun, Phase, SendTrajectory

    tf = load_trajectory(ROOT / "config" / "demo_arm_excitation.yaml")
    r = RobotModel(demo_urdf, tf.trajectory.joint_names)
    # a wall around the start pose's forearm cannot be avoided: the approach is refused
    cm = CollisionModel(r)
    run = ExcitationRun(tf.trajectory, LimitSpec.from_model(r, [6, 6, 8, 10, 10, 10]), model=r, collision=cm)
    q_floor = np.array([0.0, 1.9, 0.0, 0, 0, 0])      # arm lying below its base plane
    run.on_joint_state(0.0, r.joint_names, q_floor)
    acts = run.start(0.0)
    assert run.phase == Phase.ABORTED and not any(isinstance(x, SendTrajectory) for x in acts)
    assert "not moving" in run.detail.lower() or "collision" in run.detail
