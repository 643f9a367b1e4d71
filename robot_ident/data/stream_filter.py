"""`signals.process` on a segment that arrives in pieces, and a disk-backed store of
the processed samples.

Zero-phase filtering with overlap: each window of the segment is filtered with
`signals.process` (no trimming, no decimation) together with `margin` samples on both
sides, and only its middle is kept. The forward-backward Butterworth filter's
influence decays like r^k (r: the largest pole radius), so with the margin chosen for
r^margin < 1e-13 the kept samples equal the whole-segment result to round-off; at the
segment's real ends the window *is* the segment's end, with the same padding. The
trim and the decimation lattice (every `step`-th sample from `n_trim`) count from the
segment's first sample, as in `process`. A segment that ends before its first window
is processed by `process` itself.

`ProcessedStore` appends the processed samples to a temporary file and reads row
ranges back, so the processed recording does not stay in memory either.
"""
from __future__ import annotations

import math
import os
import tempfile
from typing import Callable

import numpy as np

from ..errors import SignalError
from .signals import FilterOptions, ProcessedData, Recording, butter_sos, filtered, process

DECAY = 1e-13


def filter_margin(options: FilterOptions, rate_hz: float) -> int:
    """Samples after which the low-pass's response to a sample has decayed below DECAY."""
    sos = butter_sos(options.order, options.cutoff_hz / (0.5 * rate_hz))
    r = max(float(np.max(np.abs(np.roots(s[3:])))) for s in sos)
    padlen = 3 * (2 * len(sos) + 1) * 4
    return int(math.ceil(math.log(DECAY) / math.log(r))) + padlen + 8


class SegmentFilter:
    """Processes one segment piece by piece; `sink(ProcessedData)` gets the result in order
    (views of a window's arrays: a sink that keeps them copies them, as `ProcessedStore` does)."""

    def __init__(self, options: FilterOptions, rate_hz: float, sink: Callable[[ProcessedData], None],
                 min_samples: int = 3, block: int = 20_000):
        if not options.cutoff_hz < 0.5 * rate_hz:
            raise SignalError(f"low-pass cutoff {options.cutoff_hz:g} Hz is not below the Nyquist frequency "
                              f"{0.5 * rate_hz:.6g} Hz of the recording (synchronised at {rate_hz:.6g} Hz); lower "
                              "the cutoff (--cutoff, identification.filter.cutoff_hz)")
        self.opt = options
        self.rate = rate_hz
        self.sink = sink
        self.step = 1
        if options.target_rate_hz is not None and options.target_rate_hz < rate_hz:
            self.step = max(1, int(round(rate_hz / options.target_rate_hz)))
        self.n_trim = int(round(options.trim_s * rate_hz))
        self.margin = max(filter_margin(options, rate_hz), self.n_trim + self.step + 4)
        self.block = block
        self.min_samples = min_samples
        self.window_opt = FilterOptions(options.cutoff_hz, options.order, None, 0.0, options.use_measured_velocity)
        self._parts: list[Recording] = []
        self._buf_start = 0          # segment index of the first buffered sample
        self._n = 0                  # samples received
        self._next = self.n_trim     # next segment index that may be emitted (on the lattice)
        self.emitted = 0             # processed samples given to the sink

    def add(self, piece: Recording) -> None:
        self._parts.append(piece)
        self._n += piece.n_samples
        if self._n >= max(self.min_samples, self._next + self.block + self.margin):
            self._window(final=False)

    def end(self) -> None:
        """The segment is complete: process what is left (raises SignalError like `process`)."""
        if self.emitted == 0 and self._buf_start == 0:
            data = process(self._buffer(), self.opt)
            self.emitted += data.n_samples
            self.sink(data)
        else:
            self._window(final=True)
        self._parts = []

    def _buffer(self) -> Recording:
        if len(self._parts) > 1:
            p = self._parts
            qd = None if p[0].qd is None else np.concatenate([x.qd for x in p])
            self._parts = [Recording(np.concatenate([x.t for x in p]), p[0].joint_names,
                                     np.concatenate([x.q for x in p]), np.concatenate([x.effort for x in p]),
                                     qd=qd, meta=p[0].meta)]
        return self._parts[0]

    def _window(self, final: bool) -> None:
        rec = self._buffer()
        if self.emitted == 0 and self._buf_start == 0:
            if self.opt.cutoff_hz >= 0.5 * self.rate / self.step:   # the check of `process`
                raise SignalError(f"cutoff {self.opt.cutoff_hz} Hz is not below the Nyquist frequency "
                                  f"{0.5 * self.rate / self.step:.6g} Hz of the decimated rate; lower the cutoff "
                                  "or raise target_rate_hz")
        end = self._n - self.n_trim if final else self._n - self.margin
        w0 = max(self._buf_start, self._next - self.margin)
        lo = w0 - self._buf_start
        win = Recording(rec.t[lo:], rec.joint_names, rec.q[lo:], rec.effort[lo:],
                        qd=None if rec.qd is None else rec.qd[lo:], meta=rec.meta)
        if end > self._next:
            q, qd, qdd, effort, _ = filtered(win, self.window_opt)
            idx = slice(self._next - w0, end - w0, self.step)      # views: the sink copies them
            n = len(range(self._next, end, self.step))
            self.sink(ProcessedData(win.t[idx], win.joint_names, q[idx], qd[idx], qdd[idx], effort[idx],
                                    win.effort[idx]))
            self.emitted += n
            self._next += n * self.step
        keep_from = max(self._buf_start, self._next - self.margin)
        cut = keep_from - self._buf_start
        if cut > 0:
            self._parts = [Recording(rec.t[cut:], rec.joint_names, rec.q[cut:], rec.effort[cut:],
                                     qd=None if rec.qd is None else rec.qd[cut:], meta=rec.meta)]
            self._buf_start = keep_from


