"""What a rosbag2 folder is, for every reader and writer here: the message types read and
written, the control_msgs definitions registered in rosbags' type store, the folder's
checks, opening with rosbags, its topics and the connections of the topics asked for.
(Separate from bag.py, which reads and writes recordings through bag_stream.py, so that
both import from here and not from each other.)"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import RobotIdentError

JOINT_STATE = "sensor_msgs/msg/JointState"
DYNAMIC_JOINT_STATE = "control_msgs/msg/DynamicJointState"
INTERFACE_VALUE = "control_msgs/msg/InterfaceValue"
_MSGTYPE = {"joint_state": JOINT_STATE, "dynamic_joint_state": DYNAMIC_JOINT_STATE}

# control_msgs definitions (identical in humble ... rolling).
_CONTROL_MSGS = {
    INTERFACE_VALUE: "string[] interface_names\nfloat64[] values\n",
    DYNAMIC_JOINT_STATE: ("std_msgs/Header header\nstring[] joint_names\n"
                          "control_msgs/InterfaceValue[] interface_values\n"),
}
STORAGES = ("sqlite3", "mcap")
BAG_VERSIONS = (8, 9)        # rosbag2 metadata versions written; 8 plays on Humble, 9 does not
DEFAULT_START_NS = 1_700_000_000 * 1_000_000_000   # stamps of written bags start here


class BagError(RobotIdentError):
    """A bag is missing, unreadable, lacks a topic or has a topic of the wrong type."""


def make_typestore(store: str | None = None):
    """A rosbags type store (default ROS 2 Humble) with the control_msgs types registered."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
    ts = get_typestore(Stores(store) if store else Stores.ROS2_HUMBLE)
    missing = {k: v for k, v in _CONTROL_MSGS.items() if k not in ts.types}
    if missing:
        typs = {}
        for name, text in missing.items():
            typs.update(get_types_from_msg(text, name))
        ts.register(typs)
    return ts


def _check_bag_path(path) -> Path:
    p = Path(path)
    if not p.exists():
        raise BagError(f"bag not found: {p}")
    if not p.is_dir():
        raise BagError(f"{p} is not a rosbag2 folder (give the folder that holds metadata.yaml)")
    if not (p / "metadata.yaml").is_file():
        raise BagError(f"{p} is not a rosbag2 folder: it has no metadata.yaml")
    return p


def _open(path):
    from rosbags.highlevel import AnyReader
    p = _check_bag_path(path)
    try:
        reader = AnyReader([p], default_typestore=make_typestore())
        reader.open()
    except Exception as exc:   # rosbags raises several reader errors
        raise BagError(f"cannot read bag {p}: it looks corrupt or truncated ({type(exc).__name__}: {exc})") from exc
    return reader


@dataclass(frozen=True)
class TopicInfo:
    msgtype: str
    count: int


def bag_topics(path) -> dict[str, TopicInfo]:
    """Topic -> (message type, message count) of a rosbag2 folder."""
    reader = _open(path)
    try:
        out: dict[str, TopicInfo] = {}
        for c in reader.connections:
            prev = out.get(c.topic)
            out[c.topic] = TopicInfo(c.msgtype, c.msgcount + (prev.count if prev else 0))
        return out
    finally:
        reader.close()


def select_connections(conns, path, topics: Mapping[str, tuple[str, str | None]]) -> list:
    """The connections of `topics` (topic -> (kind, interface)); a missing topic or one of
    another message type is a BagError naming the bag, the topic and what it has."""
    by_topic: dict[str, list] = {}
    for c in conns:
        by_topic.setdefault(c.topic, []).append(c)
    out = []
    for topic, (kind, _) in topics.items():
        want = _MSGTYPE[kind]
        if topic not in by_topic:
            have = ", ".join(f"{t} ({cs[0].msgtype})" for t, cs in sorted(by_topic.items())) or "none"
            raise BagError(f"bag {path} has no topic {topic!r} ({want}); its topics: {have}")
        for c in by_topic[topic]:
            if c.msgtype != want:
                raise BagError(f"topic {topic!r} in bag {path} has type {c.msgtype}, expected {want}")
        out += by_topic[topic]
    return out
