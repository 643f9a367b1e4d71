"""`robot-ident` command line. Each sub-command lives in robot_ident/cli/commands/<name>.py
and exposes `add_parser(subparsers)` (which sets `func`) ; bad input exits with
status 2 and a one-line reason, never a traceback (``--verbose``, anywhere on the
command line, adds the full message and the traceback)."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from ..errors import RobotIdentError

# Order is the order shown by --help.
COMMANDS = ("init", "demo", "design", "simulate", "identify", "validate", "monitor", "report")
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")   # OpenBLAS's, in its order
MAX_MESSAGE = 400          # characters of an error line (a 900-character key name is cut)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="robot-ident",
        description="Identify the dynamic model of a robot arm: excitation design, "
                    "simulation, identification and validation.")
    parser.add_argument("--verbose", action="store_true",
                        help="on an error, print the full message and the traceback (allowed anywhere)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f".commands.{name}", __package__).add_parser(sub)
    return parser


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """Collapse a message onto one line ('; ' between its lines) and cut it at `limit`."""
    line = "; ".join(" ".join(part.split()) for part in str(text).splitlines() if part.strip())
    return line if len(line) <= limit else line[:limit - 16] + " ... (--verbose)"


def describe(exc: BaseException) -> str:
    """The one-line reason printed for an exception the command did not expect."""
    if isinstance(exc, RobotIdentError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return ("out of memory (a setting such as base_samples, sync.rate_hz or filter.target_rate_hz may ask "
                "for far more samples than the data has)")
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        return f"cannot access{where}: {exc.strerror or exc}"
    return f"unexpected {type(exc).__name__}: {exc}"


# Options that name an existing input file or folder, checked before any heavy import
INPUT_PATHS = ("urdf", "config", "trajectory", "bag", "table", "validate_bag", "result")


def _check_input_paths(args) -> None:
    """A missing input is answered at once, naming the option (the engine's imports take seconds)."""
    from pathlib import Path

    from ..errors import ConfigError
    for attr in INPUT_PATHS:
        value = getattr(args, attr, None)
        for p in value if isinstance(value, (list, tuple)) else [value]:
            if p is not None and not str(p).lstrip().startswith("<") and not Path(p).exists():
                raise ConfigError(f"--{attr.replace('_', '-')}: {p} not found")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so it unwinds as on Ctrl-C (staging removed)."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv
    argv = [a for a in argv if a != "--verbose"]
    parser = build_parser()
    args = parser.parse_args(argv)
    args.verbose = verbose
    import signal
    import threading
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminate)   # as SIGINT: unwind, clean up, say so
    try:
        _check_input_paths(args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"robot-ident {args.command}: {what}; nothing half-written is left", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except Exception as exc:   # every failure: one line and exit 2 (details with --verbose)
        if verbose:
            traceback.print_exc()
            print(f"robot-ident {args.command}: error: {describe(exc)}", file=sys.stderr)
        else:
            print(f"robot-ident {args.command}: error: {one_line(describe(exc))}", file=sys.stderr)
        return 2
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def run() -> int:
    """The `robot-ident` program (its console script, ``python -m robot_ident.cli``): `main`
    with one BLAS thread, unless the environment asks for another number. The commands run
    their work side by side on every processor they may use (util/parallel.py) and their
    matrices are small, so OpenBLAS's own threads only compete with them: `identify` on the
    300 s demo bag took 3 % less CPU and 0.16 s less wall time (paired runs, docs/benchmarks.md),
    `design` 20 % less CPU for the same number of evaluations. Set before numpy loads, and
    not when the user set a number of threads OpenBLAS reads (`BLAS_THREAD_VARIABLES`); `main`
    called from Python leaves the caller's environment alone."""
    if not any(os.environ.get(v) for v in BLAS_THREAD_VARIABLES):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    return main()


if __name__ == "__main__":
    sys.exit(run())
