"""The independent collision oracle (test/collision_oracle.py) against truths built here."""
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from collision_oracle import mesh_clearance, trajectory_clearance
from conftest import PANDA_ARM, example_robot_urdf

UR5_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint")
THROUGH_BASE = [0.0, -0.07, 2.71, 0.22, 2.1, -2.67]
JACO_JOINTS = tuple(f"j2s6s200_joint_{i}" for i in range(1, 7))

CUBE_OBJ = "".join(f"v {x} {y} {z}\n" for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)) + """\
f 1 3 4 2
f 5 6 8 7
f 1 2 6 5
f 3 7 8 4
f 1 5 7 3
f 2 4 8 6
"""


def share_dir() -> Path:
    return example_robot_urdf("ur_description", "ur5_robot.urdf").parents[4]


def robots_file(*parts) -> Path:
    return share_dir() / "example-robot-data" / "robots" / Path(*parts)


@pytest.fixture(scope="module")
def cubes(tmp_path_factory) -> Path:
    """A 0.2 m mesh cube on the base; a prismatic x joint carrying a 0.1 m box 0.3 m below, then a continuous
    z joint 0.5 m further carrying a second 0.2 m mesh cube: at (x, 0) the cubes are 0.3 + x apart."""
    d = tmp_path_factory.mktemp("cubes")
    (d / "cube.obj").write_text(CUBE_OBJ)
    cube = '<collision><geometry><mesh filename="cube.obj" scale="0.2 0.2 0.2"/></geometry></collision>'
    (d / "cubes.urdf").write_text(f"""<robot name="cubes">
  <link name="base">{cube}</link>
  <link name="carriage">
    <collision><origin xyz="0 0 -0.3"/><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link>
  <link name="tip">{cube}</link>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="carriage"/><axis xyz="1 0 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="turn" type="continuous"><parent link="carriage"/><child link="tip"/><origin xyz="0.5 0 0"/>
    <axis xyz="0 0 1"/></joint>
</robot>""")
    return d / "cubes.urdf"


def test_two_cubes_at_known_distances(cubes):
    Q = [[0.1, 0.0], [-0.05, np.pi / 4], [0.0, np.pi / 2]]
    res = mesh_clearance(cubes, ["slide", "turn"], Q, floor=-0.5)
    # base-carriage-tip: only base and tip are not adjacent; the base does not move: no floor pair
    assert set(res) == {("base", "tip"), ("carriage", "floor"), ("tip", "floor")}
    d, n = res["base", "tip"]
    assert n == 1 and d == pytest.approx(0.45 - 0.1 - 0.1 * np.sqrt(2), abs=1e-9)   # the turned cube's corner
    assert res["tip", "floor"] == pytest.approx((0.4, 0), abs=1e-9)
    assert res["carriage", "floor"] == pytest.approx((0.15, 0), abs=1e-9)
    # every pose exact, not only the minimum
    for q, want in ((Q[0], 0.4), (Q[2], 0.3)):
        assert mesh_clearance(cubes, ["slide", "turn"], [q])["base", "tip"][0] == pytest.approx(want, abs=1e-9)


def test_contact_is_zero_between_meshes_and_a_penetration_below_the_floor(cubes):
    """coal gives 0, not a penetration depth, for two intersecting meshes."""
    Q = [[0.0, 0.0], [-0.35, 0.0], [-0.4, 0.3]]
    assert mesh_clearance(cubes, ["slide", "turn"], Q)["base", "tip"] == (0.0, 1)
    res = mesh_clearance(cubes, ["slide", "turn"], [[0.0, 0.0]], floor=0.0)
    assert res["tip", "floor"] == pytest.approx((-0.1, 0), abs=1e-9)          # the mesh's lowest vertex
    assert res["carriage", "floor"] == pytest.approx((-0.35, 0), abs=1e-9)    # the box, by coal


class Line:
    """slide through `xs` at t = 0, 1, 2 s, turn fixed at 0."""
    duration = 2.0

    def __init__(self, *xs):
        self.xs = xs

    def sample(self, t):
        t = np.atleast_1d(t)
        x = np.interp(t, [0.0, 1.0, 2.0], self.xs)
        q = np.stack([x, np.zeros_like(x)], axis=1)
        return q, np.zeros_like(q), np.zeros_like(q)


def test_trajectory_clearance_reports_the_time_and_includes_both_ends(cubes):
    at = {dt: trajectory_clearance(cubes, ["slide", "turn"], Line(0.4, 0.2, 0.4), dt=dt)["base", "tip"]
          for dt in (0.3, 0.01)}
    assert at[0.3] == pytest.approx((0.52, 0.9), abs=1e-9) and at[0.01] == pytest.approx((0.5, 1.0), abs=1e-9)
    # t = 0, 0.3, ..., 1.8 and 2.0
    assert trajectory_clearance(cubes, ["slide", "turn"], Line(0.4, 0.2, 0.1), dt=0.3)["base", "tip"] == (
        pytest.approx(0.4, abs=1e-9), 2.0)
    assert trajectory_clearance(cubes, ["slide", "turn"], Line(0.1, 0.2, 0.4), dt=0.3)["base", "tip"] == (
        pytest.approx(0.4, abs=1e-9), 0.0)


