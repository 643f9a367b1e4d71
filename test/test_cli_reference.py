"""docs/cli.md is the `--help` of robot-ident and of each sub-command (robot_ident/cli/reference.py):
equal to what cli_reference() builds, and each section equal to what `robot-ident <cmd> --help`
prints in a fresh process at the same terminal width (so it is --help, not a reconstruction)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from robot_ident.cli import COMMANDS
from robot_ident.cli.reference import ENVIRONMENT, cli_reference

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "cli.md"
SECTION = re.compile(r"^## (robot-ident[^\n]*)\n\n```text\n(.*?)\n```$", re.M | re.S)
TITLES = ["robot-ident"] + [f"robot-ident {c}" for c in COMMANDS]


def _sections(text: str) -> dict[str, str]:
    return {title: body for title, body in SECTION.findall(text)}


def _robot_ident() -> list[str]:
    """The installed console script when it sits next to this interpreter, else `python -m robot_ident.cli`."""
    script = Path(sys.executable).with_name("robot-ident")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "robot_ident.cli"]


def test_docs_cli_md_is_up_to_date():
    assert DOC.is_file(), "docs/cli.md is missing; generate it: python -m robot_ident.cli.reference > docs/cli.md"
    assert DOC.read_text(encoding="utf-8") == cli_reference(), (
        "docs/cli.md differs from the parser's --help texts; regenerate it: "
        "python -m robot_ident.cli.reference > docs/cli.md")


def test_one_section_per_command_in_the_parser_order():
    assert list(_sections(cli_reference())) == TITLES


@pytest.mark.parametrize("title", TITLES)
def test_each_section_is_what_help_prints(title):
    command = title.split()[1:]
    env = {**os.environ, **ENVIRONMENT}
    proc = subprocess.run(_robot_ident() + command + ["--help"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert _sections(cli_reference())[title] + "\n" == proc.stdout


def test_independent_of_the_terminal_and_the_program_name(monkeypatch):
    expected = cli_reference()
    monkeypatch.setenv("COLUMNS", "37")
    monkeypatch.setattr(sys, "argv", ["/somewhere/else/__main__.py"])
    assert cli_reference() == expected
    assert os.environ["COLUMNS"] == "37" and sys.argv == ["/somewhere/else/__main__.py"]   # both given back


def test_building_the_reference_loads_no_engine():
    code = ("import sys; from robot_ident.cli.reference import cli_reference; cli_reference(); "
            "print(sorted(m for m in ('numpy', 'scipy', 'mujoco', 'robot_ident.estimation', 'robot_ident.offline', "
            "'robot_ident.demos') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", (out.stdout, out.stderr)


def test_the_help_quotes_the_defaults_the_code_uses():
    """Issue 32: one place defines each default (robot_ident/defaults.py); the config parsers
    use it and --help quotes it."""
    from robot_ident import defaults
    from robot_ident.estimation.pipeline import IdentificationSettings, identification_config
    from robot_ident.excitation.config import parse_excitation_config
    ref = cli_reference()
    ident = identification_config({})
    assert ident.settings.method == IdentificationSettings().method == defaults.METHOD
    assert ident.holdout == defaults.HOLDOUT
    kw = parse_excitation_config({"robot_ident": {"ros__parameters": {"joints": ["a"]}}}).spec_kwargs
    assert (kw["optimizer"], kw["criterion"], kw["family"], kw["max_time"], kw["seed"]) == (
        defaults.OPTIMIZER, defaults.CRITERION, defaults.FAMILY, defaults.MAX_TIME_S, defaults.SEED)
    for phrase in (f"else {defaults.METHOD})", f"else {defaults.HOLDOUT:g};", f"else {defaults.OPTIMIZER})",
                   f"else {defaults.CRITERION})", f"else {defaults.FAMILY})", f"else {defaults.MAX_TIME_S:g})",
                   f"else {defaults.SEED})", f"(default: {defaults.STORAGE})", f"(default: {defaults.REPETITIONS})"):
        assert phrase in " ".join(ref.split()), phrase


def test_monitor_demo_bag_and_payload_defaults_are_the_ones_the_code_uses():
    """Issue 32: `monitor --help` said gain 150 while the observer used 200. Every default the
    help quotes comes from robot_ident/defaults.py, and the code's own defaults are the same."""
    import inspect

    from robot_ident import defaults
    from robot_ident.cli.commands.demo import DEFAULTS as DEMO
    from robot_ident.data.bag import write_recording_bag
    from robot_ident.demos.serial_arm import DemoSetup, run_demo
    from robot_ident.estimation.payload import PayloadConfig, PayloadModel
    from robot_ident.monitor.observer import ObserverSettings
    from robot_ident.offline.bag_workflow import simulate_to_bag
    from robot_ident.offline.closed_chain_workflow import simulate_closed_chain_bag
    ref = " ".join(cli_reference().split())
    s = ObserverSettings()
    assert (s.gain, s.threshold, s.calibration_s) == (
        defaults.MONITOR_GAIN, defaults.MONITOR_THRESHOLD, defaults.MONITOR_CALIBRATION_S)
    for phrase in (f"exp(-K t) (default {s.gain:g})", f"band (default {s.threshold:g})",
                   f"(default {s.calibration_s:g})", f"(default: {defaults.BAG_VERSION};",
                   f"payload.frame of the config, else {defaults.PAYLOAD_FRAME})",
                   f"result folder (default: {defaults.DEMO_OUTPUT};", f"effort RMS (default: {defaults.DEMO_NOISE})",
                   f"identification (default: {defaults.DEMO_PERIODS})",
                   f"random seed (default: {defaults.DEMO_SEED})"):
        assert phrase in ref, phrase
    d = DemoSetup()
    assert (d.effort_noise, d.identification_periods, d.seed) == (DEMO["noise"], DEMO["periods"], defaults.DEMO_SEED)
    assert inspect.signature(run_demo).parameters["output"].default == DEMO["output"]
    frame = inspect.signature(PayloadModel).parameters["frame"].default
    assert PayloadConfig().frame == frame == defaults.PAYLOAD_FRAME
    for fn, name in ((write_recording_bag, "version"), (simulate_to_bag, "bag_version"),
                     (simulate_closed_chain_bag, "bag_version")):
        assert inspect.signature(fn).parameters[name].default == defaults.BAG_VERSION, fn.__name__
    assert inspect.signature(simulate_closed_chain_bag).parameters["storage"].default == defaults.STORAGE
