"""The HAC covariance of a compressed problem, from its rows re-read out of the processed
store (estimation/store_hac.py), against the in-memory HAC on the full rows: one run of
rows, and several runs (the identification samples a hold-out leaves)."""
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import lfilter

from robot_ident.data.signals import ProcessedData
from robot_ident.data.stream_filter import ProcessedStore
from robot_ident.estimation import (
    build_problem,
    ols,
    physically_consistent,
    uncertainty,
    wls,
)
from robot_ident.estimation.compressed import accumulate
from robot_ident.estimation.pipeline import IdentificationSettings, base_parameters
from robot_ident.estimation.store_hac import StoreRowSource
from robot_ident.estimation.uncertainty import _LaggedSums, _omega, hac_covariance
from robot_ident.model.robot import RobotModel
from robot_ident.util.blas import single_threaded_blas

ROOT = Path(__file__).resolve().parent.parent
THR, GUARD = 0.05, 0.05


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


@pytest.fixture(scope="module")
def correlated(tmp_path_factory):
    """A demo-arm trajectory whose effort noise is low-pass filtered (correlated over
    ~10 samples, as filtered currents are), in a store and in memory."""
    model = RobotModel(ROOT / "urdf" / "demo_arm.urdf")
    base = base_parameters(model, IdentificationSettings())
    rng = np.random.default_rng(11)
    N = 3000
    t = np.arange(N) * 0.005
    w = np.linspace(0.5, 1.6, model.n)
    ph = np.outer(t, w) + np.arange(model.n)
    q, qd, qdd = 0.8 * np.sin(ph), 0.8 * w * np.cos(ph), -0.8 * w ** 2 * np.sin(ph)
    tau = model.efforts(q, qd, qdd)
    noise = lfilter([0.1], [1.0, -0.9], rng.normal(size=tau.shape), axis=0) * np.linspace(0.05, 0.5, model.n)
    data = ProcessedData(t, model.joint_names, q, qd, qdd, tau + noise, tau + noise)
    store = ProcessedStore(model.joint_names, tmp_path_factory.mktemp("store"))
    for a in range(0, N, 700):                    # appended in pieces, as the stream does
        store.append(data.subset(np.arange(a, min(a + 700, N))))
    yield model, base, data, store
    store.close()


def _compressed(model, base, store, N, chunk=450, max_lag=4096):
    runs = [(store, 0, N)]
    acc, _ = accumulate(runs, model, base, THR, GUARD, chunk=chunk, plot_points=16)
    comp = acc.problem()
    comp.rows = StoreRowSource(runs, model, base, THR, GUARD, chunk=chunk, max_lag=max_lag)
    return comp


@pytest.mark.parametrize("est", [ols, wls])
def test_store_hac_equals_the_in_memory_hac(correlated, est):
    model, base, data, store = correlated
    full = build_problem(model, base, data, THR, GUARD)
    comp = _compressed(model, base, store, data.n_samples)
    with single_threaded_blas():
        a, b = est(comp), est(full)
    assert b.extra["hac_lag_samples"] > 5                     # the noise is correlated: a real bandwidth
    assert a.extra["hac_lag_samples"] == b.extra["hac_lag_samples"]
    assert "std_model" not in a.extra and "hac_lags_searched" not in a.extra
    assert rel(a.values, b.values) < 1e-9
    assert rel(a.covariance, b.covariance) < 1e-8
    assert a.extra["std_inflation_median"] == pytest.approx(b.extra["std_inflation_median"], rel=1e-8)
    assert b.extra["std_inflation_median"] > 1.5              # white-noise std would be too optimistic


