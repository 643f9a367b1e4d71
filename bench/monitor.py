"""The contact monitor (`robot-ident monitor`, issue 33 item 4): how fast and how well the
momentum observer sees a push, how often it cries wolf, and what an update costs.

1. push: the demo arm (urdf/demo_arm.urdf, config/demo_arm.yaml, the 10 s trajectory
   config/demo_arm_excitation.yaml) simulated in MuJoCo at 1 kHz and written as
   `robot-ident simulate` writes it (/joint_states 500 Hz, /dynamic_joint_states 1 kHz);
   the model identified with the defaults (the config's method, physical) from one clean
   10 s run (noise seed 0). Then R repetitions of the trajectory (seed 1) with one push
   per repetition: a force at a link's centre of mass (as `simulate --push`) for PUSH_S,
   aimed by a small LP so that one joint is the most affected (the largest peak external
   torque over its band) and scaled so that its peak is m x the band the monitor reports
   after its calibration (that of the same run without pushes: the first 5 s are the
   same). Pushes start after the calibration, in a window where the joint moves faster
   than 2 x the dead band (0.05 rad/s) throughout. Per push: latency (first event start
   on that joint minus the push start), recovery (median of |r - tau_true| / |tau_true|
   from 3 / gain after the start to the end), the other joints flagged. Targets: a 3x-band
   push detected within 20 ms, recovered within 10 %. Also the smallest m detected per joint.
2. clean: the same R repetitions without pushes, monitored with the default settings:
   events per hour watched (target 0), each event with its cause (phase in the trajectory,
   speed, the observer's peak recomputed with the true velocity), and the observer's RMS
   after the calibration against the RMS it was calibrated on.
3. real: the four public logs (bench/real_logs.py; --data), identified with the defaults,
   then monitored on the validation recording (KUKA, UR10e) or on the identification
   recording itself (Panda, TX40: in-sample). They hold no contact: every event is a false
   alarm. Each event is printed with the joint's speed and the time to its nearest
   velocity reversal, and the health level and findings. The KUKA runs lose their last
   0.5 s, the transient of their authors' forward-backward filter (bench/real_logs.py;
   --keep-edges keeps them).
4. cost: MomentumObserver.update + ContactDetector.update on 10 s of 1 kHz demo-arm data in
   one batch and in batches of 50, 10 and 1 samples (the node updates per callback);
   target < 0.2 ms per sample. FrictionSlack and ModelHealth are shown beside them.

    python bench/monitor.py [--data REAL_LOGS] [--parts push clean real cost] [--quick] [--minutes 10]

--quick: 3 minutes of data, m in 2, 3, 5. Scratch files go to a temporary folder (printed).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

URDF, CONFIG, TRAJ = ROOT / "urdf" / "demo_arm.urdf", ROOT / "config" / "demo_arm.yaml", \
    ROOT / "config" / "demo_arm_excitation.yaml"
PUSH_S = 0.3          # s, each push's length
MARGIN_S = 0.03       # s, kept outside the dead band after a push
PRE_S = 0.2           # s, the joint moves one way before a push: right after a reversal the friction
# slack (2 Fc, fading over 50 ms) hides a push for up to 120 ms (shoulder_lift: 2 Fc = 5.4 bands)
OTHERS_MAX = 0.5      # the LP's worst other joint (peak over band, relative to the pushed joint's)
M_FULL = (1.5, 2.0, 2.5, 3.0, 4.0, 5.0)
M_QUICK = (2.0, 3.0, 5.0)


def quiet(_line: str) -> None:
    """Identification notes are not what this bench measures."""


# ----------------------------------------------------------------------- the simulated arm
def demo_setup(work: Path):
    """The simulated demo arm (as offline/bag_workflow._simulate builds it) and a result
    folder identified with the defaults from one clean 10 s run (noise seed 0)."""
    from robot_ident.estimation.pipeline import identification_config
    from robot_ident.excitation.trajectory_file import load_trajectory
    from robot_ident.io.config import load_config
    from robot_ident.io.model_loading import load_model
    from robot_ident.io.urdf_export import write_parameters
    from robot_ident.model.robot import RobotModel
    from robot_ident.offline.inputs import identify_inputs
    from robot_ident.sim.config import simulation_config

    cfg = load_config(CONFIG)
    cad = load_model(URDF, cfg, identification_config(cfg.section("identification")))
    sim = simulation_config(cfg.section("simulation"), cad)
    traj = load_trajectory(TRAJ).trajectory
    truth_urdf, _ = write_parameters(cad, sim.truth_parameters(cad))
    order = [cad.joint_names.index(j) for j in traj.joint_names]
    truth = type(sim.truth)(*(np.asarray(a)[order] for a in (sim.truth.armature, sim.truth.coulomb,
                                                              sim.truth.viscous, sim.truth.offset)))
    nominal = RobotModel(cad.urdf_xml, traj.joint_names, transmission=cad.transmission)
    arm = push_arm_class()(truth_urdf, traj.joint_names, truth, nominal=nominal, transmission=cad.transmission)
    demo = {"cfg": cfg, "sim": sim, "traj": traj, "arm": arm, "work": work}
    first = simulate(demo, 1, sim.noise.seed, [], work / "ident_bag")
    o = identify_inputs([str(work / "ident_bag")], URDF, CONFIG, work / "result", plots=False, warn=quiet)
    settings = yaml.safe_load((work / "result" / "result.yaml").read_text()).get("settings") or {}
    demo.update(result=work / "result", ident_run=first, dead=float(settings.get("moving_threshold", 0.05)))
    v = o.validation
    print(f"model: {o.result.method} (the config's, the default) from one clean 10 s run (seed {sim.noise.seed}); "
          "held-out RMS " + ", ".join(f"{j} {x:.3g}" for j, x in zip(v.joint_names, v.rms)))
    return demo


def push_arm_class():
    from robot_ident.sim.mujoco_arm import SimulatedArm

    class PushArm(SimulatedArm):
        """SimulatedArm whose `external` may be a list of ExternalForce (at different times)."""

        def _external(self, external):
            if not isinstance(external, (list, tuple)):
                return super()._external(external)
            import mujoco
            m, d = self.mj_model, self.mj_data
            items = []
            for e in external:
                body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, e.link)
                if body < 0:
                    raise ValueError(f"no link {e.link!r}")
                items.append((e.start, e.end, body, np.asarray(e.force, float)))

            def push(t: float) -> np.ndarray:
                d.xfrc_applied[:] = 0.0
                qfrc = np.zeros(m.nv)
                for start, end, body, force in items:
                    if start <= t < end:
                        d.xfrc_applied[body, :3] += force
                        mujoco.mj_applyFT(m, d, force, np.zeros(3), d.xipos[body].copy(), body, qfrc)
                return qfrc[self._dadr]
            return push
    return PushArm


def simulate(demo, reps: int, seed: int, pushes, out: Path):
    """R repetitions with noise seed `seed` (and `pushes`, ExternalForce list), written as a bag."""
    from robot_ident.data.bag import write_bag_from_config
    from robot_ident.excitation.repeat import Repeated
    sim = demo["sim"]
    noise = dataclasses.replace(sim.noise, seed=seed)
    run = demo["arm"].run(Repeated(demo["traj"], reps), None, noise, external=list(pushes) or None)
    write_bag_from_config(out, run.recording, demo["cfg"], current_noise_std=sim.current_noise, seed=seed)
    return run


def monitor(bag, result, out: Path, warn=quiet):
    from robot_ident.offline.monitor_workflow import monitor_bag
    o = monitor_bag(bag, result, out, warn=warn)
    z = np.load(out / "monitor.npz")
    return o, {k: z[k] for k in ("time", "external_torque", "threshold", "contact")}


# ----------------------------------------------------------------------- push design
def push_windows(traj, joints, period: float, calibration: float) -> dict:
    """Per joint: the phase (s into the trajectory) of a PUSH_S window after the calibration
    where the joint keeps one direction (from PRE_S before to MARGIN_S after) and its slowest
    speed is the highest."""
    ph = np.arange(0.0, period + 1e-9, 1e-3)
    _, qd, _ = traj.sample(ph)
    out = {}
    for j, name in enumerate(joints):
        best = None
        for s in np.arange(calibration + 0.1, period - PUSH_S - 0.3, 0.01):
            a, b = np.searchsorted(ph, [s - PRE_S, s + PUSH_S + MARGIN_S])
            v = qd[a:b, j]
            if np.all(np.sign(v) == np.sign(v[0])) and (best is None or np.abs(v).min() > best[1]):
                best = (float(s), float(np.abs(v).min()))
        out[name] = best
    return out


def design_force(arm, traj, j: int, phase: float, band: np.ndarray):
    """(link, unit force (3,), least of the pushed joint's torque over its band in the window per
    unit force (so a push of m times that is at least m bands throughout),
    worst other joint relative to it) for a push on joint j from `phase`: over the window's
    configurations, the force at a link's centre of mass with J_j F / b_j >= 1 throughout and
    the least max_i |J_i F| / b_i of the others (an LP); among the links whose optimum keeps
    the others below OTHERS_MAX, the one needing the least force."""
    import mujoco
    from scipy.optimize import linprog
    m = arm.mj_model
    d = mujoco.MjData(m)
    qs = traj.sample(np.linspace(phase, phase + PUSH_S, 31))[0]
    n = len(band)
    cands = []
    for body in range(1, m.nbody):
        J = np.empty((len(qs), 3, n))
        for k, q in enumerate(qs):
            d.qpos[arm._qadr] = q
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mujoco.mj_jacBodyCom(m, d, jp, jr, body)
            J[k] = jp[:, arm._dadr]
        if np.abs(J[:, :, j]).max() < 1e-6:
            continue
        A, ub = [], []
        for Jt in J:
            A.append([*(-Jt[:, j] / band[j]), 0.0])
            ub.append(-1.0)
            for i in range(n):
                if i != j:
                    A.append([*(Jt[:, i] / band[i]), -1.0])
                    A.append([*(-Jt[:, i] / band[i]), -1.0])
                    ub += [0.0, 0.0]
        r = linprog([0, 0, 0, 1], A_ub=np.array(A), b_ub=np.array(ub), bounds=[(None, None)] * 3 + [(0, None)])
        if r.status != 0:
            continue
        F = r.x[:3]
        tq = np.einsum("tkn,k->tn", J, F) / band
        peak = float(np.abs(tq[:, j]).max())
        low = float(np.abs(tq[:, j]).min())
        others = float(np.delete(np.abs(tq), j, axis=1).max() / peak) if n > 1 else 0.0
        cands.append((mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, body), F / np.linalg.norm(F),
                      low / np.linalg.norm(F), others, np.linalg.norm(F) / low))
    ok = [c for c in cands if c[3] <= OTHERS_MAX]
    best = min(ok, key=lambda c: c[4]) if ok else min(cands, key=lambda c: c[3])
    return best[:4]


# ----------------------------------------------------------------------- 1 and 2
def pushes_and_clean(demo, parts, minutes: float, m_values, seed: int) -> None:
    """The clean run (part 2, and the band the pushes are sized by) and the push run (part 1):
    as many repetitions as `minutes` asks, at least one per push."""
    work, traj = demo["work"], demo["traj"]
    joints = list(traj.joint_names)
    period = float(traj.duration)
    n_push = len(m_values) * len(joints) if "push" in parts else 0
    reps = max(math.ceil(minutes * 60 / period), n_push)
    t0 = time.perf_counter()
    clean = simulate(demo, reps, seed, [], work / "clean_bag")
    oc, zc = monitor(work / "clean_bag", demo["result"], work / "clean_mon")
    band = np.array([oc.band[j] for j in joints])
    wall_clean = time.perf_counter() - t0
    if "push" in parts:
        push_part(demo, reps, seed, band, m_values, zc)
    if "clean" in parts:
        clean_part(demo, reps, seed, oc, zc, clean, band, wall_clean)


def push_part(demo, reps, seed, band, m_values, zc) -> None:
    from robot_ident.monitor.observer import (
        DEFAULT_CALIBRATION_S as calibration,
    )
    from robot_ident.monitor.observer import DEFAULT_GAIN as gain
    from robot_ident.monitor.observer import DEFAULT_THRESHOLD as threshold
    from robot_ident.sim.mujoco_arm import ExternalForce
    work, traj, arm = demo["work"], demo["traj"], demo["arm"]
    joints = list(traj.joint_names)
    period = float(traj.duration)
    windows = push_windows(traj, joints, period, calibration)
    design = {}
    print(f"\n1. Pushes: demo arm, 1 kHz, {reps} x {period:g} s (seed {seed}), one {PUSH_S:g} s push per repetition "
          "at a link's centre of mass; band = the monitor's after calibration")
    print(f"   {'joint':<14}{'band':>9}{'window (s)':>13}{'min |qd|':>10}  {'link':<7}{'force dir (world)':<22}"
          f"{'N per band':>11}{'others':>8}")
    for j, name in enumerate(joints):
        if windows[name] is None:
            print(f"   {name:<14} no window outside the dead band after the calibration")
            continue
        phase, vmin = windows[name]
        link, u, per_n, others = design_force(arm, traj, j, phase, band)
        design[name] = (phase, link, u, per_n)
        print(f"   {name:<14}{band[j]:>9.4g}{phase:>6.2f}-{phase + PUSH_S:<6.2f}{vmin:>10.3f}  {link:<7}"
              f"{'[' + ', '.join(f'{x:+.2f}' for x in u) + ']':<22}{1.0 / per_n:>11.3g}{others:>8.2f}")
    cases = [(name, mv) for mv in m_values for name in joints if name in design]
    forces = []
    for k, (name, mv) in enumerate(cases):
        phase, link, u, per_n = design[name]
        start = k * period + phase
        forces.append(ExternalForce(link, tuple(float(x) for x in u * mv / per_n), start, start + PUSH_S))
    t0 = time.perf_counter()
    run = simulate(demo, reps, seed, forces, work / "push_bag")
    op, zp = monitor(work / "push_bag", demo["result"], work / "push_mon")
    bandp = np.array([op.band[j] for j in joints])
    print(f"   (simulated and monitored in {time.perf_counter() - t0:.0f} s; band of the push run / clean run: "
          f"{' '.join(f'{x:.4f}' for x in bandp / band)})")
    t_sim = run.recording.t
    t, r = zp["time"], zp["external_torque"]
    settle = 3.0 / gain
    rows = []
    print(f"   {'joint':<14}{'m':>5}{'m true':>8}{'most affected':>15}{'others':>8}{'min |qd|':>10}"
          f"{'latency ms':>12}{'recovery %':>12}  also flagged   (m true: the peak, at least m throughout)")
    for (name, mv), f in zip(cases, forces):
        j = joints.index(name)
        on = (t_sim >= f.start) & (t_sim < f.end)
        peak = np.abs(run.tau_external[on]).max(axis=0) / bandp
        most = int(np.argmax(peak))
        others = float(np.delete(peak, j).max() / peak[j])
        vmin = float(np.abs(run.qd_true[on, j]).min())
        dead = " DEAD BAND" if vmin <= 2 * demo["dead"] else ""
        evs = [e for e in op.events if f.start <= e.start <= f.end + settle]
        mine = [e for e in evs if e.joint == name]
        latency = (min(e.start for e in mine) - f.start) * 1e3 if mine else None
        # r at sample k is the momentum change over the step before it: the force applied at t_(k-1)
        tau = np.interp(t - 1e-3, t_sim, run.tau_external[:, j])
        sel = (t >= f.start + settle) & (t < f.end)
        rec = float(np.median(np.abs(r[sel, j] - tau[sel]) / np.abs(tau[sel]))) * 100
        also = sorted({e.joint for e in evs if e.joint != name})
        rows.append((name, mv, peak[j], latency, rec, vmin))
        print(f"   {name:<14}{mv:>5g}{peak[j]:>8.2f}{joints[most]:>15}{others:>8.2f}{vmin:>10.2f}{dead}"
              f"{'-' if latency is None else f'{latency:.0f}':>12}{rec:>12.1f}  {', '.join(also) or '-'}")
    print("   per m: detected / pushes, latency median and worst (ms), recovery median and worst (%)")
    for mv in m_values:
        sub = [x for x in rows if x[1] == mv]
        lat = [x[3] for x in sub if x[3] is not None]
        recs = [x[4] for x in sub]
        lat_s = f"{np.median(lat):.0f} / {max(lat):.0f}" if lat else "-"
        print(f"   m {mv:>4g}: detected {len(lat)}/{len(sub)}, latency {lat_s}, recovery "
              f"{np.median(recs):.1f} / {max(recs):.1f}")
    sub = [x for x in rows if x[1] == 3.0]
    if sub:
        fast = sum(1 for x in sub if x[3] is not None and x[3] <= 20)
        good = sum(1 for x in sub if x[4] <= 10)
        print(f"   target (3x band: detected within 20 ms, recovered within 10 %): {fast}/{len(sub)} joints within "
              f"20 ms, {good}/{len(sub)} within 10 %")
    print(f"   (below m = {threshold:g}, the threshold, a push is seen only where the observer's noise and the "
          "model's error add to it)")
    print("   smallest m detected per joint (of " + ", ".join(f"{x:g}" for x in m_values) + "): " + ", ".join(
        f"{name} {min((x[1] for x in rows if x[0] == name and x[3] is not None), default=None) or 'none'}"
        for name in joints if name in design))
    pushed = np.zeros(t.size, bool)
    for f in forces:
        pushed |= (t >= f.start - 0.05) & (t <= f.end + 0.1)
    away = [e for e in op.events if not pushed[np.searchsorted(t, e.start)]]
    in_clean = clean_events_in(zc, forces)
    print(f"   events away from the pushes in the push run: {len(away)}"
          + (f" ({', '.join(f'{e.joint} {e.start:.3f} s' for e in away[:6])})" if away else "")
          + f"; events of the clean run inside push windows: {len(in_clean)}")


def clean_events_in(zc, forces):
    """Start times of the clean run's contact flags inside the push windows (the same noise)."""
    t, flag = zc["time"], zc["contact"]
    out = []
    for f in forces:
        sel = (t >= f.start) & (t <= f.end + 0.015)
        if flag[sel].any():
            out.append(f.start)
    return out


