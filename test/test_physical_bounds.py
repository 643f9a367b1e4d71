"""Plausible physical estimates (issue 12): the data where they speak, CAD elsewhere,
bounds that hold and say when they bite."""
import numpy as np
import pinocchio as pin
import pytest
import yaml

from conftest import random_states
from robot_ident.data.signals import ProcessedData
from robot_ident.errors import ConfigError, IdentificationError
from robot_ident.estimation import build_problem, physically_consistent, wls
from robot_ident.estimation.body_bounds import (PhysicalBounds, body_regions, geometry_boxes,
                                                implausible_bodies, parse_physical_bounds)
from robot_ident.estimation.physical import is_physical
from robot_ident.estimation.pipeline import identification_config
from robot_ident.io.results import result_to_dict, write_identified_urdf
from robot_ident.model.robot import RobotModel

PAYLOAD = 1.0


def truth_theta(model, seed=0):
    """CAD masses and inertias +-20 %, centres of mass shifted by up to 1 cm, a 1 kg payload
    on the flange body, friction, armature and offsets."""
    rng = np.random.default_rng(seed)
    theta = model.nominal.copy()
    for b in model.layout.body_joints:
        I = model.body_inertia(theta, b)
        f = 1 + rng.uniform(-0.2, 0.2)
        theta[model.layout.inertial_slice(b)] = pin.Inertia(I.mass * f, I.lever + rng.uniform(-0.01, 0.01, 3),
                                                            I.inertia * f).toDynamicParameters()
    last = model.layout.inertial_slice(model.layout.body_joints[-1])
    theta[last] += pin.Inertia(PAYLOAD, np.array([0.0, 0.1, 0.0]), np.eye(3) * 1e-3).toDynamicParameters()
    for j in model.joint_names:
        theta[model.layout.index(f"{j}.Fc")] *= 1.3
        theta[model.layout.index(f"{j}.Ia")] = 0.05
        theta[model.layout.index(f"{j}.off")] = 0.1
    return theta


def data_for(model, theta, n=500, seed=1, noise=0.01):
    q, qd, qdd = random_states(model, n, seed=seed, vel=1.5, acc=6)
    tau = model.efforts(q, qd, qdd, theta)
    rng = np.random.default_rng(seed + 7)
    sigma = noise * np.sqrt(np.mean(tau ** 2, axis=0))
    meas = tau + rng.normal(size=tau.shape) * sigma
    return ProcessedData(np.arange(n) * 0.01, model.joint_names, q, qd, qdd, meas, meas), tau


@pytest.fixture(scope="module")
def case(model, base):
    theta = truth_theta(model)
    data, _ = data_for(model, theta)
    problem = build_problem(model, base, data)
    valid, clean = data_for(model, theta, n=300, seed=50, noise=0.0)
    return theta, problem, valid, clean, wls(problem)


def held_out_rms(res, model, valid, clean):
    pred = res.predict(model, valid.q, valid.qd, valid.qdd)
    return np.sqrt(np.mean((pred - clean) ** 2, axis=0))


def test_masses_follow_the_data_where_seen_and_cad_where_not(model, case):
    theta, problem, valid, clean, ref = case
    bounds = parse_physical_bounds({"bodies": {"wrist_3": {"mass": [0.2, 2.5]}}})   # payload declared
    res = physically_consistent(problem, bounds)
    seen = 0
    for b in model.layout.body_joints:
        info = res.bodies[b]
        sl = model.layout.inertial_slice(b)
        lo, hi = info["mass_bounds"]
        assert lo <= info["mass"] <= hi and is_physical(res.standard_values[sl]), b
        if info["mass_data_share"] >= 0.5:
            seen += 1
            assert abs(info["mass"] / theta[sl][0] - 1) <= 0.2, (b, info, theta[sl][0])
        else:
            assert abs(info["mass"] / model.nominal[sl][0] - 1) <= 0.05, (b, info)
    # the first body turns about a vertical axis: its mass is invisible to joint torques
    assert res.bodies["shoulder_pan"]["mass_data_share"] < 0.1
    assert abs(res.bodies["shoulder_pan"]["mass"] - model.nominal[0]) < 1e-3 * model.nominal[0]
    assert seen >= 3
    # ... and the fit is WLS's: held-out error within 1 % on every joint
    r_phys, r_wls = held_out_rms(res, model, valid, clean), held_out_rms(ref, model, valid, clean)
    noise = 0.01 * np.sqrt(np.mean(clean ** 2, axis=0))
    assert np.all(np.hypot(r_phys, noise) <= 1.01 * np.hypot(r_wls, noise)), (r_phys, r_wls)