def test_store_hac_of_several_runs_equals_hac_covariance_of_their_rows(correlated):
    """Row runs with a hole (a held-out block): each run's dead band is its own and the
    runs' samples follow one another in the residual series, as `uncertainty.hac_covariance`
    sees the stacked rows of the runs' problems (their samples numbered on)."""
    model, base, data, store = correlated
    runs = [(store, 0, 1100), (store, 1700, 2450), (store, 2600, 3000)]
    acc, _ = accumulate(runs, model, base, THR, GUARD, chunk=450, plot_points=16)
    comp = acc.problem()
    parts = [build_problem(model, base, store.read(a, b), THR, GUARD) for _, a, b in runs]
    offsets = np.cumsum([0] + [b - a for _, a, b in runs[:-1]])
    W, y = np.vstack([p.W for p in parts]), np.concatenate([p.y for p in parts])
    sample = np.concatenate([p.sample_of_row + o for p, o in zip(parts, offsets)])
    joint = np.concatenate([p.joint_of_row for p in parts])
    assert comp.n_rows == y.size and np.array_equal(acc.counts, np.bincount(joint, minlength=model.n))
    x = np.linalg.lstsq(W, y, rcond=None)[0]
    assert rel(ols(comp).values, x) < 1e-9
    w = np.linspace(0.5, 2.0, model.n)                      # joint weights, as wls gives
    W_w, r_w = W * w[joint][:, None], (y - W @ x) * w[joint]
    A_inv = np.linalg.inv(W_w.T @ W_w)
    ref, ref_info = hac_covariance(W_w, r_w, A_inv, sample, joint, model.n)
    got, info = StoreRowSource(runs, model, base, THR, GUARD, chunk=450).hac_covariance(x, w, A_inv, y.size)
    assert info["hac_lag_samples"] == ref_info["hac_lag_samples"] > 5
    assert info["std_inflation_median"] == pytest.approx(ref_info["std_inflation_median"], rel=1e-10)
    assert rel(got, ref) < 1e-10


def test_physical_on_the_store_equals_in_memory(correlated):
    """With the HAC covariance the physically consistent estimate on the compressed
    problem is the in-memory one (before, white std made them differ by ~1 %)."""
    model, base, data, store = correlated
    full = build_problem(model, base, data, THR, GUARD)
    comp = _compressed(model, base, store, data.n_samples)
    with single_threaded_blas():
        a, b = physically_consistent(comp), physically_consistent(full)
    assert rel(a.values, b.values) < 1e-6


def test_short_lag_search_is_reported(correlated):
    model, base, data, store = correlated
    comp = _compressed(model, base, store, data.n_samples, max_lag=3)
    a = wls(comp)
    assert a.extra["hac_lags_searched"] == 3 and a.extra["hac_lag_samples"] == 9   # 3 x the lags searched


@pytest.mark.parametrize("gathered", [8192, 50, 1])
def test_lagged_sums_in_blocks_equal_direct_sums(gathered, monkeypatch):
    """Blocks shorter than K, gathered into FFT blocks of any size (one, several, each block
    alone), give the sums over the samples written out."""
    monkeypatch.setattr(uncertainty, "LAG_BLOCK", gathered)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(257, 2)), rng.normal(size=(257, 2))
    K = 40
    s = _LaggedSums(K, 2)
    for i in range(0, 138, 23):                 # blocks shorter than K too
        s.add(a[i:i + 23], b[i:i + 23])
    s.add(a[138:], b[138:])                     # and one longer than a gathered block
    direct = np.array([[np.dot(a[:257 - k, j], b[k:, j]) for k in range(K + 1)] for j in range(2)])
    assert np.allclose(s.sum, direct, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("n_samples, lag, block", [(1000, 7, 128), (300, 0, 64), (90, 40, 16), (5, 12, 3)])
def test_bartlett_omega_equals_the_sum_over_lags(tmp_path, n_samples, lag, block):
    """Omega from the window sums equals the Bartlett-weighted sum of lagged score products
    written out, for lags longer than a block and than the series, and lag 0 (White)."""
    rng = np.random.default_rng(5)
    p = 4
    G = lfilter([0.3], [1.0, -0.8], rng.normal(size=(n_samples, p)), axis=0) + 0.2
    direct = G.T @ G
    for k in range(1, min(lag, n_samples - 1) + 1):
        C = G[:-k].T @ G[k:]
        direct += (1.0 - k / (lag + 1.0)) * (C + C.T)
    with open(tmp_path / "scores", "w+b") as f:
        f.write(G.astype("<f8").tobytes())
        got = _omega(f, n_samples, p, lag, block=block)
    assert np.allclose(got, direct, rtol=1e-12, atol=1e-12 * np.abs(direct).max())
