"""The identification node's recording window, without ROS.

`RecordingWindow` collects joint-state and current messages (rclpy or rosbags
messages, read by attribute name through `msgs.JointStreamCollector`) while the
window is open. It opens when the excitation node reports ``exciting`` or on a
manual start, and closes when the excitation ends (``done`` -> identify; ``aborted``
-> discard unless `identify_on_abort`; any other state while open -> discard) or on
a manual stop (-> identify). A window the excitation opened also closes, as if the
excitation had aborted, when `watchdog` finds its joint states stale on the wall
clock (they stopped, and with sim time the clock with them) or the excitation node
gone (no publisher of its state left): the node never records forever.

With a `bag_root`, the window writes the messages into a new rosbag2 folder under it
as they arrive (`recording_bag.BagRecorder`: bounded memory for a window of any
length, and the raw recording is on disk before any identification starts); the
node then subscribes raw (`add_raw`: the serialised message is written as is, and the
messages lost on the way are counted from the gaps in their header stamps). Without
one it collects them in memory (at most `max_messages`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..data.msgs import JointStreamCollector
from ..data.sync import JointStream
from ..errors import SignalError

IDENTIFY = "identify"
DISCARD = "discard"


@dataclass(frozen=True)
class Recorded:
    """What a closed window holds."""

    states: JointStream | None   # None when recorded to a bag
    currents: JointStream | None
    source: str                  # "excitation" or "manual"
    messages: int
    bag: Path | None = None      # the rosbag2 folder the window was recorded into
    joint_state_messages: int | None = None   # counted when recorded to a bag (states is None)
    loss: dict | None = None     # topic -> stamp_gaps.Loss, when the messages were recorded raw

    def loss_text(self) -> str:
        """'' or the per-topic counts, with the lost ones (from the gaps in the header stamps)."""
        if not self.loss:
            return ""
        return "; ".join(v.text(t) for t, v in self.loss.items())


class RecordingWindow:
    """Thread-safe: messages arrive on subscription callbacks while the identification
    runs on a worker thread."""

    def __init__(self, joint_states_topic: str, current_topic: str, current_kind: str,
                 current_interface: str | None = None, identify_on_abort: bool = False,
                 max_messages: int = 10_000_000, bag_root=None, storage: str = "mcap"):
        self.joint_states_topic = joint_states_topic
        self.current_topic = current_topic
        self.current_kind = current_kind
        self.current_interface = current_interface
        self.identify_on_abort = identify_on_abort
        self.max_messages = int(max_messages)
        self.shared_topic = current_topic == joint_states_topic
        if self.shared_topic and current_kind != "joint_state":
            raise SignalError(f"topic {current_topic!r} cannot be both the joint states and a DynamicJointState")
        self._lock = threading.Lock()
        self._source: str | None = None
        self._js: JointStreamCollector | None = None
        self._cur: JointStreamCollector | None = None
        self._count = 0
        self.dropped = 0
        self.last_excitation_state: str | None = None
        self.bag_root = None if bag_root is None else Path(bag_root)
        self.storage = storage
        self._recorder = None
        self._last_wall: float | None = None
        self._js_count = 0
        self._stale_seen: float | None = None

    @classmethod
    def from_config(cls, cfg, identify_on_abort: bool = False, bag_root=None) -> "RecordingWindow":
        return cls(cfg.joint_states_topic, cfg.current_topic, cfg.current_kind,
                   cfg.current_interface if cfg.current_kind == "dynamic_joint_state" else None,
                   identify_on_abort, bag_root=bag_root)

    # -------------------------------------------------------------- state
    @property
    def is_open(self) -> bool:
        return self._source is not None

    @property
    def source(self) -> str | None:
        return self._source

    @property
    def messages(self) -> int:
        return self._count

    def _open(self, source: str, wall: float | None = None) -> None:
        self._source = source
        self._last_wall = wall
        self._count = 0
        self._js_count = 0
        self.dropped = 0
        if self.bag_root is not None:
            from .recording_bag import BagRecorder
            stamp = datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S_%f")
            self._recorder = BagRecorder(self.bag_root / f"recording_{stamp}", self.joint_states_topic,
                                         self.current_topic, self.current_kind, self.storage)
            self._js = self._cur = None
            return
        self._js = JointStreamCollector(self.joint_states_topic, "joint_state")
        self._cur = None if self.shared_topic else JointStreamCollector(
            self.current_topic, self.current_kind, self.current_interface)

    def _close(self) -> Recorded | None:
        js, cur, src, count, recorder = self._js, self._cur, self._source, self._count, self._recorder
        self._source, self._js, self._cur, self._recorder = None, None, None, None
        if recorder is not None:
            return Recorded(None, None, src, count, recorder.close(), joint_state_messages=self._js_count,
                            loss=recorder.loss() or None)
        if js is None:
            return None
        states = js.stream()
        return Recorded(states, states if cur is None else cur.stream(), src, count)

    # ------------------------------------------------------------- events
    def on_excitation_state(self, state: str, wall: float | None = None) -> tuple[str | None, Recorded | None]:
        """The excitation node's state (`wall`: steady-clock seconds, for `watchdog`).
        Returns (IDENTIFY | DISCARD | None, recorded)."""
        with self._lock:
            prev, self.last_excitation_state = self.last_excitation_state, state
            if state == "exciting":
                if self._source is None:
                    self._open("excitation", wall)
                return None, None
            if self._source != "excitation" or prev != "exciting" and state == prev:
                return None, None
            rec = self._close()
            if state == "done" or (state == "aborted" and self.identify_on_abort):
                return IDENTIFY, rec
            return DISCARD, rec

    def start(self) -> tuple[bool, str]:
        with self._lock:
            if self._source is not None:
                return False, f"already recording (opened by {self._source})"
            self._open("manual")
            return True, "recording"

    def stop(self) -> tuple[bool, str, Recorded | None]:
        with self._lock:
            if self._source is None:
                return False, "not recording", None
            rec = self._close()
            return True, f"recorded {rec.messages} messages", rec

    def watchdog(self, wall: float, timeout: float, state_publishers: int | None = None
                 ) -> tuple[str | None, Recorded | None, str]:
        """Close a window the excitation opened when no joint state came for `timeout`
        seconds of the steady clock `wall` (counted from the opening when none came), or
        when `state_publishers` (publishers of the excitation state) is 0: the verdict of
        an abort (DISCARD, or IDENTIFY with identify_on_abort). Manual windows are left
        alone. Returns (verdict | None, recorded | None, why)."""
        with self._lock:
            if self._source != "excitation":
                return None, None, ""
            if state_publishers == 0:
                why = "the excitation node is gone (no publisher of its state)"
            elif self._last_wall is not None and wall - self._last_wall > timeout:
                # stale on two calls in a row with nothing received in between (after a stall of
                # the process its timer runs before the messages queued meanwhile)
                if self._stale_seen != self._last_wall:
                    self._stale_seen = self._last_wall
                    return None, None, ""
                why = (f"no joint state for {wall - self._last_wall:.3g} s of wall time "
                       f"(joint_state_timeout {timeout:g} s)")
            else:
                return None, None, ""
            rec = self._close()
            return (IDENTIFY if self.identify_on_abort else DISCARD), rec, why

    def add_joint_state(self, msg, received_ns: int | None = None, wall: float | None = None) -> None:
        with self._lock:
            if self._source is not None and wall is not None:
                self._last_wall = wall          # the wall-clock watchdog sees fresh joint states
            if self._recorder is not None:
                self._recorder.write_joint_state(msg, received_ns)
                self._count += 1
                self._js_count += 1
                return
            if self._js is None:
                return
            if self._count >= self.max_messages:
                self.dropped += 1
                return
            self._js.add(msg, received_ns)
            self._count += 1
            self._js_count += 1

    def add_raw(self, topic: str, data: bytes, received_ns: int, wall: float | None = None) -> None:
        """A serialised message of the joint-state or the current topic (a raw subscription):
        written to the recording bag as is. Only with a `bag_root`."""
        with self._lock:
            if topic == self.joint_states_topic and self._source is not None and wall is not None:
                self._last_wall = wall
            if self._recorder is None:
                return
            self._recorder.write_raw(topic, data, received_ns)
            self._count += 1
            if topic == self.joint_states_topic:
                self._js_count += 1

    def add_current(self, msg, received_ns: int | None = None) -> None:
        """Messages of the current topic (ignored when it is the joint-state topic: those
        arrive through `add_joint_state`)."""
        with self._lock:
            if self._recorder is not None:
                if not self.shared_topic:
                    self._recorder.write_current(msg, received_ns)
                    self._count += 1
                return
            if self._cur is None:
                return
            if self._count >= self.max_messages:
                self.dropped += 1
                return
            self._cur.add(msg, received_ns)
            self._count += 1


def empty_reason(rec: Recorded | None) -> str | None:
    """Why `rec` cannot be identified (nothing recorded), None when it can be tried."""
    if rec is None:
        return "nothing recorded yet"
    n_states = rec.joint_state_messages if rec.states is None else len(rec.states.stamps)
    if rec.messages == 0 or not n_states:
        return f"the {rec.source} window holds no joint state; nothing to identify"
    return None
