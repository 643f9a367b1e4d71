import numpy as np
import pytest

from conftest import random_states
from robot_ident.errors import IdentificationError
from robot_ident.estimation import build_problem, ols, wls
from robot_ident.data.signals import ProcessedData


def synthetic(model, n=400, noise=None, seed=0):
    q, qd, qdd = random_states(model, n, seed=seed)
    tau = model.efforts(q, qd, qdd)
    rng = np.random.default_rng(seed + 1)
    if noise is not None:
        tau = tau + rng.normal(size=tau.shape) * noise
    t = np.arange(n) * 0.01
    return ProcessedData(t, model.joint_names, q, qd, qdd, tau, tau)


@pytest.mark.parametrize("estimator", [ols, wls])
def test_exact_recovery_without_noise(model, base, estimator):
    data = synthetic(model, noise=np.full(model.n, 1e-12))
    res = estimator(build_problem(model, base, data))
    truth = base.project(model.nominal)
    np.testing.assert_allclose(res.values, truth, rtol=1e-6, atol=1e-9)
    assert res.names == base.names
    assert res.value("wrist_3.Iyy") == pytest.approx(truth[base.names.index("wrist_3.Iyy")], rel=1e-6)


def test_standard_deviations_are_calibrated(model, base):
    """Across repeated noisy data sets the errors divided by the reported std are ~N(0,1)."""
    truth = base.project(model.nominal)
    sigma = np.array([0.5, 0.5, 0.2, 0.05, 0.05, 0.02])
    z = []
    for seed in range(8):
        res = wls(build_problem(model, base, synthetic(model, 300, sigma, seed=10 * seed)))
        z.append((res.values - truth) / res.std)
    z = np.concatenate(z)
    assert 0.8 < np.std(z) < 1.2
    np.testing.assert_allclose(res.joint_sigma, sigma, rtol=0.2)


def test_wls_beats_ols_when_one_joint_is_noisy(model, base):
    truth = base.project(model.nominal)
    sigma = np.array([0.05, 0.05, 0.05, 0.01, 0.01, 0.01])
    sigma[1] = 3.0
    err_o, err_w = [], []
    for seed in range(4):
        prob = build_problem(model, base, synthetic(model, 300, sigma, seed=seed))
        err_o.append(np.abs(ols(prob).values - truth))
        err_w.append(np.abs(wls(prob).values - truth))
    assert np.median(np.array(err_w) / np.array(err_o)) < 0.7



def test_wls_weights_settle_on_each_joints_own_noise(model, base):
    """Wrists 20 000 x quieter than the big joints: the OLS residual on a wrist is mostly the big
    joints' noise leaking through the shared parameters, so weights from it (one pass) left
    the wrists' sigma 10-100 x too high and their held-out error 0.1-0.9 % (bench/zoo.py: the
    noise-free UR10's wrist_3 52 %). Re-weighting until the sigmas settle finds each joint's own
    noise and takes the wrists' error to ~0.002 %, the big joints' unchanged."""
    sigma = np.array([2.0, 2.0, 2.0, 1e-4, 1e-4, 1e-4])
    q, qd, qdd = random_states(model, 300, seed=99)
    true = model.efforts(q, qd, qdd)
    for seed in range(3):
        res = wls(build_problem(model, base, synthetic(model, 300, sigma, seed=seed)))
        np.testing.assert_allclose(res.joint_sigma, sigma, rtol=0.15)
        err = np.sqrt(np.mean((res.predict(model, q, qd, qdd) - true) ** 2, 0) / np.mean(true ** 2, 0))
        assert err[3:].max() < 1e-4

def test_fewer_equations_than_parameters(model, base):
    with pytest.raises(IdentificationError, match="equations for 58 base parameters"):
        ols(build_problem(model, base, synthetic(model, n=5)))


def test_rank_deficient_data_names_the_parameters(model, base):
    data = synthetic(model, 300)
    data.q[:, 5] = 0.3      # wrist_3 never moves: its friction and offset are confounded
    data.qd[:, 5] = 0.0
    data.qdd[:, 5] = 0.0
    with pytest.raises(IdentificationError, match="wrist_3"):
        ols(build_problem(model, base, data))


def test_joint_without_moving_samples_is_named(model, base):
    data = synthetic(model, 100)
    data.qd[:, 2] = 0.0
    with pytest.raises(IdentificationError, match="'elbow' has no sample moving"):
        build_problem(model, base, data, moving_threshold=0.05)


