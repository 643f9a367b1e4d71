"""rosbag2 in and out, with `rosbags` (no ROS installation needed).

Reading: rosbag2 folders in either storage (sqlite3 ``.db3`` or ``.mcap``), message
definitions taken from the bag itself (`rosbags.highlevel.AnyReader`), falling back
to the ROS 2 Humble type store plus control_msgs for bags that store none.
sensor_msgs/msg/JointState and control_msgs/msg/DynamicJointState messages are read
batch by batch (`bag_stream.bag_chunks`: standard-library sqlite3, `mcap_read`, or
rosbags for other bags), decoded into `sync.JointStream` arrays by `cdr.decode`,
synchronised by `sync.synchronise`, and the currents converted to efforts by the
configured actuators.

Writing: `write_recording_bag` writes what a real arm would publish, with the real
message types: ``/joint_states`` (positions and velocities, 500 Hz by default) and the
motor currents, by default as the ``current`` interface of ``/dynamic_joint_states``
at the recording's rate, computed from the recorded effort through the *inverse*
actuator model, plus Gaussian current noise. The control_msgs types are registered
in the type store used for writing, so their definitions are stored in the bag.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .. import defaults
from ..errors import RobotIdentError
from ..model.actuation import ActuatorSet
from .bag_files import (  # noqa: F401  (BagError, make_typestore, the message types: what writers import from here)
    BAG_VERSIONS,
    DEFAULT_START_NS,
    DYNAMIC_JOINT_STATE,
    INTERFACE_VALUE,
    JOINT_STATE,
    STORAGES,
    BagError,
    make_typestore,
)
from .msgs import JointStreamCollector, dynamic_joint_state_message, joint_state_message
from .signals import Recording
from .sync import JointStream, SyncOptions, SyncResult, synchronise


# ---------------------------------------------------------------------------- read
def read_streams(path, topics: Mapping[str, tuple[str, str | None]]) -> dict[str, JointStream]:
    """Read joint topics of a bag in one pass, each topic's messages in log-time order.

    ``topics`` maps topic -> (kind, interface) with kind ``'joint_state'`` or
    ``'dynamic_joint_state'`` (interface: the DynamicJointState interface to read).
    The messages are read and decoded batch by batch by `bag_stream.bag_chunks` (the
    fast sqlite3 / MCAP readers and the vectorised CDR decoder, rosbags for other bags),
    then joined; a topic without messages is an empty stream."""
    from .bag_stream import bag_chunks, concat_streams
    parts: dict[str, list] = {t: [] for t in topics}
    for chunk in bag_chunks(path, topics):
        for t, s in chunk.items():
            parts[t].append(s)
    out = {}
    for t, (kind, interface) in topics.items():
        if not parts[t]:
            out[t] = JointStreamCollector(t, kind, interface).stream()
            continue
        s = concat_streams(parts[t])
        if s.received is not None and (np.diff(s.received) < 0).any():
            s = s.select(np.argsort(s.received, kind="stable"))   # the fast readers go in file order
        out[t] = s
    return out


def read_recordings(path, joints: Sequence[str], actuators: ActuatorSet, *,
                    joint_states_topic: str = "/joint_states",
                    current_topic: str = "/dynamic_joint_states",
                    current_kind: str = "dynamic_joint_state", current_interface: str = "current",
                    options: SyncOptions | None = None) -> SyncResult:
    """Read, synchronise and convert a bag: segments of `Recording` with joint efforts."""
    effort_field = current_interface if current_kind == "dynamic_joint_state" else "effort"
    topics = {joint_states_topic: ("joint_state", None)}
    if current_topic != joint_states_topic:
        topics[current_topic] = (current_kind, current_interface if current_kind == "dynamic_joint_state" else None)
    elif current_kind != "joint_state":
        raise BagError(f"topic {current_topic!r} cannot be both the joint states and a DynamicJointState")
    streams = read_streams(path, topics)
    acts = actuators.for_joints(joints)
    res = synchronise(streams[joint_states_topic], streams[current_topic], joints, options=options,
                      effort_field=effort_field, meta={"bag": str(path)})
    return SyncResult([acts.apply(r) for r in res.segments], res.report)


def read_recordings_from_config(path, config, options: SyncOptions | None = None) -> SyncResult:
    """`read_recordings` with the topics, interface, actuators and sync options of an
    `io.config.IdentConfig`."""
    return read_recordings(path, config.joints, config.drive,
                           joint_states_topic=config.joint_states_topic, current_topic=config.current_topic,
                           current_kind=config.current_kind, current_interface=config.current_interface,
                           options=options or config.sync)


# --------------------------------------------------------------------------- write
@dataclass
class BagWriteInfo:
    path: str
    storage: str
    topics: dict = field(default_factory=dict)   # topic -> message count
    current_noise_std: np.ndarray | None = None  # per joint, source units (A)
    start_ns: int = DEFAULT_START_NS


def _step(rec_rate: float, rate: float, label: str) -> int:
    step = int(round(rec_rate / rate))
    if step < 1 or abs(rec_rate / step - rate) > 1e-6 * rate:
        raise BagError(f"{label} {rate:g} Hz must divide the recording's rate {rec_rate:g} Hz")
    return step


def write_recording_bag(path, recording: Recording, actuators: ActuatorSet, *, storage: str = defaults.STORAGE,
                        current_source: str = "dynamic_joint_states",
                        joint_states_topic: str = "/joint_states", current_topic: str | None = None,
                        current_interface: str = "current", joint_states_rate_hz: float = 500.0,
                        current_rate_hz: float | None = None, current_noise_std=0.0, seed: int = 0,
                        version: int = defaults.BAG_VERSION,
                        start_ns: int = DEFAULT_START_NS, latency_ns: int = 200_000,
                        extra_joints: Sequence[str] = ()) -> BagWriteInfo:
    """Write `recording` as a rosbag2 folder the way a ros2_control arm publishes it.

    - joint states (positions; velocities if the recording has them) on
      `joint_states_topic` at `joint_states_rate_hz`;
    - the source values at `current_rate_hz` (default: the recording's rate):
      ``dynamic_joint_states`` -> DynamicJointState with interfaces ``position`` and
      `current_interface`, joints in reverse order (readers must match by name);
      ``joint_states_effort`` -> the JointState ``effort`` field of `current_topic`
      (the joint-state messages themselves if it is `joint_states_topic`);
      ``effort`` -> like joint_states_effort, but the values are the efforts.
    Source values are ``actuators.currents(effort) + N(0, current_noise_std)``.
    `extra_joints` are published with zeros (a bag also holds joints that are not
    identified). Header stamps start at `start_ns`; bag times lag them by `latency_ns`.
    `version` is the rosbag2 metadata version: 8 (default) is read by every ROS 2 from
    Humble on; 9 (Jazzy's newer rosbag2) is not: Humble's `ros2 bag play` rejects it.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    if version not in BAG_VERSIONS:
        raise BagError(f"unknown rosbag2 metadata version {version!r}; expected one of "
                       f"{', '.join(map(str, BAG_VERSIONS))}")
    if storage not in STORAGES:
        raise BagError(f"unknown bag storage {storage!r}; expected one of {', '.join(STORAGES)}")
    if current_source not in ("dynamic_joint_states", "joint_states_effort", "effort"):
        raise BagError(f"unknown current_source {current_source!r}")
    if current_topic is None:
        current_topic = "/dynamic_joint_states" if current_source == "dynamic_joint_states" else joint_states_topic
    if current_source == "dynamic_joint_states" and current_topic == joint_states_topic:
        raise BagError(f"the DynamicJointState topic cannot be the joint state topic {joint_states_topic!r}")
    p = Path(path)
    if p.exists():
        raise BagError(f"bag {p} exists already; choose a new folder")

    joints = recording.joint_names
    n = len(joints)
    N = recording.n_samples
    rec_rate = recording.sample_rate
    step_js = _step(rec_rate, joint_states_rate_hz, "joint state rate")
    step_cur = _step(rec_rate, current_rate_hz or rec_rate, "current rate")
    acts = ActuatorSet.direct(joints) if current_source == "effort" else actuators.for_joints(joints)
    std = np.broadcast_to(np.asarray(current_noise_std, dtype=float), (n,)).copy()
    if (std < 0).any() or not np.isfinite(std).all():
        raise BagError(f"current_noise_std must be finite and >= 0, got {current_noise_std!r}")
    rng = np.random.default_rng(seed)
    src = acts.currents(recording.effort, joints) + rng.normal(size=(N, n)) * std
    stamps = start_ns + np.round((recording.t - recording.t[0]) * 1e9).astype(np.int64)
    extra = list(extra_joints)
    all_names = list(joints) + extra
    pad = np.zeros(len(extra))
    q, qd = recording.q, recording.qd

    ts = make_typestore()
    T = ts.types
    JointState, Header, Time = T[JOINT_STATE], T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
    DJS, IV = T[DYNAMIC_JOINT_STATE], T[INTERFACE_VALUE]
    ser = ts.serialize_cdr
    counts = {joint_states_topic: 0}
    same_topic = current_source != "dynamic_joint_states" and current_topic == joint_states_topic
    if not same_topic:
        counts[current_topic] = 0
    rev = list(reversed(all_names))
    rev_idx = [all_names.index(j) for j in rev]
    try:
        kw = {"storage_plugin": StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP}
        if "version" in inspect.signature(Writer).parameters:   # required keyword since rosbags 0.11
            kw["version"] = int(version)
        with Writer(p, **kw) as w:
            c_js = w.add_connection(joint_states_topic, JOINT_STATE, typestore=ts)
            c_cur = None
            if current_source == "dynamic_joint_states":
                c_cur = w.add_connection(current_topic, DYNAMIC_JOINT_STATE, typestore=ts)
            elif not same_topic:
                c_cur = w.add_connection(current_topic, JOINT_STATE, typestore=ts)
            for k in range(N):
                s = int(stamps[k])
                if k % step_js == 0:
                    msg = joint_state_message(
                        JointState, Header, Time, s, all_names,
                        position=np.concatenate([q[k], pad]),
                        velocity=np.concatenate([qd[k], pad]) if qd is not None else (),
                        effort=np.concatenate([src[k], pad]) if same_topic else ())
                    w.write(c_js, s + latency_ns, ser(msg, JOINT_STATE))
                    counts[joint_states_topic] += 1
                if c_cur is not None and k % step_cur == 0:
                    if current_source == "dynamic_joint_states":
                        pos = np.concatenate([q[k], pad])[rev_idx]
                        cur = np.concatenate([src[k], pad])[rev_idx]
                        msg = dynamic_joint_state_message(DJS, IV, Header, Time, s, rev,
                                                          {"position": pos, current_interface: cur})
                        w.write(c_cur, s + latency_ns, ser(msg, DYNAMIC_JOINT_STATE))
                    else:
                        msg = joint_state_message(JointState, Header, Time, s, all_names,
                                                  effort=np.concatenate([src[k], pad]))
                        w.write(c_cur, s + latency_ns, ser(msg, JOINT_STATE))
                    counts[current_topic] += 1
    except RobotIdentError:
        raise
    except Exception as exc:
        raise BagError(f"cannot write bag {p}: {exc}") from exc
    return BagWriteInfo(str(p), storage, counts, std, start_ns)


def write_simulation_bag(path, result, actuators: ActuatorSet, **kwargs) -> BagWriteInfo:
    """Write a `sim.SimulationResult`'s measured recording (see `write_recording_bag`)."""
    return write_recording_bag(path, result.recording, actuators, **kwargs)


def write_bag_from_config(path, recording: Recording, config, **kwargs) -> BagWriteInfo:
    """`write_recording_bag` with the topics, source, interface and actuators of a config."""
    return write_recording_bag(path, recording.reorder(config.joints), config.drive,
                               current_source=config.current_source,
                               joint_states_topic=config.joint_states_topic,
                               current_topic=config.current_topic,
                               current_interface=config.current_interface, **kwargs)
