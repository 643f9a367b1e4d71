"""Which processed samples identify and which validate.

Several recordings (bags or tables) each give their own segments (a segment never
crosses a gap or a recording boundary, and is filtered on its own). `Holdout` says what
is held out of the identification, judged on the processed segments' sample times
(seconds from the start of their recording):

* ``fraction`` (default 0.2): the last fraction of all samples, in input order
  -- the old behaviour; weak when the recording ends at rest;
* ``window=(t0, t1)``: samples whose time from the start of their recording lies in
  [t0, t1] s, in every recording;
* ``every=k``: every k-th block (the k-th, 2k-th, ...), where a block is a segment,
  or, with ``block_s``, a piece of ``block_s`` seconds of a segment -- validation
  spread over the whole recording;
* whole recordings, by giving them as validation inputs (``--validate-bag``);
  then nothing else is held out unless asked.

Only one of fraction, window and every applies at a time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import ConfigError, SignalError


@dataclass(frozen=True)
class Holdout:
    fraction: float = 0.0
    window: tuple[float, float] | None = None
    every: int = 0
    block_s: float | None = None

    def __post_init__(self):
        modes = [self.fraction > 0, self.window is not None, self.every > 0]
        if sum(modes) > 1:
            raise ConfigError("hold-out: choose one of a fraction, a time window or every k-th segment")
        if not (0.0 <= self.fraction < 0.9) or not math.isfinite(self.fraction):
            raise ConfigError(f"hold-out fraction must be in [0, 0.9), got {self.fraction}")
        if self.window is not None:
            t0, t1 = (float(v) for v in self.window)
            if not (math.isfinite(t0) and math.isfinite(t1) and 0 <= t0 < t1):
                raise ConfigError(f"hold-out window must be T0:T1 seconds with 0 <= T0 < T1, got {self.window}")
        if self.every < 0 or self.every == 1:
            raise ConfigError(f"hold-out every k-th segment needs k >= 2, got {self.every}")
        if self.block_s is not None and not (self.block_s > 0 and math.isfinite(self.block_s)):
            raise ConfigError(f"hold-out block length must be positive seconds, got {self.block_s}")

    def describe(self) -> str:
        if self.window is not None:
            return f"samples {self.window[0]:g}-{self.window[1]:g} s from the start of each recording"
        if self.every:
            unit = f"{self.block_s:g} s block" if self.block_s else "segment"
            return f"every {self.every}th {unit}"
        if self.fraction > 0:
            return f"the last {100 * self.fraction:g} % of the samples"
        return "nothing"


def _blocks(t: np.ndarray, block_s: float | None) -> list[np.ndarray]:
    if not block_s:
        return [np.arange(t.size)]
    k = np.floor((t - t[0]) / block_s).astype(int)
    return [np.flatnonzero(k == i) for i in np.unique(k)]


def holdout_flags(times: Sequence[np.ndarray], holdout: Holdout) -> list[np.ndarray]:
    """Per processed segment (`times`: its samples' seconds from the start of its
    recording, segments in input order), a boolean array: True for the samples held out
    for validation. The flags depend only on the sample times, so they apply to the same
    recordings processed with another filter cutoff (the decimated grid does not depend on
    the cutoff)."""
    if not times:
        raise SignalError("no processed segment to identify from")
    flags = [np.zeros(t.size, bool) for t in times]
    count = 0
    if holdout.window is not None:
        t0, t1 = holdout.window
        for t, f in zip(times, flags):
            f[:] = (t >= t0) & (t <= t1)
    elif holdout.every:
        for t, f in zip(times, flags):
            for idx in _blocks(t, holdout.block_s):
                if idx.size < 3:            # a sliver at a segment's end: identify from it
                    continue
                count += 1
                f[idx] = count % holdout.every == 0
    elif holdout.fraction > 0:
        total = sum(t.size for t in times)
        cut = int(round((1.0 - holdout.fraction) * total))
        start = 0
        for t, f in zip(times, flags):
            f[:] = np.arange(start, start + t.size) >= cut
            start += t.size
    if all(f.all() for f in flags):
        raise SignalError(f"hold-out ({holdout.describe()}) leaves no sample to identify from")
    if (holdout.window is not None or holdout.every or holdout.fraction > 0) and not any(f.any() for f in flags):
        spans = ", ".join(f"{t[0]:.3g}-{t[-1]:.3g} s" for t in times[:4]) + (", ..." if len(times) > 4 else "")
        blocks = (f" ({count} block(s) in all)" if holdout.every else "")
        raise SignalError(f"hold-out ({holdout.describe()}) selects no sample{blocks}: the processed segments "
                          f"span {spans} of their recordings; nothing would be validated")
    return flags


def runs_of(mask: np.ndarray) -> list[tuple[int, int]]:
    """The [a, b) runs of True in a boolean array."""
    m = np.concatenate([[False], np.asarray(mask, bool), [False]]).astype(np.int8)
    d = np.diff(m)
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))
