"""A closed-chain robot in MuJoCo: the ground truth for `robot_ident.mechanisms.closed_chain`.

MuJoCo is an engine independent of Pinocchio and of the virtual-work projection: it
integrates the *whole* tree (every passive joint has its own degree of freedom) with
the loop closures as equality constraints (``connect`` between two sites, one per
closure point; ``weld`` for pose closures), solved by its constraint solver with a
stiff reference (``solref``) and impedance close to 1 (``solimp``), so the closure
violation stays at the micrometre level (reported by every run).

* bodies: the spanning-tree URDF with the true inertial parameters written in (tied
  limbs expanded to every limb), visuals and collisions dropped, contacts off, gravity on;
  joint limits are not enforced (no limit forces act on the joints);
* actuated joints: true armature, viscous damping and Coulomb friction (MuJoCo
  ``frictionloss``); passive joints frictionless;
* drive: forces on the limb slides and torques on the head joints
  (``qfrc_applied``), a 1 kHz loop of nominal-model feed-forward plus PD on the
  actuated coordinates (gains from the nominal actuated-space mass matrix);
* recording: actuated positions and velocities with noise, efforts = applied
  effort + a constant offset (sensor bias) + noise, and the exact accelerations
  MuJoCo integrated (``qacc``), for checks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import mujoco
import numpy as np
import pinocchio as pin
from scipy.interpolate import CubicSpline

from ..data.signals import Recording
from ..errors import ModelError
from ..io.urdf_export import write_parameters
from ..mechanisms.closed_chain import ClosedChainModel
from .mujoco_arm import SimNoise, _set_scalar_or_first, mujoco_ready_urdf, set_simulation_options


@dataclass
class ClosedChainRun:
    recording: Recording            # measured (noisy) signals, efforts in N / N*m
    effort_true: np.ndarray         # (N, n) effort applied by the drives (no offset, no noise)
    q_true: np.ndarray              # (N, n) actuated coordinates
    qd_true: np.ndarray
    qdd_true: np.ndarray            # MuJoCo's accelerations of the actuated joints
    effort_noise_std: np.ndarray    # (n,)
    max_violation: float            # largest closure gap [m] (or rad) over the run
    q_tree: np.ndarray              # (N, nt) MuJoCo's tree coordinates in Pinocchio order


class ClosedChainSim:
    """MuJoCo model of a closed-chain robot with chosen true parameters."""

    def __init__(self, model: ClosedChainModel, truth: np.ndarray, control_rate_hz: float = 1000.0,
                 substeps: int = 4, bandwidth_hz: float = 4.0, solref=(0.002, 1.0),
                 solimp=(0.9999, 0.99999, 0.001, 0.5, 2.0),
                 friction_solref=(0.002, 1.0), nominal: np.ndarray | None = None):
        self.model = model
        truth = np.asarray(truth, float)
        if truth.shape != (model.layout.size,):
            raise ModelError(f"true parameters have {truth.shape} entries, the layout has {model.layout.size}")
        self.truth = truth
        self.nominal = model.nominal.copy() if nominal is None else np.asarray(nominal, float)
        self.control_rate_hz, self.substeps, self.bandwidth_hz = float(control_rate_hz), int(substeps), bandwidth_hz
        urdf, report = write_parameters(model.tree, model.full_inertial(truth), only_physical=True)
        if report.kept_cad:
            raise ModelError(f"true parameters are not physical for bodies {sorted(report.kept_cad)}")
        spec = mujoco.MjSpec.from_string(mujoco_ready_urdf(urdf))
        lay = model.layout

        def value(j, s):
            return float(truth[lay.index(f"{j}.{s}")]) if s in lay.actuator_symbols else 0.0

        for j in spec.joints:
            j.armature = 0.0
            _set_scalar_or_first(j, "damping", 0.0)
            j.frictionloss = 0.0
            j.limited = mujoco.mjtLimited.mjLIMITED_FALSE
            if j.name in model.joint_names:
                j.armature = value(j.name, "Ia")
                _set_scalar_or_first(j, "damping", max(value(j.name, "Fv"), 0.0))
                j.frictionloss = max(value(j.name, "Fc"), 0.0)
                # Stiff friction-loss constraint: full Coulomb force from a few mm/s (mrad/s) on.
                j.solref_friction = list(friction_solref)
        self.offset = np.array([value(j, "off") for j in model.joint_names])
        bodies = {b.name: b for b in spec.bodies}
        for c in model.closures:
            names = []
            for side, link, point, rpy in (("a", c.link_a, c.point_a, c.rpy_a), ("b", c.link_b, c.point_b, c.rpy_b)):
                if link not in bodies:
                    raise ModelError(f"closure {c.name!r}: MuJoCo has no body {link!r}")
                R = pin.rpy.rpyToMatrix(*rpy)
                qt = pin.Quaternion(R)
                site = bodies[link].add_site(name=f"closure_{c.name}_{side}", pos=list(point),
                                             quat=[qt.w, qt.x, qt.y, qt.z])
                names.append(site.name)
            eq = spec.add_equality(name=f"closure_{c.name}",
                                   type=mujoco.mjtEq.mjEQ_CONNECT if c.kind == "position" else mujoco.mjtEq.mjEQ_WELD,
                                   objtype=mujoco.mjtObj.mjOBJ_SITE, name1=names[0], name2=names[1])
            eq.solref = list(solref)
            eq.solimp = list(solimp)
        set_simulation_options(spec, self.control_rate_hz, self.substeps)
        self.mj_model = spec.compile()
        self.mj_data = mujoco.MjData(self.mj_model)
        m = self.mj_model
        pm = model.model
        tree_names = [pm.names[i] for i in range(1, pm.njoints)]
        jid = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, nm) for nm in tree_names]
        if min(jid) < 0:
            raise ModelError("MuJoCo lost a tree joint of the URDF")
        # Pinocchio tree index -> MuJoCo addresses.
        order = np.array([pm.joints[pm.getJointId(nm)].idx_q for nm in tree_names])
        self._qadr_tree = np.empty(len(tree_names), int)
        self._dadr_tree = np.empty(len(tree_names), int)
        self._qadr_tree[order] = [m.jnt_qposadr[i] for i in jid]
        self._dadr_tree[order] = [m.jnt_dofadr[i] for i in jid]
        self._qadr = self._qadr_tree[model.ia]
        self._dadr = self._dadr_tree[model.ia]
        self._site_pairs = [(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, f"closure_{c.name}_a"),
                             mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, f"closure_{c.name}_b"))
                            for c in model.closures]

    def _gains(self, q_a0: np.ndarray):
        mdl = self.model
        q = mdl.solve_positions(q_a0)
        G = mdl.velocity_map(q)
        pm = mdl.model.copy()
        full = mdl.full_inertial(self.nominal)
        for k in range(1, pm.njoints):
            pm.inertias[k] = pin.Inertia.FromDynamicParameters(full[10 * (k - 1):10 * k])
        M = pin.crba(pm, pm.createData(), q)
        M = np.triu(M) + np.triu(M, 1).T
        lay = mdl.layout
        ia = np.array([self.nominal[lay.index(f"{j}.Ia")] if "Ia" in lay.actuator_symbols else 0.0
                       for j in mdl.joint_names])
        diag = np.diag(G.T @ M @ G) + ia
        wn = 2 * np.pi * self.bandwidth_hz
        return diag * wn ** 2, 2.0 * diag * wn

    def violation(self) -> float:
        d = self.mj_data
        return max(float(np.linalg.norm(d.site_xpos[a] - d.site_xpos[b])) for a, b in self._site_pairs)

    def run(self, trajectory, duration: float | None = None, noise: SimNoise | None = None,
            feedforward_rate_hz: float = 200.0, progress: Callable[[float], None] | None = None) -> ClosedChainRun:
        """Follow `trajectory` (actuated coordinates, `sample(t)`) from its start state."""
        noise = noise or SimNoise()
        mdl = self.model
        if tuple(getattr(trajectory, "joint_names", mdl.joint_names)) != tuple(mdl.joint_names):
            raise ModelError(f"trajectory joints {trajectory.joint_names} differ from the actuated joints "
                             f"{mdl.joint_names}")
        duration = float(trajectory.duration if duration is None else duration)
        h = 1.0 / self.control_rate_hz
        N = int(round(duration * self.control_rate_hz)) + 1
        t = np.arange(N) * h
        q_des, qd_des, qdd_des = trajectory.sample(t)
        # Feed-forward of the nominal model at a lower rate, interpolated (smooth trajectories).
        n_ff = max(4, int(round(duration * feedforward_rate_hz)) + 1)
        t_ff = np.linspace(0.0, duration, n_ff)
        ff = CubicSpline(t_ff, mdl.inverse_dynamics(*trajectory.sample(t_ff), self.nominal), axis=0)(t)
        kp, kd = self._gains(q_des[0])
        n = mdl.n
        rng = np.random.default_rng(noise.seed)
        nq_noise = rng.normal(0.0, noise.position_std, size=(N, n))
        nqd_noise = rng.normal(0.0, noise.velocity_std, size=(N, n))

        m, d = self.mj_model, self.mj_data
        mujoco.mj_resetData(m, d)
        q0 = mdl.solve_positions(q_des[0])
        d.qpos[self._qadr_tree] = q0
        d.qvel[self._dadr_tree] = mdl.velocity_map(q0) @ qd_des[0]
        mujoco.mj_forward(m, d)
        q_true, qd_true, qdd_true, tau = (np.empty((N, n)) for _ in range(4))
        q_tree = np.empty((N, mdl.nt))
        worst = 0.0
        report_every = max(1, N // 20)
        for k in range(N):
            q_true[k] = d.qpos[self._qadr]
            qd_true[k] = d.qvel[self._dadr]
            q_tree[k] = d.qpos[self._qadr_tree]
            worst = max(worst, self.violation())
            qm, qdm = q_true[k], qd_true[k]
            if noise.controller_sees_noise:
                qm, qdm = qm + nq_noise[k], qdm + nqd_noise[k]
            tau[k] = ff[k] + kp * (q_des[k] - qm) + kd * (qd_des[k] - qdm)
            d.qfrc_applied[:] = 0.0
            d.qfrc_applied[self._dadr] = tau[k]
            mujoco.mj_step(m, d)
            qdd_true[k] = d.qacc[self._dadr]      # the acceleration this state was integrated with
            for _ in range(self.substeps - 1):
                mujoco.mj_step(m, d)
            if not np.isfinite(d.qpos).all():
                raise ModelError(f"the closed-chain simulation diverged at t = {t[k]:.3f} s")
            if progress is not None and k % report_every == 0:
                progress(k / N)
        if noise.effort_abs_std is not None:
            std = np.broadcast_to(np.asarray(noise.effort_abs_std, float), (n,)).copy()
        else:
            std = noise.effort_rel_std * np.sqrt(np.mean(tau ** 2, axis=0))
        effort_meas = tau + self.offset + rng.normal(size=(N, n)) * std
        rec = Recording(t, mdl.joint_names, q_true + nq_noise, effort_meas, qd=qd_true + nqd_noise,
                        meta={"source": "robot_ident.sim.ClosedChainSim", "effort_noise_std": std.tolist(),
                              "max_closure_violation": worst})
        if progress is not None:
            progress(1.0)
        return ClosedChainRun(rec, tau, q_true, qd_true, qdd_true, std, worst, q_tree)
