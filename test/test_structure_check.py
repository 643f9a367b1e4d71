"""The structure check (estimation/structure_check.py): its shares, computed from the
compressed problem's R factors, equal the same regressions on the rows; a spring term
the model lacks is named as the joint's position; a model that matches the data misses
nothing. The end-to-end cases
(gain, coupling, crossed channels, spring) are in test_faults, test_transmission and
test_spring."""
import numpy as np
import pytest
from conftest import random_states

from robot_ident.data.signals import ProcessedData
from robot_ident.estimation.compressed import CompressedAccumulator
from robot_ident.estimation.structure_check import judge_structure, structure_diagnostics


def _data(model, theta, n=3000, seed=0, spring=None, noise=0.01):
    q, qd, qdd = random_states(model, n, seed)
    tau = (model.regressor(q, qd, qdd) @ theta).reshape(n, model.n)
    rng = np.random.default_rng(seed + 1)
    tau += noise * tau.std(axis=0) * rng.standard_normal(tau.shape)
    if spring is not None:          # a spring the model lacks: k (q_j - q0)
        j, k = spring
        tau[:, j] += k * (q[:, j] - 0.2)
    return ProcessedData(np.arange(n) * 1e-3, model.joint_names, q, qd, qdd, tau, tau.copy())


def _diagnostics(model, base, data, chunks=3):
    acc = CompressedAccumulator(model, base)
    for idx in np.array_split(np.arange(data.n_samples), chunks):
        acc.add(data.subset(idx), np.ones((idx.size, model.n), bool))
    x_base = np.linalg.lstsq(acc.problem().W, acc.problem().y, rcond=None)[0]
    return structure_diagnostics(acc.R, acc.n_par, x_base, model.joint_names), base.standard_from_base(x_base)


def _share(r, cols):
    """Share of r's centred variance a least-squares fit on [1, cols] removes, on the rows."""
    one = np.ones((r.size, 1))
    left = lambda A: np.sum((r - A @ np.linalg.lstsq(A, r, rcond=None)[0]) ** 2)  # noqa: E731
    return 1.0 - left(np.column_stack([one, cols])) / left(one)


def test_shares_from_the_r_factors_equal_the_rows(model, base):
    theta = model.nominal.copy()
    data = _data(model, theta, spring=(1, 30.0))
    diag, x_std = _diagnostics(model, base, data)
    N, n = data.n_samples, model.n
    W = model.regressor(data.q, data.qd, data.qdd).reshape(N, n, -1)
    for j, d in enumerate(diag):
        r = data.effort[:, j] - W[:, j, :] @ x_std
        assert d["relative_rms"] == pytest.approx(np.sqrt(np.sum(r ** 2) / np.sum(data.effort[:, j] ** 2)),
                                                  rel=1e-8)
        assert d["explained"]["position"] == pytest.approx(_share(r, data.q[:, j:j + 1]), abs=1e-8)
        assert d["explained"]["own"] == pytest.approx(_share(r, W[:, j, :]), abs=1e-7)
        pred = W[:, j, :] @ x_std
        assert d["explained"]["gain"] == pytest.approx(_share(r, pred[:, None]), abs=1e-8)
        cad = model.rnea(data.q, data.qd, data.qdd)
        for k in range(n):
            if k != j:
                name = model.joint_names[k]
                assert d["explained"][f"effort of {name}"] == pytest.approx(_share(r, data.effort[:, k:k + 1]),
                                                                            abs=1e-8)
                assert d["explained"][f"CAD effort of {name}"] == pytest.approx(_share(r, cad[:, k:k + 1]), abs=1e-8)


def test_a_spring_the_model_lacks_is_named_and_a_matching_model_misses_nothing(model, base):
    theta = model.nominal.copy()
    diag, _ = _diagnostics(model, base, _data(model, theta))
    assert judge_structure(diag) == []
    found = judge_structure(_diagnostics(model, base, _data(model, theta, spring=(0, 20.0)))[0])
    j0 = model.joint_names[0]
    # the joint with the spring by its position; others only as disturbed by the shared fit
    assert found[0]["joint"] == j0 and found[0]["probe"] == "position" and "spring" in found[0]["cause"]
    assert all(f["probe"] == "own" for f in found[1:]), found
