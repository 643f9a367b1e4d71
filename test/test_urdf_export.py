import numpy as np
import pinocchio as pin

from conftest import PANDA_ARM
from robot_ident.io.urdf_export import body_is_physical, write_parameters
from robot_ident.model.robot import RobotModel


def test_round_trip_keeps_mass_com_and_all_products_of_inertia(demo_urdf):
    model = RobotModel(demo_urdf)
    theta = model.nominal.copy()
    for b in model.layout.body_joints:
        I = model.body_inertia(theta, b)
        R = pin.rpy.rpyToMatrix(0.3, -0.2, 0.5)
        theta[model.layout.inertial_slice(b)] = pin.Inertia(
            I.mass * 1.1, I.lever + 0.01, R @ I.inertia @ R.T).toDynamicParameters()
    theta[model.layout.index("wrist_2.Fv")] = 0.42
    xml, report = write_parameters(model, theta)
    assert report.written == list(model.layout.body_joints) and not report.kept_cad
    again = RobotModel(xml)
    np.testing.assert_allclose(again.nominal[:60], theta[:60], atol=1e-9)
    assert again.nominal[again.layout.index("wrist_2.Fv")] == 0.42


def test_merged_fixed_links_are_not_counted_twice(panda_urdf):
    model = RobotModel(panda_urdf, PANDA_ARM)
    xml, _ = write_parameters(model, model.nominal)
    again = RobotModel(xml, PANDA_ARM)
    np.testing.assert_allclose(again.nominal[:70], model.nominal[:70], atol=1e-9)


def test_non_physical_body_keeps_cad_values(demo_urdf):
    model = RobotModel(demo_urdf)
    theta = model.nominal.copy()
    sl = model.layout.inertial_slice("elbow")
    theta[sl.start] = -1.0        # negative mass
    ok, why = body_is_physical(theta[sl])
    assert not ok and "mass" in why
    xml, report = write_parameters(model, theta)
    assert "elbow" in report.kept_cad
    np.testing.assert_allclose(RobotModel(xml).nominal[sl], model.nominal[sl])


def _physical_result(model, seed=0):
    """A physical estimate of `model` on simulated efforts (CAD +-15 %, friction, armature)."""
    from conftest import random_states
    from robot_ident.data.signals import ProcessedData
    from robot_ident.estimation import build_problem, physically_consistent
    from robot_ident.model.base import BaseParameters
    rng = np.random.default_rng(seed)
    theta = model.nominal.copy()
    ni = model.layout.n_inertial
    theta[:ni] *= 1 + 0.15 * rng.uniform(-1, 1, ni)
    theta[ni:] = rng.uniform(0.05, 0.5, theta.size - ni)
    for b in model.layout.body_joints:          # keep the perturbed bodies physical
        sl = model.layout.inertial_slice(b)
        if not body_is_physical(theta[sl]):
            theta[sl] = model.nominal[sl]
    q, qd, qdd = random_states(model, 400, seed=seed)
    tau = model.efforts(q, qd, qdd, theta)
    tau += 0.01 * np.sqrt(np.mean(tau ** 2, axis=0)) * rng.normal(size=tau.shape)
    base = BaseParameters.from_model(model, n_samples=200)
    problem = build_problem(model, base, ProcessedData(np.arange(400) * 0.01, model.joint_names, q, qd, qdd,
                                                       tau, tau))
    return physically_consistent(problem)


def _efforts_from_export(folder, q, qd, qdd) -> np.ndarray:
    """identified.urdf through Pinocchio's RNEA plus identified_joints.yaml's terms, by their
    documented formula: an independent reading of the exported model."""
    import yaml
    terms = yaml.safe_load((folder / "identified_joints.yaml").read_text())
    m = pin.buildModelFromXML((folder / "identified.urdf").read_text())
    d = m.createData()
    joints = terms["joints"]
    idx_q = [m.joints[m.getJointId(j)].idx_q for j in joints]
    idx_v = [m.joints[m.getJointId(j)].idx_v for j in joints]
    M = np.array(terms["motor_from_joint"])
    t = terms["terms"]
    par = {k: np.array([t[mo].get(k, 0.0) for mo in terms["motors"]])
           for k in ("armature", "coulomb", "viscous", "offset")}
    out = np.zeros_like(q)
    for s in range(q.shape[0]):
        qq, vv, aa = pin.neutral(m), np.zeros(m.nv), np.zeros(m.nv)
        qq[idx_q], vv[idx_v], aa[idx_v] = q[s], qd[s], qdd[s]
        rigid = pin.rnea(m, d, qq, vv, aa)[idx_v]
        mv, ma = M @ qd[s], M @ qdd[s]
        motor = (par["armature"] * ma + par["coulomb"] * np.tanh(mv / terms["coulomb_velocity_scale"])
                 + par["viscous"] * mv + par["offset"])
        out[s] = rigid + M.T @ motor
    return out


def test_identified_urdf_and_its_joint_terms_reproduce_the_result(demo_urdf, tmp_path):
    """Issue 28: a user loading identified.urdf was off by up to 16 N·m on a coupled wrist
    (the regrouped armature lived only in result.yaml's standard values). identified.urdf
    plus identified_joints.yaml now give the result's predicted efforts to 1e-6 N·m, on a
    plain arm and with a coupled wrist."""
    from conftest import random_states
    from robot_ident.io.results import write_identified_urdf
    from robot_ident.model.transmission import CoupledGroup, Transmission
    joints = ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3")
    coupled = Transmission(joints, [CoupledGroup("wrist", joints[3:], ("m4", "m5", "m6"),
                                                 np.array([[1.0, 0, 0], [-1.0, 1.0, 0], [0.5, -1.0, 1.0]]))])
    for k, tr in enumerate((None, coupled)):
        model = RobotModel(demo_urdf, transmission=tr)
        res = _physical_result(model, seed=k)
        folder = tmp_path / f"r{k}"
        folder.mkdir()
        write_identified_urdf(folder, model, res)
        q, qd, qdd = random_states(model, 50, seed=10 + k)
        want = res.predict(model, q, qd, qdd)
        got = _efforts_from_export(folder, q, qd, qdd)
        assert np.abs(got - want).max() < 1e-6, np.abs(got - want).max()
        ia = [res.standard_values[model.layout.index(f"{m}.Ia")] for m in model.transmission.motors]
        assert min(ia) > 0.01              # the armature (regrouped in the base parameters) is there
