"""The numbers behind each figure of the report (report/figures.py, findings.py) and the
samples file they are drawn from (io/samples.py), against values computed independently."""
import math
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from robot_ident.errors import ConfigError
from robot_ident.io.samples import decimation_stride, read_samples, sample_set, write_samples
from robot_ident.model.base import BaseParameters
from robot_ident.report import figures as F
from robot_ident.report.findings import numeric_findings, recorded_findings

ROOT = Path(__file__).resolve().parent.parent


def _friction_data(n=4000, seed=0, stribeck=0.0, noise=0.05):
    """A joint whose rigid-body part is arbitrary and whose friction is Fc tanh + Fv qd
    (plus an optional Stribeck bump the model lacks)."""
    rng = np.random.default_rng(seed)
    qd = 2.0 * np.sin(np.linspace(0, 12 * np.pi, n)) + 0.1 * rng.standard_normal(n)
    rigid = 5.0 * np.cos(np.linspace(0, 7, n)) + 1.3
    fc, fv, s = 2.0, 0.8, 0.01
    true_friction = F.friction_curve(qd, fc, fv, s) + stribeck * np.sign(qd) * np.exp(-(qd / 0.3) ** 2)
    measured = rigid + true_friction + noise * rng.standard_normal(n)
    predicted = rigid + F.friction_curve(qd, fc, fv, s)     # the identified model
    return qd, measured, predicted, np.abs(qd) > 0.05, (fc, fv, s), rigid, true_friction


def test_friction_curve_is_the_identified_model():
    qd = np.linspace(-2, 2, 9)
    np.testing.assert_allclose(F.friction_curve(qd, 3.6, 1.8, 0.01), 3.6 * np.tanh(qd / 0.01) + 1.8 * qd)


def test_friction_fit_subtracts_the_rigid_body_part_exactly():
    qd, meas, pred, moving, (fc, fv, s), rigid, _ = _friction_data()
    fit = F.friction_fit("j", qd, meas, pred, moving, fc, fv, s)
    np.testing.assert_allclose(fit.friction_effort, meas - rigid, atol=1e-12)
    np.testing.assert_allclose(fit.curve, F.friction_curve(fit.curve_qd, fc, fv, s))
    assert fit.scatter_rms == pytest.approx(0.05, rel=0.1)        # the noise we added
    assert fit.within_noise and fit.misfit_percent < 2.0


def test_an_unmodelled_stribeck_bump_is_the_worst_fit():
    good = F.friction_fit("good", *_friction_data(seed=1)[:4], 2.0, 0.8, 0.01)
    qd, meas, pred, moving, *_ = _friction_data(seed=2, stribeck=1.0)
    bad = F.friction_fit("bad", qd, meas, pred, moving, 2.0, 0.8, 0.01)
    assert not bad.within_noise and bad.misfit_percent > 5 * good.misfit_percent
    assert F.worst_friction_joint([good, bad]) == "bad"


def test_error_histogram_counts_every_sample_and_the_noise_curve_sums_to_them():
    rng = np.random.default_rng(3)
    e = 0.2 * rng.standard_normal(5000)
    h = F.error_histogram("j", e, 0.2)
    assert h.counts.sum() == 5000 == h.n
    assert h.expected.sum() == pytest.approx(5000, rel=1e-3)      # the bins cover +-4 sigma at least
    assert h.ratio == pytest.approx(1.0, abs=0.03)
    assert math.isnan(F.error_histogram("j", e, None).expected[0])


def test_coverage_histograms_count_every_sample_and_use_the_limits():
    rng = np.random.default_rng(4)
    q = rng.uniform(-1.0, 0.5, 3000)
    qd = rng.uniform(-1.5, 1.5, 3000)
    c = F.coverage("j", q, qd, -2.0, 2.0, 2.0)
    assert c.position_counts.sum() == 3000 and c.velocity_counts.sum() == 3000
    assert c.position_edges[0] == -2.0 and c.position_edges[-1] == 2.0
    assert c.range_used_percent == pytest.approx(100 * (q.max() - q.min()) / 4.0)
    assert c.peak_velocity_percent == pytest.approx(100 * np.abs(qd).max() / 2.0)
    free = F.coverage("j", q, qd, -np.inf, np.inf, np.inf)     # continuous joint: the data's own range
    assert free.position_counts.sum() == 3000 and math.isnan(free.range_used_percent)


