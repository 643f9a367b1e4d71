"""Stage timing and progress lines on stderr for steps that take more than a second."""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager


class Progress:
    """Prints `[stage] ...` lines; percentage updates only when stderr is a terminal."""

    def __init__(self, stream=None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.timings: dict[str, float] = {}
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def _write(self, text: str) -> None:
        if not self.quiet:
            self.stream.write(text)
            self.stream.flush()

    @contextmanager
    def stage(self, name: str):
        self._write(f"[{name}] ...\n" if not self._tty else f"[{name}] ...")
        t0 = time.perf_counter()
        self._current = name
        try:
            yield self
        except BaseException:
            self._write(("\r" if self._tty else "") + f"[{name}] failed after {time.perf_counter() - t0:.2f} s\n")
            raise
        dt = time.perf_counter() - t0
        self.timings[name] = self.timings.get(name, 0.0) + dt
        self._write(("\r" if self._tty else "") + f"[{name}] done in {dt:.2f} s\n")

    def fraction(self, f: float) -> None:
        """Report progress of the current stage (0..1)."""
        if self._tty and not self.quiet:
            self._write(f"\r[{self._current}] {100 * f:5.1f} %")