def test_an_undeclared_payload_stops_at_the_mass_bound_and_says_so(model, case):
    _, problem, _, _, _ = case
    res = physically_consistent(problem)                      # default: [0.5, 2] x CAD
    flange = res.bodies["wrist_3"]
    assert flange["mass"] == pytest.approx(2 * model.nominal[model.layout.index("wrist_3.m")], rel=1e-3)
    assert "mass_max" in flange["bounds_active"]
    for b, info in res.bodies.items():
        assert info["mass_bounds"][0] <= info["mass"] <= info["mass_bounds"][1] * (1 + 1e-9), b
        assert "mass_min" not in info["bounds_active"], b
    d = yaml.safe_load(yaml.safe_dump(result_to_dict(res, model)))   # plain YAML types only
    assert "mass_max" in d["standard_parameters"]["bodies"]["wrist_3"]["bounds_active"]


def test_the_body_held_at_a_bound_is_named_with_what_it_costs(model, case):
    """Issue 28: `bounds_active` listed it while the model was presented as plausible; now a
    warning line names the body, the bound and the CAD mass, and the cost in fit."""
    from robot_ident.estimation.conditioning import assess_quality, quality_warnings
    _, problem, _, _, _ = case
    res = physically_consistent(problem)                      # the 1 kg payload is not declared
    lines = quality_warnings(assess_quality(res))
    named = [ln for ln in lines if "body of joint 'wrist_3'" in ln]
    assert len(named) == 1 and "the data want more than its mass bound" in named[0], lines
    assert "x its CAD mass" in named[0] and "in-sample RMS above WLS's by up to" in named[0]
    declared = physically_consistent(problem, parse_physical_bounds({"bodies": {"wrist_3": {"mass": [0.2, 2.5]}}}))
    assert "data_against_bounds" not in declared.extra


def test_a_negative_armature_or_friction_the_data_want_is_named(model, base, case):
    """Efforts that lag the motion look like a negative armature and viscous friction (the
    KUKA log of bench/real_logs.py: lwr_6 -0.53 and -0.20, the physical fit 68 % worse than
    WLS there). The physical estimate holds them at 0 and a warning names the joint, the
    terms and the cost; on data with positive terms nothing is said."""
    from robot_ident.estimation.conditioning import assess_quality, quality_warnings
    theta = truth_theta(model)
    theta[model.layout.index("elbow.Ia")] = -0.3
    theta[model.layout.index("elbow.Fv")] = -2.0
    data, _ = data_for(model, theta, seed=3)
    bounds = parse_physical_bounds({"bodies": {"wrist_3": {"mass": [0.2, 2.5]}}})
    res = physically_consistent(build_problem(model, base, data), bounds)
    named = [ln for ln in quality_warnings(assess_quality(res)) if "negative" in ln]
    assert len(named) == 1, named
    assert named[0].startswith("warning: joint 'elbow': the data want a negative armature (-0.3")
    assert "and viscous friction (-2" in named[0] and "its in-sample RMS" in named[0], named[0]
    # a negative armature: the line says that sensors after the gear do not see the rotor
    assert "do not see the rotor: identification.model.armature: false" in named[0], named[0]
    clean = physically_consistent(case[1], bounds)
    assert not [ln for ln in quality_warnings(assess_quality(clean)) if "negative" in ln]


