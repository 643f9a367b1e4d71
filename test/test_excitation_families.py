"""Trajectory families: boundary conditions, derivatives, points, YAML round trip."""
import os

import numpy as np
import pytest

from robot_ident.errors import TrajectoryError
from robot_ident.excitation import (FourierTrajectory, JointMovesTrajectory, ModifiedFourierTrajectory,
                                    PolynomialTrajectory, trajectory_points)
from robot_ident.excitation.constraints import LimitReport
from robot_ident.excitation.trajectory_file import TrajectoryFile, load_trajectory, save_trajectory

J3 = ("j1", "j2", "j3")


def _fourier(seed=0):
    rng = np.random.default_rng(seed)
    return FourierTrajectory(J3, 0.2 * np.pi, rng.normal(size=3), 0.3 * rng.normal(size=(3, 5)),
                             0.3 * rng.normal(size=(3, 5)))


def _modified(seed=1):
    rng = np.random.default_rng(seed)
    return ModifiedFourierTrajectory(J3, 0.2 * np.pi, rng.normal(size=3), 0.3 * rng.normal(size=(3, 5)),
                                     0.3 * rng.normal(size=(3, 5)))


def _poly(seed=2):
    rng = np.random.default_rng(seed)
    return PolynomialTrajectory(J3, 4.0, rng.normal(size=3), 20 * rng.normal(size=(3, 2)))


def _moves():
    return JointMovesTrajectory(J3, [0.1, -0.2, 0.3], ("j1", "j1", "j3", "j2", "j3"),
                                [0.5, -0.5, 1.0, -0.7, -1.0], [1.0, 1.5, 2.0, 1.0, 0.5])


ALL = {"fourier": _fourier, "modified_fourier": _modified, "polynomial7": _poly, "joint_moves": _moves}


def test_modified_fourier_starts_and_ends_at_rest_at_start_pose():
    tr = _modified()
    q, qd, qdd = tr.sample([0.0, tr.duration])
    scale = np.abs(tr.a).sum() + np.abs(tr.b).sum()
    np.testing.assert_allclose(q, np.vstack([tr.start, tr.start]), rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(qd, 0.0, atol=1e-12 * scale)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-12 * scale)
    # ... and it is not trivially at rest in between: it really moves.
    _, qd_mid, _ = tr.sample(np.linspace(0, tr.duration, 50))
    assert np.abs(qd_mid).max() > 0.1


def test_polynomial7_boundary_conditions_exact_and_power_form():
    tr = _poly()
    q, qd, qdd = tr.sample([0.0, tr.duration])
    assert np.array_equal(q, np.vstack([tr.start, tr.start]))
    assert np.array_equal(qd, np.zeros((2, 3))) and np.array_equal(qdd, np.zeros((2, 3)))
    # Source A's form x(t) = a0 + ... + a7 t^7 describes the same curve, of degree 7.
    t = np.linspace(0, tr.duration, 9)
    pc = tr.power_coefficients()
    assert pc.shape == (3, 8) and np.all(pc[:, 7] != 0)
    for j in range(3):
        np.testing.assert_allclose(np.polyval(pc[j, ::-1], t), tr.sample(t)[0][:, j], rtol=1e-12, atol=1e-12)


def test_joint_moves_one_joint_at_a_time_rest_to_rest():
    tr = _moves()
    ends = np.concatenate([[0.0], np.cumsum(tr.durations)])
    q, qd, qdd = tr.sample(ends)
    assert np.array_equal(qd, np.zeros_like(qd)) and np.array_equal(qdd, np.zeros_like(qdd))
    expected = tr.start + np.cumsum(np.vstack([np.zeros(3), tr.displacements[:, None] * tr.joint_matrix()]), 0)
    np.testing.assert_allclose(q, expected, rtol=0, atol=1e-15)
    # Inside each move only the moving joint moves.
    for k, (t0, t1) in enumerate(zip(ends[:-1], ends[1:])):
        t = np.linspace(t0, t1, 21)[1:-1]
        _, qd_k, _ = tr.sample(t)
        j = J3.index(tr.move_joints[k])
        others = [i for i in range(3) if i != j]
        assert np.array_equal(qd_k[:, others], np.zeros((len(t), 2)))
        assert np.all(np.abs(qd_k[:, j]) > 0)