def test_relative_std_chart_puts_the_least_determined_first():
    ps = [{"name": "a.m", "relative_std_percent": 0.1}, {"name": "b.Ixy + 0.1*c.m", "relative_std_percent": 300.0},
          {"name": "c.mx", "relative_std_percent": "inf"}, {"name": "d.Izz", "relative_std_percent": 7.0}]
    ch = F.relative_std_chart(ps)
    assert ch.least_determined(3) == [2, 1, 3]
    assert ch.n_well == 1 and ch.n_undetermined == 2
    assert ch.labels[1] == "#1 b.Ixy (+1 terms)"


def test_body_inertia_matches_pinocchio():
    rng = np.random.default_rng(5)
    for _ in range(5):
        I = pin.Inertia.Random()
        m, c, p = F.body_inertia(I.toDynamicParameters())
        assert m == pytest.approx(I.mass)
        np.testing.assert_allclose(c, I.lever, atol=1e-12)
        np.testing.assert_allclose(p, np.sort(np.linalg.eigvalsh(I.inertia)), rtol=1e-10)
    assert np.isnan(F.body_inertia(np.r_[-1.0, rng.random(9)])[1]).all()


def _values(body, inertia: pin.Inertia):
    keys = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
    return {f"{body}.{k}": float(v) for k, v in zip(keys, inertia.toDynamicParameters())}


def test_body_comparison_reports_mass_com_and_principal_changes():
    cad = pin.Inertia(2.0, np.array([0.0, 0.1, 0.0]), np.diag([0.01, 0.02, 0.03]))
    ident = pin.Inertia(2.5, np.array([0.0, 0.1, 0.02]), np.diag([0.01, 0.02, 0.03]))
    [c] = F.body_comparisons(_values("b", cad), _values("b", ident), ["b"], {"b": ["mass_max"]}, {"b.m"})
    assert c.mass_change_percent == pytest.approx(25.0)
    assert c.com_shift_mm == pytest.approx(20.0)
    np.testing.assert_allclose(c.principal_change_percent, 0.0, atol=1e-9)
    assert c.bounds_active == ["mass_max"] and c.determined == {"mass": True, "com": False, "inertia": False}


def test_determined_standard_and_cad_projection_follow_the_base_reduction():
    names = ("a.m", "a.mx", "b.m", "b.mx")
    # base: phi0 = a.m + 2 b.m, phi1 = a.mx ; b.mx unseen
    base = BaseParameters(names, np.array([0, 1]), np.array([2, 3]), np.array([[2.0, 0.0], [0.0, 0.0]]),
                          ("a.m + 2*b.m", "a.mx"), 1e-10, float("nan"))
    br = {"standard_names": list(names), "independent": [0, 1], "dependent": [2, 3],
          "beta": base.beta.tolist()}
    bp = [{"name": "a.m + 2*b.m", "value": 5.0, "relative_std_percent": 0.1},
          {"name": "a.mx", "value": 0.3, "relative_std_percent": 1.0}]
    assert F.determined_standard(br, bp) == {"a.mx"}
    bp[1]["relative_std_percent"] = 50.0
    assert F.determined_standard(br, bp) == set()
    cad = {"a.m": 1.0, "a.mx": 0.2, "b.m": 1.5, "b.mx": 9.0}
    ch = F.base_changes_by_body(cad, br, bp, ["a", "b"])
    phi = base.project(np.array([cad[n] for n in names]))
    assert ch["a"][0][1] == pytest.approx(100 * (5.0 - phi[0]) / max(5.0, abs(phi[0])))
    assert ch["a"][1][2] is False and ch["b"] == []


def test_active_bounds_are_read_wherever_they_are_and_absence_is_none():
    assert F.active_bounds({"standard_parameters": {"values": {}}}) is None
    assert F.active_bounds({"standard_parameters": {"bounds_active": {"b1": ["mass_max"], "b2": []}}}) == \
        {"b1": ["mass_max"], "b2": []}
    assert F.active_bounds({"bodies": {"b1": {"bounds_active": {"com_box": True, "mass_min": False}}}}) == \
        {"b1": ["com_box"]}


