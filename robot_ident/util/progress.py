"""Stage timing and progress on stderr for steps that take more than a second.

`Progress.stage(name)` prints ``[name] ...`` and ``[name] done in 1.23 s``.
Inside a stage, `fraction(f)` or a `counter(unit)` callback ``(done, total)`` report
how far it is: on a terminal a bar with percentage, rate and ETA redrawn in place
(at most 10 times a second); elsewhere (a log file) nothing until the stage ends,
whose line then carries the mean rate. `on_update(stage, fraction, rate, eta_s)`,
if given, receives every update (the identification node turns it into status text).
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable

BAR = 24


def _si(x: float) -> str:
    for div, suffix in ((1e6, " M"), (1e3, " k")):
        if abs(x) >= div:
            return f"{x / div:.1f}{suffix}"
    return f"{x:.0f} "


def format_progress(name: str, fraction: float, rate: float | None = None, unit: str = "",
                    eta_s: float | None = None, bar: bool = True) -> str:
    """``[name] [#####.....]  45.2 %  123.4 k msg/s  ETA 3 s``."""
    f = min(max(fraction, 0.0), 1.0)
    text = f"[{name}]"
    if bar:
        full = int(round(f * BAR))
        text += " [" + "#" * full + "." * (BAR - full) + "]"
    text += f" {100 * f:5.1f} %"
    if rate is not None and rate > 0:
        text += f"  {_si(rate)}{unit}/s"
    if eta_s is not None:
        text += f"  ETA {eta_s:.0f} s" if eta_s < 100 else f"  ETA {eta_s / 60:.1f} min"
    return text


class Progress:
    """Prints `[stage] ...` lines; progress bars only when stderr is a terminal."""

    def __init__(self, stream=None, quiet: bool = False,
                 on_update: Callable[[str, float, float | None, float | None], None] | None = None):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.on_update = on_update
        self.timings: dict[str, float] = {}
        self.rates: dict[str, tuple[float, str]] = {}   # stage -> (mean rate, unit) of its counter
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._current = ""
        self._t0 = time.perf_counter()
        self._last_draw = 0.0

    def _write(self, text: str) -> None:
        if not self.quiet:
            self.stream.write(text)
            self.stream.flush()

    @contextmanager
    def stage(self, name: str):
        self._write(f"[{name}] ...\n" if not self._tty else f"[{name}] ...")
        t0 = self._t0 = time.perf_counter()
        self._current = name
        self._last_draw = 0.0
        try:
            yield self
        except BaseException:
            self._write(("\r\033[K" if self._tty else "") + f"[{name}] failed after {time.perf_counter() - t0:.2f} s\n")
            raise
        dt = time.perf_counter() - t0
        self.timings[name] = self.timings.get(name, 0.0) + dt
        rate = self.rates.get(name)
        tail = f" ({_si(rate[0])}{rate[1]}/s)" if rate else ""
        self._write(("\r\033[K" if self._tty else "") + f"[{name}] done in {dt:.2f} s{tail}\n")

    def _update(self, f: float, rate: float | None = None, unit: str = "", eta: float | None = None,
                force: bool = False) -> None:
        if self.on_update is not None:
            self.on_update(self._current, f, rate, eta)
        now = time.perf_counter()
        if self._tty and not self.quiet and (force or now - self._last_draw >= 0.1):
            self._last_draw = now
            self._write("\r\033[K" + format_progress(self._current, f, rate, unit, eta))

    def fraction(self, f: float) -> None:
        """Report progress of the current stage (0..1)."""
        elapsed = time.perf_counter() - self._t0
        eta = elapsed * (1 - f) / f if f > 0.01 else None
        self._update(f, eta=eta)

    def counter(self, unit: str) -> Callable[[int, int], None]:
        """A callback ``(done, total)`` for the current stage: progress with the rate in
        `unit`/s and the ETA; the stage's final line shows the mean rate."""
        stage = self._current

        def report(done: int, total: int) -> None:
            elapsed = max(time.perf_counter() - self._t0, 1e-9)
            rate = done / elapsed
            self.rates[stage] = (rate, unit)
            f = done / total if total else 0.0
            eta = (total - done) / rate if rate > 0 and total else None
            self._update(f, rate, unit, eta)
        return report