@pytest.mark.parametrize("name", list(ALL))
def test_sampled_derivatives_match_finite_differences(name):
    tr = ALL[name]()
    t = np.linspace(0.05, tr.duration - 0.05, 37)
    h = 1e-5
    q_p, qd_p, _ = tr.sample(t + h)
    q_m, qd_m, _ = tr.sample(t - h)
    _, qd, qdd = tr.sample(t)
    np.testing.assert_allclose((q_p - q_m) / (2 * h), qd, rtol=1e-6, atol=1e-6 * np.abs(qd).max())
    np.testing.assert_allclose((qd_p - qd_m) / (2 * h), qdd, rtol=1e-6, atol=1e-6 * np.abs(qdd).max())


@pytest.mark.parametrize("name", list(ALL))
def test_trajectory_points_are_samples_of_the_trajectory(name):
    tr = ALL[name]()
    msg = trajectory_points(tr, rate=20.0)
    assert msg["joint_names"] == list(J3)
    pts = msg["points"]
    times = np.array([p["time_from_start"]["sec"] + 1e-9 * p["time_from_start"]["nanosec"] for p in pts])
    assert times[0] == 0.0 and abs(times[-1] - tr.duration) < 1e-9 and np.all(np.diff(times) > 0)
    q, qd, qdd = tr.sample(times)
    k = len(pts) // 2
    np.testing.assert_allclose(pts[k]["positions"], q[k], rtol=1e-12)
    np.testing.assert_allclose(pts[k]["velocities"], qd[k], rtol=1e-12)
    np.testing.assert_allclose(pts[k]["accelerations"], qdd[k], rtol=1e-12)
    assert all(isinstance(v, float) for v in pts[k]["positions"])


def test_bad_coefficients_are_rejected_with_a_reason():
    with pytest.raises(TrajectoryError, match="start"):
        ModifiedFourierTrajectory(J3, 1.0, [0, 0], np.zeros((3, 2)), np.zeros((3, 2)))
    with pytest.raises(TrajectoryError, match="duration"):
        PolynomialTrajectory(J3, 0.0, np.zeros(3), np.zeros((3, 2)))
    with pytest.raises(TrajectoryError, match="not one of"):
        JointMovesTrajectory(J3, np.zeros(3), ("j9",), [1.0], [1.0])


@pytest.mark.parametrize("name", list(ALL))
def test_trajectory_yaml_round_trips_exactly(tmp_path, name):
    tr = ALL[name]()
    report = LimitReport(True, 0.001, 11, ({"joint": "j1", "quantity": "velocity", "limit": 2.175,
                                             "worst": 0.1 + 0.2, "time": 1.0 / 3.0, "ok": True},))
    tf = TrajectoryFile(tr, report, sampling={"point_rate": 100.0, "check_dt": 0.001},
                        criterion={"name": "cond", "cond": 1.0 / 7.0, "logdet": np.pi},
                        optimizer={"name": "slsqp", "seed": 3}, limits={"velocity": [0.1, 0.2, 0.3]})
    path = tmp_path / "traj.yaml"
    save_trajectory(path, tf)
    assert os.listdir(tmp_path) == ["traj.yaml"]          # no temporary file left behind
    back = load_trajectory(path)
    assert type(back.trajectory) is type(tr)
    for field in ("q0", "a", "b", "start", "coefficients", "displacements", "durations"):
        if hasattr(tr, field):
            assert np.array_equal(getattr(back.trajectory, field), getattr(tr, field)), field
    t = np.linspace(0, tr.duration, 101)
    for x, y in zip(back.trajectory.sample(t), tr.sample(t)):
        assert np.array_equal(x, y)
    assert back.report == report
    assert back.criterion == tf.criterion and back.sampling == tf.sampling
    assert back.to_dict() == tf.to_dict()


def test_trajectory_file_errors_name_the_problem(tmp_path):
    from robot_ident.excitation.trajectory_file import TrajectoryFile as TF
    p = tmp_path / "x.yaml"
    p.write_text("format: something_else\n")
    with pytest.raises(TrajectoryError, match="format"):
        load_trajectory(p)
    d = TF(_fourier()).to_dict()
    del d["coefficients"]["q0"]
    with pytest.raises(TrajectoryError, match="coefficients.q0"):
        TF.from_dict(d)
