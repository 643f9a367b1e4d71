"""Recording joint messages straight into a rosbag2 folder, as they arrive.

The identification node writes what it records to disk first (`BagRecorder`), so a
recording of any length costs no memory and nothing is lost if the identification
fails; the identification then reads the bag chunk by chunk
(`estimation.flow`). Messages are duck-typed (rclpy or rosbags messages, read by
attribute name like `data.msgs`), converted to rosbags' message classes and
serialised to CDR by rosbags; the receive time is the bag's log time.

Storage: MCAP by default -- rosbags' MCAP writer writes 1 MiB chunks to the file as
they fill, while its sqlite3 writer keeps one transaction open until the bag is
closed (a crash of the process during the recording would lose it).

`StatusProgress` turns `util.progress` updates into throttled status lines for the
node's status topic.
"""
from __future__ import annotations

import inspect
import time
from pathlib import Path
from typing import Callable

import numpy as np

from .. import defaults
from ..data.bag import DYNAMIC_JOINT_STATE, INTERFACE_VALUE, JOINT_STATE, BagError, make_typestore
from ..data.cdr import header_stamp_ns
from ..data.msgs import stamp_fields, stamp_ns
from ..data.stamp_gaps import StampGaps
from ..util.progress import Progress, format_progress


def _floats(x) -> np.ndarray:
    return np.asarray(x if x is not None else (), dtype=np.float64)


class BagRecorder:
    """A rosbag2 folder being written: `write_joint_state` / `write_current` per message,
    `close` to finish it (metadata.yaml)."""

    def __init__(self, path, joint_states_topic: str, current_topic: str, current_kind: str,
                 storage: str = "mcap"):
        from rosbags.rosbag2 import StoragePlugin, Writer
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"recording bag {self.path} exists already")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ts = make_typestore()
        T = self.ts.types
        self._JS, self._H, self._T = T[JOINT_STATE], T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
        self._DJS, self._IV = T[DYNAMIC_JOINT_STATE], T[INTERFACE_VALUE]
        kw = {"storage_plugin": StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3}
        if "version" in inspect.signature(Writer).parameters:
            kw["version"] = defaults.BAG_VERSION      # Humble plays it (see data/bag.py)
        self._writer = Writer(self.path, **kw)
        self._writer.open()
        self._js = self._writer.add_connection(joint_states_topic, JOINT_STATE, typestore=self.ts)
        self._cur = None
        self.current_kind = current_kind
        if current_topic != joint_states_topic:
            mtype = DYNAMIC_JOINT_STATE if current_kind == "dynamic_joint_state" else JOINT_STATE
            self._cur = self._writer.add_connection(current_topic, mtype, typestore=self.ts)
        self.messages = 0
        self.closed = False
        self.gaps = {joint_states_topic: StampGaps()}
        if self._cur is not None:
            self.gaps[current_topic] = StampGaps()
        self._topics = {joint_states_topic: self._js}
        if self._cur is not None:           # a current topic of its own (not the joint states' efforts)
            self._topics[current_topic] = self._cur

    def write_raw(self, topic: str, data: bytes, received_ns: int) -> None:
        """A message as the middleware delivered it (CDR, what rosbag2 stores): written as
        is, no conversion -- the subscription's whole work per message at 1 kHz."""
        conn = self._topics.get(topic)
        if conn is None:
            return
        stamp = header_stamp_ns(data)
        self.gaps[topic].add(stamp)
        self._writer.write(conn, int(received_ns), bytes(data))
        self.messages += 1

    def loss(self) -> dict:
        """topic -> `stamp_gaps.Loss` of the messages written raw."""
        return {t: g.loss() for t, g in self.gaps.items() if g.received}

    def _header(self, msg):
        sec, nanosec = stamp_fields(stamp_ns(msg))
        frame = getattr(getattr(msg, "header", None), "frame_id", "") or ""
        return self._H(stamp=self._T(sec=sec, nanosec=nanosec), frame_id=str(frame))

    def _write(self, conn, msgtype: str, m, received_ns: int | None, stamp: int) -> None:
        self._writer.write(conn, int(received_ns if received_ns is not None else stamp),
                           self.ts.serialize_cdr(m, msgtype))
        self.messages += 1

    def write_joint_state(self, msg, received_ns: int | None = None) -> None:
        m = self._JS(header=self._header(msg), name=[str(n) for n in msg.name], position=_floats(msg.position),
                     velocity=_floats(msg.velocity), effort=_floats(msg.effort))
        self._write(self._js, JOINT_STATE, m, received_ns, stamp_ns(msg))

    def write_current(self, msg, received_ns: int | None = None) -> None:
        if self._cur is None:
            return
        if self.current_kind != "dynamic_joint_state":
            m = self._JS(header=self._header(msg), name=[str(n) for n in msg.name],
                         position=_floats(msg.position), velocity=_floats(msg.velocity),
                         effort=_floats(msg.effort))
            self._write(self._cur, JOINT_STATE, m, received_ns, stamp_ns(msg))
            return
        ivs = [self._IV(interface_names=[str(i) for i in iv.interface_names], values=_floats(iv.values))
               for iv in msg.interface_values]
        m = self._DJS(header=self._header(msg), joint_names=[str(n) for n in msg.joint_names],
                      interface_values=ivs)
        self._write(self._cur, DYNAMIC_JOINT_STATE, m, received_ns, stamp_ns(msg))

    def close(self) -> Path:
        if not self.closed:
            self.closed = True
            self._writer.close()
        return self.path


class StatusProgress(Progress):
    """A quiet `Progress` whose updates become status lines ``<prefix>: [stage] 45.2 %
    120.0 kmsg/s ETA 3 s``, at most one per `interval` seconds (plus every stage start)."""

    def __init__(self, publish: Callable[[str], None], prefix: str = "identifying", interval: float = 1.0):
        self._publish, self._prefix, self._interval = publish, prefix, interval
        self._last_sent = 0.0
        self._units: dict[str, str] = {}
        super().__init__(quiet=True, on_update=self._on_update)

    def counter(self, unit: str):
        self._units[self._current] = unit
        return super().counter(unit)

    def _on_update(self, stage, fraction, rate, eta) -> None:
        now = time.monotonic()
        if now - self._last_sent < self._interval and fraction < 1.0:
            return
        self._last_sent = now
        self._publish(f"{self._prefix}: " + format_progress(stage, fraction, rate, self._units.get(stage, ""),
                                                             eta, bar=False))