class ProcessedStore:
    """Processed samples on disk (a temporary file, removed when closed): append in
    order, read row ranges back as `ProcessedData`."""

    def __init__(self, joint_names, directory=None):
        self.joint_names = tuple(joint_names)
        self.n = len(self.joint_names)
        self.width = 1 + 5 * self.n
        self._f = tempfile.TemporaryFile(prefix="robot_ident_processed_", dir=directory)
        self.n_samples = 0
        self.segment_starts: list[int] = []

    def append(self, d: ProcessedData) -> None:
        if d.joint_names != self.joint_names:
            raise SignalError(f"processed data has joints {d.joint_names}, the store {self.joint_names}")
        rows = np.column_stack([d.t, d.q, d.qd, d.qdd, d.effort, d.effort_raw]).astype("<f8")
        self._f.seek(0, 2)
        self._f.write(rows.tobytes())
        self._f.flush()                  # `read` reads the file by position, past Python's buffer
        self.n_samples += d.n_samples

    def truncate(self, n: int) -> None:
        """Keep the first `n` rows only (a segment whose processing failed part-way is taken
        back out, as the whole-recording path skips it)."""
        n = max(0, min(int(n), self.n_samples))
        self._f.truncate(n * self.width * 8)
        self.n_samples = n
        self.segment_starts = [s for s in self.segment_starts if s < n]

    def read(self, a: int, b: int) -> ProcessedData:
        rows = self._rows(a, b)
        n = self.n
        col = lambda k: rows[:, 1 + k * n:1 + (k + 1) * n]  # noqa: E731
        return ProcessedData(rows[:, 0].copy(), self.joint_names, col(0).copy(), col(1).copy(), col(2).copy(),
                             col(3).copy(), col(4).copy())

    def _rows(self, a: int, b: int) -> np.ndarray:
        """Rows a..b (clipped to the stored ones) as they are in the file: (m, width), read-only."""
        a, b = max(0, int(a)), min(self.n_samples, int(b))
        m = max(b - a, 0)
        return np.frombuffer(self._read_at(a * self.width * 8, m * self.width * 8), dtype="<f8").reshape(m, self.width)

    def _read_at(self, offset: int, size: int) -> bytes:
        """`size` bytes from `offset`, by position (pread): processes forked to read the file
        side by side (estimation/auto_cutoff.py) share no file offset with this one."""
        out = os.pread(self._f.fileno(), size, offset)
        while len(out) < size:            # a short read (a regular file gives one only past 2 GB)
            more = os.pread(self._f.fileno(), size - len(out), offset + len(out))
            if not more:
                raise SignalError(f"processed-sample file ends {size - len(out)} bytes early")
            out += more
        return out

    def times(self, a: int, b: int, chunk: int = 4000) -> np.ndarray:
        """The times of rows a..b, read `chunk` rows at a time (memory independent of b - a
        but for the times themselves)."""
        a, b = max(0, int(a)), min(self.n_samples, int(b))
        out = np.empty(max(b - a, 0))
        for c in range(a, b, chunk):
            e = min(b, c + chunk)
            out[c - a:e - a] = self._rows(c, e)[:, 0]
        return out

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