def test_a_wrong_cad_does_not_pull_the_fit_away_from_the_data(model, base):
    """Every CAD inertia 1.9 x the truth (a placeholder URDF, as FloBaRoID's KUKA with 2 kg on
    every link) and well inside the default bounds: the CAD prior is weakened until the fit
    is within 1 % of WLS's on every joint, but never dropped (prior_weight_factor > 0)."""
    theta = truth_theta(model, seed=3)
    last = model.layout.inertial_slice(model.layout.body_joints[-1])
    theta[last] -= pin.Inertia(PAYLOAD, np.array([0.0, 0.1, 0.0]), np.eye(3) * 1e-3).toDynamicParameters()
    cad = model.nominal.copy()
    cad[:model.layout.n_inertial] = 1.9 * theta[:model.layout.n_inertial]
    data, _ = data_for(model, theta, n=200, seed=4, noise=0.03)
    problem = build_problem(model, base, data)
    problem.prior = cad
    ref = wls(problem)
    res = physically_consistent(problem)
    assert 0 < res.extra["prior_weight_factor"] < 1
    assert np.all(res.residual_rms <= 1.01 * ref.residual_rms + 1e-12)
    valid, clean = data_for(model, theta, n=300, seed=51, noise=0.0)
    r_phys, r_wls = held_out_rms(res, model, valid, clean), held_out_rms(ref, model, valid, clean)
    noise = 0.01 * np.sqrt(np.mean(clean ** 2, axis=0))
    assert np.all(np.hypot(r_phys, noise) <= 1.02 * np.hypot(r_wls, noise)), (r_phys, r_wls)


def test_centre_of_mass_region_and_total_mass_bounds_hold(model, case):
    _, problem, _, _, _ = case
    bounds = parse_physical_bounds({"com_region": "sphere", "com_radius": 0.12, "total_mass": [10.0, 17.5],
                                    "bodies": {"wrist_3": {"mass": [0.2, 2.5]}}})
    res = physically_consistent(problem, bounds)
    total = sum(res.bodies[b]["mass"] for b in model.layout.body_joints)
    assert 10.0 - 1e-6 <= total <= 17.5 + 1e-6 and total > 17.4     # truth is heavier: bound bites
    assert "total_mass_max" in res.extra["bounds_active_global"]
    for b in model.layout.body_joints:
        reg = res.bodies[b]["com_region"]
        com = np.array(res.bodies[b]["com"])
        assert np.linalg.norm(com - reg["center"]) <= reg["radius"] * (1 + 1e-9), b
    # the elbow link (CAD centre of mass 0.2 m out) needs a larger sphere than asked: grown, and said
    assert res.bodies["elbow"]["com_region"].get("grown_to_hold_cad")


def test_geometry_boxes_from_collision_meshes(panda_urdf):
    from conftest import PANDA_ARM
    m = RobotModel(panda_urdf, PANDA_ARM)
    boxes, note = geometry_boxes(m)
    assert note is None and set(boxes) == set(m.layout.body_joints[:7]) | set(boxes)
    regions, _ = body_regions(m, PhysicalBounds(), m.nominal)
    for b in m.layout.body_joints:
        th = m.nominal[m.layout.inertial_slice(b)]
        reg = regions[b]
        assert reg.kind == "box" and reg.source == "collision", (b, reg)
        assert np.all(np.abs(th[1:4] / th[0] - reg.center) < reg.half), b
        assert 0.03 < reg.half.max() < 0.4, (b, reg.half)


def test_demo_arm_without_geometry_gets_kinematic_spheres(model, demo_urdf, tmp_path):
    import re
    path = tmp_path / "bare.urdf"     # the demo arm without its collision cylinders
    path.write_text(re.sub(r"<collision>\s*\n.*?</collision>", "", demo_urdf.read_text(), flags=re.S))
    bare = RobotModel(path, model.joint_names)
    assert "</collision>" not in path.read_text()
    regions, _ = body_regions(bare, PhysicalBounds(), bare.nominal)
    assert all(r.kind == "sphere" and r.source == "kinematics" for r in regions.values())
    # shoulder_lift's sphere holds the elbow joint 0.44 m away
    assert regions["shoulder_lift"].half[0] > 0.44


def test_config_section_is_parsed_and_checked(model, case):
    icfg = identification_config({"physical": {"mass_ratio": [0.8, 1.5], "com_region": "sphere",
                                               "bodies": {"wrist_3": {"mass": [0.1, 3]}}}})
    pb = icfg.settings.physical
    assert pb.mass_ratio == (0.8, 1.5) and pb.com_region == "sphere" and pb.bodies["wrist_3"]["mass"] == (0.1, 3.0)
    assert identification_config({}).settings.physical == PhysicalBounds()
    with pytest.raises(ConfigError, match=r"identification\.physical\.mass_ratio"):
        identification_config({"physical": {"mass_ratio": [2, 1]}})
    with pytest.raises(ConfigError, match="unknown key"):
        identification_config({"physical": {"mass_range": [0.5, 2]}})
    with pytest.raises(ConfigError, match="com_region"):
        identification_config({"physical": {"com_region": "hull"}})
    with pytest.raises(ConfigError, match="'gripper' is not a body"):
        physically_consistent(case[1], parse_physical_bounds({"bodies": {"gripper": {"mass": [0, 1]}}}))


