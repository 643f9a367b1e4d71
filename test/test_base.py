import numpy as np

from conftest import PANDA_ARM, random_states
from robot_ident.model.base import BaseParameters
from robot_ident.model.robot import FrictionOptions, RobotModel

NO_ACTUATOR = FrictionOptions(armature=False, coulomb=False, viscous=False, offset=False)


def independent_rank(W):
    """Rank from the SVD (not from QR), columns scaled, with a tolerance between the
    round-off and the smallest genuine singular value."""
    norms = np.linalg.norm(W, axis=0)
    Ws = W[:, norms > 1e-10 * norms.max()] / norms[norms > 1e-10 * norms.max()]
    s = np.linalg.svd(Ws, compute_uv=False)
    return int((s > 1e-7 * s[0]).sum())


def test_panda_has_43_inertial_base_parameters(panda_urdf):
    model = RobotModel(panda_urdf, PANDA_ARM, friction=NO_ACTUATOR)
    base = BaseParameters.from_model(model)
    assert base.size == 43
    q, qd, qdd = random_states(model, 300, seed=11)
    assert independent_rank(model.regressor(q, qd, qdd)) == 43


def test_demo_arm_base_count_matches_independent_rank(demo_urdf):
    model = RobotModel(demo_urdf)
    base = BaseParameters.from_model(model)
    q, qd, qdd = random_states(model, 300, seed=12)
    assert base.size == independent_rank(model.regressor(q, qd, qdd))
    assert base.rank_gap > 1e6


def test_base_regressor_reproduces_standard_efforts_on_new_states(demo_urdf, panda_urdf):
    for model in (RobotModel(demo_urdf), RobotModel(panda_urdf, PANDA_ARM)):
        base = BaseParameters.from_model(model, seed=0)
        q, qd, qdd = random_states(model, 50, seed=99)     # not the reduction's samples
        W = model.regressor(q, qd, qdd)
        theta = np.random.default_rng(1).normal(size=model.n_params)
        np.testing.assert_allclose(base.regressor(W) @ base.project(theta), W @ theta,
                                   atol=1e-9 * np.abs(W @ theta).max())
        np.testing.assert_allclose(base.projection @ theta, base.project(theta), atol=1e-12)


def test_regrouped_names_are_readable(demo_urdf):
    base = BaseParameters.from_model(RobotModel(demo_urdf))
    first = base.names[0]
    # Joint 1 is vertical: its armature and the outboard bodies' inertia about that axis
    # add to Izz of the first body.
    assert first.startswith("shoulder_pan.Izz") and "+ shoulder_pan.Ia" in first
    assert "shoulder_lift.m" not in base.names and "shoulder_pan.m" not in " ".join(base.names)
    assert "wrist_3.Iyy" in base.names


def test_zero_columns_are_not_base_parameters():
    names = ("a", "b", "c")
    W = np.random.default_rng(0).normal(size=(20, 3))
    W[:, 1] = 1e-17 * W[:, 0]   # round-off only
    base = BaseParameters.from_regressor(W, names)
    assert base.names == ("a", "c")
