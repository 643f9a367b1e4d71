import numpy as np
import pytest

from robot_ident.errors import SignalError
from robot_ident.data.signals import FilterOptions, ProcessedData, Recording, lowpass, process

J = ("a", "b")


def sine_recording(rate=1000.0, T=6.0, f=0.5, noise=0.0, with_velocity=False, seed=0):
    t = np.arange(0, T, 1 / rate)
    w = 2 * np.pi * f
    q = np.stack([np.sin(w * t), 0.5 * np.cos(2 * w * t)], axis=1)
    qd = np.stack([w * np.cos(w * t), -w * np.sin(2 * w * t)], axis=1)
    rng = np.random.default_rng(seed)
    eff = 3 * q + rng.normal(0, noise, q.shape)
    return Recording(t, J, q + rng.normal(0, noise * 1e-3, q.shape), eff,
                     qd=qd if with_velocity else None), w


def test_nan_is_reported_with_joint_and_time():
    t = np.arange(5) * 0.01
    q = np.zeros((5, 2))
    q[3, 1] = np.nan
    with pytest.raises(SignalError, match=r"'b'.*t = 0\.03"):
        Recording(t, J, q, np.zeros((5, 2)))


def test_time_must_increase():
    with pytest.raises(SignalError, match="not strictly increasing at sample 2"):
        Recording(np.array([0.0, 0.1, 0.1]), J, np.zeros((3, 2)), np.zeros((3, 2)))


def test_reorder_by_name_and_missing_joint():
    rec, _ = sine_recording(T=0.5)
    r2 = rec.reorder(("b", "a"))
    assert np.array_equal(r2.q[:, 0], rec.q[:, 1])
    with pytest.raises(SignalError, match="'c'"):
        rec.reorder(("a", "c"))


@pytest.mark.parametrize("with_velocity", [False, True])
def test_derivatives_of_filtered_signal(with_velocity):
    rec, w = sine_recording(with_velocity=with_velocity)
    p = process(rec, FilterOptions(cutoff_hz=10, target_rate_hz=100, trim_s=0.5))
    assert np.allclose(np.diff(p.t), 0.01)
    qdd_true = np.stack([-w ** 2 * np.sin(w * p.t), -2 * w ** 2 * np.cos(2 * w * p.t)], axis=1)
    assert np.abs(p.qdd - qdd_true).max() < 1e-3 * np.abs(qdd_true).max()
    assert np.abs(p.effort - 3 * p.q).max() < 1e-6


def test_lowpass_removes_high_frequency_and_keeps_phase():
    t = np.arange(0, 4, 0.001)
    x = np.sin(2 * np.pi * t) + 0.5 * np.sin(2 * np.pi * 100 * t)
    y = lowpass(x[:, None], 1000.0, 10.0)[:, 0]
    inner = slice(500, -500)
    assert np.abs(y[inner] - np.sin(2 * np.pi * t[inner])).max() < 2e-3


def test_nonuniform_grid_and_bad_cutoff_are_refused():
    t = np.cumsum(np.r_[0, np.full(50, 0.001), 0.005, np.full(50, 0.001)])
    rec = Recording(t, J, np.zeros((t.size, 2)), np.zeros((t.size, 2)))
    with pytest.raises(SignalError, match="uniform time grid"):
        process(rec)
    rec2, _ = sine_recording(rate=100.0, T=3)
    with pytest.raises(SignalError, match="Nyquist"):
        process(rec2, FilterOptions(cutoff_hz=60, target_rate_hz=None))


def test_dead_band_mask_excludes_slow_samples_and_reversal_neighbourhood():
    t = np.arange(0, 2, 0.01)
    qd = np.stack([np.cos(np.pi * t), np.full_like(t, 1.0)], axis=1)   # reversal at t = 0.5, 1.5
    z = np.zeros_like(qd)
    p = ProcessedData(t, J, z, qd, z, z, z)
    m0 = p.moving_mask(0.05)
    assert m0[:, 1].all() and not m0[50, 0]
    m = p.moving_mask(0.05, reversal_guard_s=0.1)
    near = np.abs(t - 0.5) <= 0.09   # the reversal is located to within half a sample
    assert not m[near, 0].any()
    far = (np.abs(t - 0.5) > 0.11) & (np.abs(t - 1.5) > 0.11)
    assert m[far, 0].all()