def test_identified_urdf_never_carries_an_absurd_body(model, case, tmp_path):
    """An estimator without bounds (here a doctored result) that returns a 700 kg link and a
    10 g link with its centre of mass 2.3 m away: identified.urdf keeps CAD for both."""
    _, problem, _, _, _ = case
    res = physically_consistent(problem)
    theta = res.standard_values.copy()
    sl = model.layout.inertial_slice("elbow")
    theta[sl] = pin.Inertia(700.0, np.array([0, 0, 0.2]), np.eye(3)).toDynamicParameters()
    sl6 = model.layout.inertial_slice("wrist_1")
    theta[sl6] = pin.Inertia(0.9, np.array([2.3, 0, 0]), np.eye(3) * 1e-4).toDynamicParameters()
    assert set(implausible_bodies(model, theta)) == {"elbow", "wrist_1"}
    res.standard_values, res.bodies = theta, None
    path = write_identified_urdf(tmp_path, model, res)
    text = path.read_text()
    assert "elbow (implausible: mass 700 kg" in text and "wrist_1 (implausible: centre of mass" in text
    loaded = RobotModel(path)
    np.testing.assert_allclose(loaded.nominal[sl], model.nominal[sl], rtol=1e-8)


def test_infeasible_bounds_are_refused_with_the_bound_named(case):
    with pytest.raises(IdentificationError, match="total_mass_min"):
        physically_consistent(case[1], parse_physical_bounds({"total_mass": [100.0, 200.0]}))


def test_identify_finds_package_meshes_through_the_configs_package_dirs(panda_urdf, tmp_path):
    """Issue 29: `identify` ignored excitation.collision.package_dirs, so a vendor URDF copied
    away from its package got spheres for its physical bounds, said only in result.yaml. The
    config's folders are now searched (as the collision checks search them), and a URDF
    whose meshes nobody finds is a warning line."""
    from robot_ident.estimation.body_bounds import geometry_boxes
    from robot_ident.estimation.conditioning import assess_quality, quality_warnings
    from robot_ident.io.config import load_config
    from robot_ident.io.model_loading import load_model
    from robot_ident.model.base import BaseParameters
    urdf = tmp_path / "panda.urdf"
    urdf.write_text(panda_urdf.read_text())            # away from its package: the folder walk finds nothing
    share = panda_urdf.parents[4]                      # .../share: package://example-robot-data/... under it
    joints = [f"panda_joint{i}" for i in range(1, 8)]

    def model_with(collision):
        params = {"joints": joints, "current_source": "effort",
                  "identification": {"model": {"locked_positions": {"panda_finger_joint1": 0.0,
                                                                    "panda_finger_joint2": 0.0}}}}
        if collision is not None:
            params["excitation"] = {"collision": collision}
        cfg_path = tmp_path / "c.yaml"
        cfg_path.write_text(yaml.safe_dump({"robot_ident": {"ros__parameters": params}}))
        cfg = load_config(cfg_path)
        return load_model(urdf, cfg, identification_config(cfg.section("identification")))

    boxes, note = geometry_boxes(model_with({"package_dirs": [str(share)]}))
    assert len(boxes) == 7 and note is None
    model = model_with(None)
    boxes, note = geometry_boxes(model)
    assert not boxes and "not read" in note
    q, qd, qdd = random_states(model, 300, seed=2)
    tau = model.efforts(q, qd, qdd)
    tau += 0.02 * np.sqrt(np.mean(tau ** 2, axis=0)) * np.random.default_rng(3).normal(size=tau.shape)
    data = ProcessedData(np.arange(300) * 0.01, model.joint_names, q, qd, qdd, tau, tau)
    problem = build_problem(model, BaseParameters.from_model(model, n_samples=200), data)
    res = physically_consistent(problem, model=model)
    lines = quality_warnings(assess_quality(res))
    assert any("kinematic spheres" in ln and "excitation.collision.package_dirs" in ln for ln in lines), lines