def test_trajectory_margins_of_the_shipped_excitation():
    doc = yaml.safe_load((ROOT / "config" / "demo_arm_excitation.yaml").read_text())
    rows = F.trajectory_margins(doc)
    assert len(rows) == len(doc["limit_report"]["checks"])
    for r, c in zip(rows, doc["limit_report"]["checks"]):
        assert r["ok"] and r["margin"] >= 0
        if c["quantity"] == "velocity":
            assert r["used_percent"] == pytest.approx(100 * abs(c["worst"]) / c["limit"])
            assert r["margin"] == pytest.approx(c["limit"] - abs(c["worst"]))
    shipped = F.collision_fields(doc)      # the shipped excitation was designed collision-free (issue 11)
    assert shipped["collision_report.valid"] is True and shipped["collision_report.margin"] == 0.03
    assert shipped["collision_report.closest.distance"] >= 0.03
    doc = {k: v for k, v in doc.items() if "collision" not in k}
    assert F.collision_fields(doc) == {}
    doc["limit_report"]["collision"] = {"min_distance": 0.041, "pair": ["forearm", "base"], "time": 3.2}
    assert F.collision_fields(doc) == {"limit_report.collision.min_distance": 0.041,
                                       "limit_report.collision.pair": "forearm, base",
                                       "limit_report.collision.time": 3.2}


def test_findings_read_recorded_warnings_and_see_the_numbers():
    r = {"warnings": ["warning: joint elbow: effort 30x its URDF limit (torque constant?)",
                      {"joint": "wrist_1", "message": "velocity sign flipped"}],
         "condition_number": 2.2e7,
         "base_parameters": [{"name": "a", "relative_std_percent": 150.0}, {"name": "b", "relative_std_percent": 1}],
         "standard_parameters": {"physically_consistent": {"b1": True, "b2": False}}}
    texts = [f.text for f in recorded_findings(r, None)]
    assert texts == ["joint elbow: effort 30x its URDF limit (torque constant?)", "wrist_1: velocity sign flipped"]
    found = " | ".join(f.text for f in numeric_findings(r, {"elbow": 2.5, "wrist_1": 1.0}))
    assert "condition number 2.2e+07" in found and "#0" in found and "b2" in found
    assert "elbow: validation RMS is 2.50x" in found and "wrist_1" not in found
    assert numeric_findings({"condition_number": 50.0, "base_parameters": []}, {}) == []


def test_samples_round_trip_decimated(tmp_path):
    N = 10001
    t = np.linspace(0, 10, N)
    q = np.c_[np.sin(t), np.cos(t)]
    s = sample_set(t, q * 3, q * 2.9, np.abs(q) > 0.1, q, q, q, max_samples=3000)
    assert decimation_stride(N, 3000) == 4 and s.n_samples == 2501
    write_samples(tmp_path, ["a", "b"], ["N·m", "N"], {"lower": [-1, -2], "upper": [1, 2], "velocity": [3, 4],
                                                       "effort": [5, np.inf]}, {"identification": s})
    back = read_samples(tmp_path)
    assert back.joints == ("a", "b") and back.units == ("N·m", "N") and back.limits["effort"][1] == np.inf
    b = back.sets["identification"]
    np.testing.assert_allclose(b.t, t[::4])
    np.testing.assert_allclose(b.effort, 3 * q[::4], rtol=1e-6)    # float32 storage
    assert b.moving.dtype == bool and b.stride == 4
    assert read_samples(tmp_path / "nothing") is None
    (tmp_path / "samples.npz").write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match="samples.npz"):
        read_samples(tmp_path)