def test_a_model_the_data_do_not_determine_names_its_weakest_combination(demo_urdf):
    """Issue 29: "NOT A GOOD MODEL" named no parameter when only the condition number was off.
    The weakest combination (top eigenvector of the covariance scaled by each parameter's
    effect on the efforts) is named in the warning and in model_quality, with its effect."""
    from conftest import random_states
    from robot_ident.data.signals import ProcessedData
    from robot_ident.estimation import build_problem, wls
    from robot_ident.estimation.conditioning import assess_quality, quality_warnings
    from robot_ident.model.base import BaseParameters
    from robot_ident.model.robot import RobotModel
    m = RobotModel(demo_urdf)
    q, qd, qdd = random_states(m, 400, seed=1)
    qdd[:, 5] *= 1e-5                          # wrist_3 barely accelerates: cond ~4e5
    tau = m.efforts(q, qd, qdd)
    tau += 0.01 * np.sqrt(np.mean(tau ** 2, axis=0)) * np.random.default_rng(0).normal(size=tau.shape)
    p = build_problem(m, BaseParameters.from_model(m, n_samples=200),
                      ProcessedData(np.arange(400) * 0.01, m.joint_names, q, qd, qdd, tau, tau))
    r = wls(p)
    q_ = assess_quality(r, np.sqrt(np.mean(p.W ** 2, axis=0)), float(np.sqrt(np.mean(p.y ** 2))))
    assert not q_["good"] and not q_["poorly_determined"]          # only the condition number: nothing named before
    weak = q_["weakest_direction"]
    assert 1 <= len(weak["parameters"]) <= 3 and set(weak["parameters"]) <= set(r.names)
    line = quality_warnings(q_)[0]
    assert f"this motion does not tell apart {weak['parameters'][0]}" in line and "% of their RMS" in line


@pytest.mark.parametrize("shape", [(2500, 60), (40, 60), (0, 7), (1, 1)])
def test_r_factor_of_stacked_blocks_is_householder_r(shape):
    """`r_factor` (LAPACK dgeqrt) of blocks stacked, an earlier R among them, is numpy's
    Householder R (dgeqrf) to rounding, up to the signs of its rows, and R^T R = A^T A."""
    from robot_ident.estimation.r_factor import r_factor
    rng = np.random.default_rng(4)
    A = rng.normal(size=shape) * np.logspace(0, 6, shape[1])      # columns of very different scales
    m = shape[0]
    blocks = [A[:m // 3], A[m // 3:m // 2], A[m // 2:]]
    R = r_factor(r_factor(*blocks[:2]), blocks[2])
    ref = np.linalg.qr(A, mode="r")
    assert R.shape == ref.shape
    np.testing.assert_allclose(np.abs(R), np.abs(ref), rtol=1e-9, atol=1e-9 * np.abs(ref).max(initial=0))
    np.testing.assert_allclose(R.T @ R, A.T @ A, rtol=1e-10, atol=1e-10 * np.abs(A.T @ A).max(initial=0))
    assert np.array_equal(R, np.triu(R))


def test_r_factor_refuses_blocks_of_another_width():
    """A block of another width is an error, not broadcast into the stack."""
    from robot_ident.estimation.r_factor import r_factor
    with pytest.raises(ValueError, match="4 columns"):
        r_factor(np.ones((3, 4)), np.ones((3, 1)))


def test_prediction_in_blocks_equals_the_whole_and_the_model(model, base):
    """`predict` builds the regressor a block of samples at a time (its memory does not grow
    with the data): the same values as in one block (BLAS may add a row's terms in another
    order for a short block: to rounding), and the model's own efforts."""
    res = ols(build_problem(model, base, synthetic(model, 300, seed=3)))
    q, qd, qdd = random_states(model, 2501, seed=4)
    whole = res.predict(model, q, qd, qdd, block=10 ** 6)
    assert whole.shape == (2501, model.n)
    scale = np.abs(whole).max()
    for block in (1000, 7):
        np.testing.assert_allclose(res.predict(model, q, qd, qdd, block=block), whole, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(res.predict(model, q[0], qd[0], qdd[0]), whole[:1], rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(whole, model.efforts(q, qd, qdd), rtol=0, atol=1e-8 * np.abs(whole).max())