def clean_part(demo, reps, seed, oc, zc, clean, band, wall) -> None:
    from robot_ident.io.result_model import load_result_model
    from robot_ident.model.momentum import MomentumModel
    from robot_ident.monitor.observer import (
        DEFAULT_CALIBRATION_S as calibration,
    )
    from robot_ident.monitor.observer import FrictionSlack, MomentumObserver
    joints = list(demo["traj"].joint_names)
    period = float(demo["traj"].duration)
    watched = oc.duration - calibration
    print(f"\n2. False alarms, clean demo arm: {reps} x {period:g} s = {oc.duration / 60:.1f} min (seed {seed}), "
          f"default settings, {oc.samples} samples (simulated and monitored in {wall:.0f} s)")
    print(f"   {len(oc.events)} event(s) in {watched / 60:.1f} min watched: "
          f"{len(oc.events) / watched * 3600:.1f} per hour (target 0); health {oc.health.get('level')}"
          + "".join(f"; {f['level']} {f['joint']}: {f['reason']}" for f in oc.health.get("findings", [])))
    doc = yaml.safe_load((demo["work"] / "clean_mon" / "events.yaml").read_text())["band"]
    rm = load_result_model(demo["result"])
    mm = MomentumModel(rm.model, rm.standard_parameters())
    rec = clean.recording
    coul = mm.coulomb()
    dead = demo["dead"]
    t, r, thr = zc["time"], zc["external_torque"], zc["threshold"]
    slack = FrictionSlack(coul, dead, 200.0).update(rec.t, rec.qd)
    model_band = np.array([doc[j]["model"] for j in joints])
    # the observer's RMS after the calibration on the samples outside the dead band (those the
    # calibration measured), over all and per second, against the calibration's
    print(f"   observer RMS outside the dead band: in the calibration (first {calibration:g} s), after it, and the "
          "worst 1 s after it (phase in the trajectory)")
    print(f"   {'joint':<14}{'model band':>11}{'band':>9}{'RMS cal.':>10}{'RMS after':>11}{'worst 1 s':>11}"
          f"{'at phase':>10}")
    for k, j in enumerate(joints):
        sel = (t >= calibration) & (slack[:t.size, k] <= 0.01 * model_band[k])
        x = r[sel, k]
        sec = np.floor(t[sel]).astype(int)
        cnt = np.bincount(sec - sec[0])
        rms_s = np.sqrt(np.bincount(sec - sec[0], x ** 2) / np.maximum(cnt, 1))
        rms_s[cnt < 200] = 0.0          # seconds mostly in the dead band
        w = int(np.argmax(rms_s))
        at = (sec[0] + w) % period
        print(f"   {j:<14}{doc[j]['model']:>11.4g}{doc[j]['band']:>9.4g}{doc[j]['observer_rms']:>10.4g}"
              f"{np.sqrt(np.mean(x ** 2)):>11.4g}{rms_s[w]:>11.4g}{at:>7.0f}-{at + 1:.0f}s")
    if oc.events:
        print("   events: joint, start (s), phase in the trajectory (s), length (ms), peak / band, |qd| at start "
              "(rad/s); direct observer on the 1 kHz recording (no bag, states at 1 kHz): peak / threshold with "
              "the measured velocity, with the true velocity")
        for e in oc.events[:20]:
            k = joints.index(e.joint)
            a, b = np.searchsorted(rec.t, [e.start - 0.5, e.start + 0.02])
            i0 = np.searchsorted(rec.t, e.start)
            peaks = []
            for qd in (rec.qd, clean.qd_true):
                obs = MomentumObserver(mm)
                rr = obs.update(rec.t[a:b], rec.q[a:b], qd[a:b], rec.effort[a:b])
                sl = FrictionSlack(coul, dead, obs.settings.gain).update(rec.t[a:b], qd[a:b])
                w = slice(i0 - a - 10, b - a)
                peaks.append(float(np.max(np.abs(rr[w, k]) / (thr[k] + sl[w, k]))))
            print(f"   {e.joint:<14}{e.start:>10.3f}{e.start % period:>8.3f}{(e.end - e.start) * 1e3:>6.0f}"
                  f"{abs(e.peak) / band[k]:>7.2f}{abs(clean.qd_true[i0, k]):>7.2f}{peaks[0]:>7.2f}{peaks[1]:>7.2f}")
        if len(oc.events) > 20:
            print(f"   ... {len(oc.events) - 20} more")
    positions_only(demo, clean, period)