def test_worst_friction_prefers_a_misfit_above_the_noise():
    qd, meas, pred, moving, *_ = _friction_data(seed=6, noise=2.0)            # big misfit %, all noise
    noisy = F.friction_fit("noisy", qd, meas, pred, moving, 2.0, 0.8, 0.01)
    qd, meas, pred, moving, *_ = _friction_data(seed=7, stribeck=0.3, noise=0.01)
    bad = F.friction_fit("bad", qd, meas, pred, moving, 2.0, 0.8, 0.01)
    assert noisy.within_noise and not bad.within_noise and noisy.misfit_percent > bad.misfit_percent
    assert F.worst_friction_joint([noisy, bad]) == "bad"


def test_a_regrouped_friction_term_is_left_out_not_drawn_wrong(tmp_path):
    from robot_ident.io.samples import Samples
    from robot_ident.report.build import build
    from robot_ident.report.inputs import ReportInputs
    qd, meas, pred, moving, *_ = _friction_data(n=500)
    two = lambda a: np.c_[a, a]
    s = sample_set(np.arange(500) * 0.005, two(meas), two(pred), two(moving), two(qd), two(qd), two(qd))
    samples = Samples(("j1", "j2"), ("N·m", "N·m"), {k: np.array([-3.0, -3.0]) * (1 if k == "lower" else -1)
                                                      for k in ("lower", "upper", "velocity", "effort")},
                      {"identification": s})
    result = {"robot": {"joints": ["j1", "j2"], "friction_model": {"blocks": ["Fc", "Fv"],
                                                                   "coulomb_velocity_scale": 0.01}},
              "base_parameters": [{"name": "j2.Fc", "value": 2.0, "std": 0.01, "relative_std_percent": 0.5}],
              "actuators": {"j1": {"Fv": {"value": 0.8, "std": 0.01}},
                            "j2": {"Fc": {"value": 2.0, "std": 0.01}, "Fv": {"value": 0.8, "std": 0.01}}}}
    d = build(ReportInputs(tmp_path, result=result, samples=samples))
    assert [f.joint for f in d.friction] == ["j2"] and d.friction_skipped == ["j1"]
    result["robot"]["friction_model"]["blocks"] = ["Fv"]          # no Coulomb term in the model: Fc = 0
    d = build(ReportInputs(tmp_path, result=result, samples=samples))
    assert [f.joint for f in d.friction] == ["j1", "j2"] and d.friction[0].coulomb == 0.0


def test_collision_pair_decisions_list_every_pair_left_out_or_reduced_with_its_reason():
    doc = {"collision": {"skipped": {"same_body": 0, "adjacent": 6,
                                     "pairs": [{"pair": "a - b", "status": "skipped", "reason": "disabled by the SRDF x"}]},
                         "reduced_margins": [{"pair": "c - d", "status": "reduced", "reason": "close by construction",
                                              "margin": 0.0116}]}}
    rows = F.collision_pair_decisions(doc)
    assert rows == [{"pair": "a - b", "status": "left out", "margin": None, "reason": "disabled by the SRDF x"},
                    {"pair": "c - d", "status": "reduced margin", "margin": 0.0116, "reason": "close by construction"}]
    assert F.collision_pair_decisions({}) == [] and F.collision_pair_decisions({"collision": {"skipped": 3}}) == []


def test_the_held_out_part_is_shaded_on_one_time_axis():
    """The identification and held-out samples of one recording go on one axis, the held-out
    windows as spans; samples of several recordings whose times restart do not."""
    from robot_ident.io.effort_plot import combined_with_holdout
    t = np.arange(0.0, 30.0, 0.01)
    held = ((t >= 10) & (t < 14)) | (t >= 25)
    e = np.column_stack([np.sin(t), np.cos(t)])
    got = combined_with_holdout(t[~held], e[~held], e[~held], t[held], e[held], e[held] + 1)
    assert got is not None
    tt, measured, predicted, spans = got
    assert np.all(np.diff(tt) > 0) and tt.size == t.size
    np.testing.assert_allclose(spans, [(10.0, 13.99), (25.0, 29.99)], atol=1e-9)
    np.testing.assert_allclose(predicted - measured, held.astype(float)[:, None] * np.ones((1, 2)))
    # a second recording's times start again at 0: they fall inside the first one's runs
    assert combined_with_holdout(t, e, e, t[:500] + 0.005, e[:500], e[:500]) is None
