"""PD gains of the Gazebo trajectory controller (config/controllers_gazebo.yaml), checked on MuJoCo.

In Gazebo the joint_trajectory_controller closes the loop itself: effort = p * position
error + d * velocity error, computed once per controller cycle (1 kHz) and held for the
step, with no feed-forward. Two limits follow per joint, from the demo arm's URDF along
the shipped excitation:

* tracking: without feed-forward the error is about the effort the motion needs over p,
  so p >= peak effort / TARGET_ERROR (the inverse dynamics with the URDF's <dynamics>
  friction, which Gazebo applies);
* stability of a held (explicit) PD at period h on the smallest effective inertia the
  joint sees, M_eff = 1 / (M^-1)_jj (the other joints free): p h^2 / M_eff <= 0.1 and
  d h / M_eff <= 0.4.

The rule: p = min(peak effort / TARGET_ERROR, 0.1 M_eff,min / h^2); d = min(1.4 sqrt(p
M_eff,max), 0.4 M_eff,min / h) (damping ratio about 0.7 where stability allows). Then
both gain sets -- the file's and the rule's -- drive MuJoCo (an engine independent of
Gazebo's DART; truth = the URDF with its friction) along the excitation: printed are the
peak tracking error per joint, which must stay well inside the goal's path tolerance
(0.1 rad, excitation_node's default), and the peak effort.

    python bench/gazebo_gains.py [--controllers config/controllers_gazebo.yaml]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import mujoco
import numpy as np
import pinocchio as pin
import yaml

from robot_ident.online.excitation_plan import prepare_excitation
from robot_ident.sim.mujoco_arm import JointTruth, SimulatedArm

ROOT = Path(__file__).resolve().parent.parent
H = 1e-3                 # s, the controller period (controller_manager update_rate 1000)
TARGET_ERROR = 0.01      # rad


def urdf_friction(model, joints):
    """Coulomb and viscous friction of the URDF's <dynamics> per joint."""
    import xml.etree.ElementTree as ET
    root = ET.fromstring(model.urdf_xml)
    dyn = {j.get("name"): j.find("dynamics") for j in root.iter("joint")}
    fc = np.array([float(dyn[j].get("friction", 0)) if dyn[j] is not None else 0.0 for j in joints])
    fv = np.array([float(dyn[j].get("damping", 0)) if dyn[j] is not None else 0.0 for j in joints])
    return fc, fv


def track(arm, q_des, qd_des, kp, kd):
    m, d = arm.mj_model, arm.mj_data
    mujoco.mj_resetData(m, d)
    d.qpos[arm._qadr] = q_des[0]
    mujoco.mj_forward(m, d)
    err = np.zeros_like(q_des)
    tau = np.zeros_like(q_des)
    for k in range(len(q_des)):
        q, qd = d.qpos[arm._qadr].copy(), d.qvel[arm._dadr].copy()
        err[k] = q_des[k] - q
        tau[k] = kp * (q_des[k] - q) + kd * (qd_des[k] - qd)
        d.qfrc_applied[arm._dadr] = tau[k]
        for _ in range(arm.substeps):
            mujoco.mj_step(m, d)
    finite = np.isfinite(err).all() and np.abs(err).max() < 10
    return (np.abs(err).max(0) if finite else np.full(err.shape[1], np.inf)), np.abs(tau).max(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--controllers", default=str(ROOT / "config" / "controllers_gazebo.yaml"))
    a = ap.parse_args()
    plan = prepare_excitation(ROOT / "urdf" / "demo_arm.urdf", ROOT / "config" / "demo_arm.yaml",
                              ROOT / "config" / "demo_arm_excitation.yaml")
    traj, nm = plan.trajectory, plan.model
    joints = traj.joint_names
    t = np.arange(int(traj.duration / H) + 1) * H
    q_des, qd_des, qdd_des = traj.sample(t)
    meff = np.array([1.0 / np.diag(np.linalg.inv(pin.crba(nm.model, nm.data, nm.to_pinocchio_q(q))[
        np.ix_(nm._idx_v, nm._idx_v)])) for q in q_des[::20]])
    peak = np.abs(nm.efforts(q_des, qd_des, qdd_des, nm.nominal)).max(0)
    kp = np.minimum(peak / TARGET_ERROR, 0.1 * meff.min(0) / H ** 2)
    kd = np.minimum(1.4 * np.sqrt(kp * meff.max(0)), 0.4 * meff.min(0) / H)
    fc, fv = urdf_friction(nm, joints)
    arm = SimulatedArm((ROOT / "urdf" / "demo_arm.urdf").read_text(), joints,
                       JointTruth(np.zeros(len(joints)), fc, fv, np.zeros(len(joints))))
    gains = yaml.safe_load(Path(a.controllers).read_text())["joint_trajectory_controller"]["ros__parameters"]
    gains = gains["gains"]
    file_kp = np.array([gains[j]["p"] for j in joints])
    file_kd = np.array([gains[j]["d"] for j in joints])
    print(f"{'joint':14s} {'Meff min':>9s} {'Meff max':>9s} {'peak eff':>9s} | {'rule p':>8s} {'rule d':>8s} | "
          f"{'file p':>8s} {'file d':>8s} {'p h2/M':>7s} {'d h/M':>7s}")
    for k, j in enumerate(joints):
        print(f"{j:14s} {meff[:, k].min():9.3g} {meff[:, k].max():9.3g} {peak[k]:9.3g} | {kp[k]:8.4g} "
              f"{kd[k]:8.4g} | {file_kp[k]:8.4g} {file_kd[k]:8.4g} {file_kp[k] * H ** 2 / meff[:, k].min():7.3f} "
              f"{file_kd[k] * H / meff[:, k].min():7.3f}")
    for label, p, d in (("rule", kp, kd), (Path(a.controllers).name, file_kp, file_kd)):
        err, tau = track(arm, q_des, qd_des, p, d)
        print(f"{label}: peak tracking error [rad] " + " ".join(f"{e:.4f}" for e in err)
              + "; peak effort " + " ".join(f"{v:.3g}" for v in tau))


if __name__ == "__main__":
    main()