def test_a_bound_or_sign_that_costs_no_visible_effort_is_a_note():
    """Holding a body at a bound (or a term at 0) is a warning when it costs a joint a visible
    part of its effort (over 1 % of its RMS) and a note when not: on noise-free data WLS's
    in-sample RMS is tiny, and 70 % above it was still 0.1 % of the effort (the zoo's JACO2)."""
    from types import SimpleNamespace

    from robot_ident.estimation.physical_findings import data_against_bounds, data_against_signs
    bodies = {"j1": {"mass_cad": 1.0, "bounds_active": ["mass_max"]}}
    ranges = {"j1": (0.5, 2.0)}
    wls_rms, rms = np.array([0.001, 0.001]), np.array([0.0017, 0.001])       # +70 % of WLS on j1
    warn, note = data_against_bounds(bodies, ranges, rms, wls_rms, ["j1", "j2"], effort_rms=np.array([1.0, 1.0]))
    assert not warn and "mass bound" in note[0]
    warn, note = data_against_bounds(bodies, ranges, rms, wls_rms, ["j1", "j2"], effort_rms=np.array([0.05, 1.0]))
    assert "mass bound" in warn[0] and not note                                # 1.4 % of j1's effort
    first = SimpleNamespace(names=["j1.Ia"], values=np.array([-0.5]), std=np.array([0.01]))
    values = np.array([0.0])
    for effort, level in ((np.array([1.0, 1.0]), "note"), (np.array([0.05, 1.0]), "warning")):
        warn, note = data_against_signs(first, values, rms, wls_rms, ["j1", "j2"], 1.01, effort)
        assert bool(warn) == (level == "warning") and bool(note) == (level == "note")
    # a negative friction alone: no word of the rotor
    first = SimpleNamespace(names=["j1.Fv"], values=np.array([-0.5]), std=np.array([0.01]))
    warn, note = data_against_signs(first, values, rms, wls_rms, ["j1", "j2"], 1.01, np.array([1.0, 1.0]))
    assert "viscous friction" in note[0] and "rotor" not in note[0], note


def test_level_one_s_covariance_computed_beside_level_two_changes_nothing(case, monkeypatch):
    """The WLS covariance of a large problem is computed in a forked process while level 2
    solves (util/parallel.py): the very same estimate; a covariance that determines nothing
    is still the error named first, before level 2's own."""
    import multiprocessing
    import os

    from robot_ident.estimation import least_squares, physical
    from robot_ident.util import parallel
    problem = case[1]
    here = physically_consistent(problem)
    covariances = []
    real = least_squares._covariance

    def spy(*args):
        covariances.append(os.getpid())
        return real(*args)
    monkeypatch.setattr(least_squares, "_covariance", spy)
    monkeypatch.setattr(physical, "COVARIANCE_ASIDE_ROWS", 1)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    aside = physically_consistent(problem)
    assert covariances == []                           # the spy ran in the forked process only
    assert np.array_equal(here.values, aside.values) and np.array_equal(here.covariance, aside.covariance)
    assert here.extra == aside.extra and here.bodies == aside.bodies

    def zero(*args):
        cov, info = real(*args)
        return np.zeros_like(cov), info

    def level2_fails(*args):
        raise IdentificationError("level 2 fails")
    monkeypatch.setattr(least_squares, "_covariance", zero)
    with pytest.raises(IdentificationError, match="the WLS covariance is zero"):
        physically_consistent(problem)
    monkeypatch.setattr(physical, "_two_levels", level2_fails)
    with pytest.raises(IdentificationError, match="the WLS covariance is zero"):
        physically_consistent(problem)
    with monkeypatch.context() as m:        # a small problem: its covariance comes at once, and stops it
        m.setattr(physical, "COVARIANCE_ASIDE_ROWS", 10 ** 9)
        with pytest.raises(IdentificationError, match="the WLS covariance is zero"):
            physically_consistent(problem)
    monkeypatch.setattr(least_squares, "_covariance", real)
    with pytest.raises(IdentificationError, match="level 2 fails"):
        physically_consistent(problem)
    assert multiprocessing.active_children() == []
