"""Messages a periodic publisher sent but a subscriber never got, counted from the
gaps in their header stamps.

ROS 2 messages carry no sequence number, and a subscription whose queue overflows
drops the oldest messages without telling anyone. A joint_state_broadcaster publishes
once per controller cycle, so its stamps advance by one period: a gap of k periods
means k - 1 messages were lost (or never sent: a cycle the controller skipped). The
period is the median step; a stamp at or behind the newest one seen (delivered late,
repeated, another publisher) is no step, and the next step is counted from the newest.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

GAP_FACTOR = 1.5        # a step longer than this many periods is a gap


@dataclass(frozen=True)
class Loss:
    received: int
    lost: int                   # messages missing in the gaps
    period_s: float | None      # the publisher's period (median step), None with < 3 messages
    gaps: int                   # how many gaps

    @property
    def fraction(self) -> float:
        total = self.received + self.lost
        return self.lost / total if total else 0.0

    def text(self, topic: str) -> str:
        if self.period_s is None:
            return f"{topic}: {self.received} received"
        rate = 1.0 / self.period_s
        if not self.lost:
            return f"{topic}: {self.received} received at {rate:.4g} Hz, none missing"
        return (f"{topic}: {self.received} received at {rate:.4g} Hz, {self.lost} missing "
                f"({100 * self.fraction:.3g} %, in {self.gaps} gaps of the header stamps: lost on the way, or "
                "cycles the publisher skipped)")


class StampGaps:
    """Feed each received message's stamp (ns) with `add`; `loss()` at any time."""

    def __init__(self):
        self._steps = array("q")
        self._last: int | None = None
        self.received = 0

    def add(self, stamp_ns: int | None) -> None:
        self.received += 1
        if stamp_ns is None:
            return
        s = int(stamp_ns)
        if self._last is not None:
            if s <= self._last:         # late, repeated or from another clock: not a step forward
                return
            self._steps.append(s - self._last)
        self._last = s

    def loss(self) -> Loss:
        steps = np.frombuffer(self._steps, dtype=np.int64) if len(self._steps) else np.zeros(0, np.int64)
        forward = steps[steps > 0]
        if forward.size < 2:
            return Loss(self.received, 0, None, 0)
        period = float(np.median(forward))
        gap = forward[forward > GAP_FACTOR * period]
        lost = int(np.maximum(np.rint(gap / period) - 1, 0).sum())
        return Loss(self.received, lost, period * 1e-9, int(gap.size))