def positions_only(demo, clean, period: float, reps: int = 3) -> None:
    """The first repetitions of the clean run written without joint velocities: the monitor
    differentiates the positions (`CausalVelocity`), the bag read in chunks."""
    from robot_ident.data.bag import write_bag_from_config
    from robot_ident.data.signals import Recording
    rec = clean.recording
    k = int(np.searchsorted(rec.t, reps * period)) + 1
    short = Recording(rec.t[:k], rec.joint_names, rec.q[:k], rec.effort[:k], qd=None, meta=rec.meta)
    out = demo["work"] / "noqd_bag"
    write_bag_from_config(out, short, demo["cfg"], current_noise_std=demo["sim"].current_noise)
    lines: list[str] = []
    o, _ = monitor(out, demo["result"], demo["work"] / "noqd_mon", warn=lines.append)
    starts = sorted({round(float(e.start), 3) for e in o.events})
    print(f"   the first {reps} repetitions without joint velocities in the bag (positions differentiated): "
          f"{len(o.events)} event(s) at {len(starts)} time(s)"
          + (f" ({', '.join(f'{x:g}' for x in starts[:8])} s), largest |peak| / band "
             f"{max(abs(e.peak) / o.band[e.joint] for e in o.events):.0f}" if o.events else "")
          + f"; {len(lines)} calibration warning(s)")