def test_ur5_through_its_base_touches_the_base_and_not_at_zero():
    urdf = robots_file("ur_description", "urdf", "ur5_robot.urdf")
    res = mesh_clearance(urdf, UR5_JOINTS, [np.zeros(6), THROUGH_BASE], package_dirs=[share_dir()])
    touching = {k for k, (d, _) in res.items() if d <= 0}
    assert {("base_link", "wrist_2_link"), ("base_link", "wrist_3_link"), ("base_link", "ee_link")} <= touching
    assert all(res[k][1] == 1 for k in touching) and res["base_link", "wrist_2_link"][0] == 0.0  # two meshes
    assert res["base_link", "ee_link"][0] < 0          # ee_link is a box: coal gives the penetration
    assert ("base_link", "shoulder_link") not in res and ("wrist_3_link", "ee_link") not in res  # adjacent, rigid
    zero = mesh_clearance(urdf, UR5_JOINTS, [np.zeros(6)], package_dirs=[share_dir()])
    assert set(zero) == set(res) and min(d for d, _ in zero.values()) > 0.01


def test_jaco2_folded_pose_touches_link_2_with_link_6():
    res = mesh_clearance(robots_file("kinova_description", "robots", "kinova.urdf"), JACO_JOINTS,
                         [[-4.108, 3.543, 5.718, 2.721, 5.658, 0.937]], package_dirs=[share_dir()])
    assert res["j2s6s200_link_2", "j2s6s200_link_6"] == (0.0, 0)
    # the fingers are fixed to link 6 in this URDF: never checked against it
    assert not any({"j2s6s200_link_6", "j2s6s200_link_finger_1"} == set(k) for k in res)


def test_srdf_disables_exactly_its_pairs(tmp_path):
    urdf = robots_file("panda_description", "urdf", "panda.urdf")
    srdf = tmp_path / "arm.srdf"
    srdf.write_text('<robot name="panda"><disable_collisions link1="panda_link5" link2="panda_link1" reason="x"/>'
                    '</robot>')
    q = [[0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8]]
    base = mesh_clearance(urdf, PANDA_ARM, q, package_dirs=[share_dir()])
    assert set(base) - set(mesh_clearance(urdf, PANDA_ARM, q, package_dirs=[share_dir()], srdf=srdf)) == {
        ("panda_link1", "panda_link5")}
    # the closed fingers' boxes overlap (by 4e-5 m): a contact the vendor's SRDF disables
    assert base["panda_leftfinger", "panda_rightfinger"][0] < 0
    vendor = mesh_clearance(urdf, PANDA_ARM, q, package_dirs=[share_dir()],
                            srdf=robots_file("panda_description", "srdf", "panda.srdf"))
    assert ("panda_leftfinger", "panda_rightfinger") not in vendor and set(vendor) < set(base)


def test_the_bisection_finds_the_minimum_of_every_pose(tmp_path):
    """Against pin.computeDistances at every pose of a smooth UR5 motion that nears but does not reach
    contact: the same minimum and pose for every pair; with only_below the same below it."""
    urdf = robots_file("ur_description", "urdf", "ur5_robot.urdf")
    t = np.linspace(0, 1, 151)[:, None] ** 1.3
    Q = np.array([0.3, -1.2, 1.4, -1.0, -1.5, 0.0]) + np.sin(np.pi * t) * np.array([0.5, 1.0, 1.2, 1.0, 0.8, 2.0])
    res = mesh_clearance(urdf, UR5_JOINTS, Q, package_dirs=[share_dir()])
    assert len(res) == 20 and 0 < min(d for d, _ in res.values()) < 0.01
    model = pin.buildModelFromUrdf(str(urdf))
    gm = pin.buildGeomFromUrdf(model, str(urdf), pin.COLLISION, package_dirs=[str(share_dir())])
    link = [model.frames[g.parentFrame].name for g in gm.geometryObjects]
    for i in range(len(link)):
        for j in range(i + 1, len(link)):
            if (link[i], link[j]) in res:
                gm.addCollisionPair(pin.CollisionPair(i, j))
    data, gd = model.createData(), pin.GeometryData(gm)
    D = np.array([[r.min_distance for r in gd.distanceResults] for q in Q
                  if pin.computeDistances(model, data, gm, gd, q) >= 0])
    brute = {}   # {link pair: its distance at each pose}
    for k, p in enumerate(gm.collisionPairs):
        key = (link[p.first], link[p.second])
        brute[key] = np.minimum(brute.get(key, np.inf), D[:, k])
    for key, (d, n) in res.items():
        assert d == pytest.approx(brute[key].min(), abs=1e-6) and brute[key][n] == pytest.approx(d, abs=1e-9)
    fast = mesh_clearance(urdf, UR5_JOINTS, Q, package_dirs=[share_dir()], only_below=0.05)
    assert sum(brute[key].min() < 0.05 for key in fast) >= 3
    for key, (d, _) in fast.items():
        assert d == pytest.approx(brute[key].min(), abs=1e-6) if brute[key].min() < 0.05 else d >= 0.05
