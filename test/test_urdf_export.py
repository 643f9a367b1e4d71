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