def health_window_ratios(npz_path, model_band, window: float | None = None) -> np.ndarray:
    """Per joint, the largest residual ratio the health check would see over `window` s
    windows ending every second after the calibration: RMS of r over the samples outside the
    friction dead band and without contact (as monitor/health.py takes them) / the band
    (the calibrated one, as the summary judges it)."""
    from robot_ident.monitor.health import HealthSettings
    from robot_ident.monitor.observer import DEFAULT_CALIBRATION_S as start
    window = HealthSettings().window_s if window is None else window
    z = np.load(npz_path)
    t, r, slack, flag = z["time"], z["external_torque"], z["friction_slack"], z["contact"]
    band = np.asarray(model_band, float)
    use = (slack <= 0.01 * band) & ~flag[:, None]
    worst = np.full(band.size, np.nan)
    for end in np.arange(start + window, t[-1] + 1e-9, 1.0) if t[-1] >= start + window else [t[-1]]:
        w = (t > end - window) & (t <= end) & (t >= start)
        n = (use & w[:, None]).sum(axis=0)
        rms = np.sqrt(((r ** 2) * (use & w[:, None])).sum(axis=0) / np.maximum(n, 1))
        worst = np.fmax(worst, np.where(n > 0, rms / band, np.nan))
    return worst


# ----------------------------------------------------------------------- 3
def real_logs(data: Path, names, work: Path) -> None:
    from real_logs import prepare

    from robot_ident.errors import RobotIdentError
    from robot_ident.monitor.observer import DEFAULT_CALIBRATION_S
    from robot_ident.offline.inputs import identify_inputs
    from robot_ident.offline.monitor_workflow import monitor_bag
    print("\n3. Real logs (no contact: every event is a false alarm), identified with the defaults, monitored with "
          "the defaults; 'from reversal': event start minus the joint's nearest velocity sign change")
    for name in names:
        p = prepare(name, data, work)
        cfg = work / f"{name}.yaml"
        cfg.write_text(yaml.safe_dump(p["config"]))
        try:
            identify_inputs(p["inputs"], p["urdf"], cfg, work / f"{name}_result", validate_inputs=p["validate"],
                            holdout=p["holdout"], plots=False, warn=quiet)
        except RobotIdentError as exc:
            print(f"   {name}: identification refused: {exc}")
            continue
        src = (p["validate"] or p["inputs"])[0]
        what = "its validation recording" if p["validate"] else "the identification recording itself (in-sample)"
        lines: list[str] = []
        try:
            o = monitor_bag(src, work / f"{name}_result", work / f"{name}_monitor", warn=lines.append)
        except Exception as exc:  # noqa: BLE001 -- printed, not hidden: that is the figure
            print(f"   {name}: MONITOR ERROR on {what}: {type(exc).__name__}: {exc}")
            continue
        watched = max(o.duration - DEFAULT_CALIBRATION_S, 0.0)
        rate = o.samples / o.duration if o.duration else float("nan")
        per_h = f"{len(o.events) / watched * 3600:.0f} per hour" if watched else "nothing watched"
        print(f"   {name}: {what}: {o.duration:.1f} s, {o.samples} samples (~{rate:.0f} Hz): {len(o.events)} event(s) "
              f"in {watched:.1f} s watched, {per_h}; health {o.health.get('level')}")
        doc = yaml.safe_load((work / f"{name}_monitor" / "events.yaml").read_text())
        bd = doc["band"]
        rdoc = yaml.safe_load((work / f"{name}_result" / "result.yaml").read_text())
        dead = (rdoc.get("settings") or {}).get("moving_threshold")
        print(f"     dead band {dead} (rad/s; the friction slack fades out up to twice it)")
        print("     band (model -> after calibration): " + ", ".join(
            f"{j} {bd[j]['model']:.3g}->{bd[j]['band']:.3g}" for j in p["joints"]))
        hw = health_window_ratios(work / f"{name}_monitor" / "monitor.npz", [bd[j]["band"] for j in p["joints"]])
        print("     health residual ratio, worst 10 s window: " + ", ".join(
            f"{j} {v:.2f}" for j, v in zip(p["joints"], hw)))
        for ln in lines:
            print(f"     {ln}")
        if o.events:
            tab = np.load(src)
            tt = tab["time"] - tab["time"][0]
            qd = tab["velocity"] if "velocity" in tab.files else np.gradient(tab["position"], tt, axis=0)
            print(f"     {'joint':<20}{'start s':>9}{'end s':>9}{'peak':>9}{'band':>8}{'peak/band':>10}"
                  f"{'qd start':>10}{'from reversal ms':>17}")
            for e in o.events[:15]:
                k = list(p["joints"]).index(e.joint)
                i = int(np.searchsorted(tt, e.start))
                flips = tt[np.flatnonzero(np.diff(np.sign(qd[:, k])) != 0)]
                to_rev = (e.start - flips[np.argmin(np.abs(flips - e.start))]) * 1e3 if flips.size else float("nan")
                b = bd[e.joint]["band"]
                print(f"     {e.joint:<20}{e.start:>9.3f}{e.end:>9.3f}{e.peak:>9.3g}{b:>8.3g}{abs(e.peak) / b:>10.2f}"
                      f"{qd[min(i, len(qd) - 1), k]:>+10.3f}{to_rev:>+17.0f}")
            if len(o.events) > 15:
                print(f"     ... {len(o.events) - 15} more")
        for f in o.health.get("findings", []):
            print(f"     health {f['level']} {f['joint']}: {f['reason']}")


