"""`robot-ident` command line. Each sub-command lives in robot_ident/cli/commands/<name>.py
and exposes `add_parser(subparsers)` (which sets `func`) ; bad input exits with
status 2 and a one-line reason, never a traceback."""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import RobotIdentError

# Order is the order shown by --help.
COMMANDS = ("demo", "design", "simulate", "identify", "validate", "report")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="robot-ident",
        description="Identify the dynamic model of a robot arm: excitation design, "
                    "simulation, identification and validation.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f".commands.{name}", __package__).add_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except RobotIdentError as exc:
        print(f"robot-ident {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"robot-ident {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