# ----------------------------------------------------------------------- 4
def cost(demo) -> None:
    from robot_ident.io.result_model import load_result_model
    from robot_ident.model.momentum import MomentumModel
    from robot_ident.monitor.contact import ContactMonitor, result_band
    from robot_ident.monitor.observer import MomentumObserver
    rm = load_result_model(demo["result"])
    theta = rm.standard_parameters()
    mm = MomentumModel(rm.model, theta)
    rec = demo["ident_run"].recording
    t, q, qd, eff = rec.t, rec.q, rec.qd, rec.effort
    band, _, _ = result_band(rm.doc, rm.model.joint_names, rm.raw_rms)
    dead = demo["dead"]
    N = t.size
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n4. Update cost per sample: {N} samples (10 s at 1 kHz), demo arm ({rm.model.n} joints), one process, "
          f"best of 3 passes, load average {load:.1f} on {os.cpu_count()} CPUs; target < 0.2 ms per sample "
          "(the whole monitor)")
    print(f"   {'batch':>7}{'observer':>10}{'whole monitor':>15}   (ms per sample; the whole monitor: "
          "ContactMonitor.update -- observer, friction slack, detector, health)")
    for size in (N, 50, 10, 1):
        best = None
        for _ in range(3):           # the best of three passes: the machine is shared
            obs = MomentumObserver(mm)
            mon = ContactMonitor(rm.model, theta, band, dead_band=dead)
            tt = np.zeros(2)
            for a in range(0, N, size):
                s = slice(a, a + size)
                c0 = time.perf_counter()
                obs.update(t[s], q[s], qd[s], eff[s])
                c1 = time.perf_counter()
                mon.update(t[s], q[s], qd[s], eff[s])
                c2 = time.perf_counter()
                tt += (c1 - c0, c2 - c1)
            best = tt if best is None or tt[1] < best[1] else best
        ms = best / N * 1e3
        print(f"   {size:>7}{ms[0]:>10.4f}{ms[1]:>15.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("ROBOT_IDENT_REAL_LOGS"),
                    help="folder of the public logs (bench/real_logs.py); without it part 3 is skipped")
    ap.add_argument("--parts", nargs="+", default=["push", "clean", "real", "cost"],
                    choices=["push", "clean", "real", "cost"])
    ap.add_argument("--logs", nargs="+", default=["panda", "kuka", "ur10e", "tx40"])
    ap.add_argument("--minutes", type=float, default=None, help="clean data for part 2 (default 10; --quick 3)")
    ap.add_argument("--seed", type=int, default=1, help="noise seed of the monitored runs (the model's run: 0)")
    ap.add_argument("--quick", action="store_true", help="3 minutes, m in 2, 3, 5")
    ap.add_argument("--keep-edges", action="store_true",
                    help="the KUKA runs with their authors' filter transients (bench/real_logs.py --keep-edges)")
    args = ap.parse_args()
    if args.keep_edges:
        import real_logs as rl
        rl.KEEP_FILTER_EDGES = True
    minutes = args.minutes or (3.0 if args.quick else 10.0)
    m_values = M_QUICK if args.quick else M_FULL
    work = Path(tempfile.mkdtemp(prefix="bench_monitor_"))
    t0 = time.perf_counter()
    demo = None
    if {"push", "clean", "cost"} & set(args.parts):
        demo = demo_setup(work)
    if {"push", "clean"} & set(args.parts):
        pushes_and_clean(demo, args.parts, minutes, m_values, args.seed)
    if "real" in args.parts:
        if args.data:
            real_logs(Path(args.data), args.logs, work)
        else:
            print("\n3. Real logs: skipped (give --data or ROBOT_IDENT_REAL_LOGS; see bench/real_logs.py)")
    if "cost" in args.parts:
        cost(demo)
    print(f"\nscratch files under {work}; {time.perf_counter() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
