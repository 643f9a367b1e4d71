import subprocess
import sys

import pytest
import yaml

from robot_ident.cli import main


def test_demo_command_writes_a_result_folder(tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["demo", "--output", str(out), "--no-plots", "--quiet", "--periods", "1"]) == 0
    text = capsys.readouterr().out
    assert "RMS/noise" in text and "condition number" in text
    d = yaml.safe_load((out / "result.yaml").read_text())
    assert d["method"] == "physical" and len(d["base_parameters"]) == 58
    assert (out / "identified.urdf").is_file()


def test_bad_input_gives_one_line_and_status_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "robot_ident.cli", "demo", "--method", "magic",
                           "--output", str(tmp_path / "x"), "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "robot-ident demo: error: unknown identification method 'magic'; available: "
        "ols, physical, rls, robust, sobol-ga, sobol-ls, wls"]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("robot, flags, named", [
    ("space", ["--output", "x", "--no-plots"], "--output, --no-plots"),
    ("palletiser", ["--method", "wls"], "--method"),
    ("demo_arm", ["--velocity-noise", "0.01"], "--velocity-noise")])
def test_demo_refuses_the_options_its_robot_does_not_use(robot, flags, named, tmp_path):
    """`demo --robot space` once ignored --output, --noise, --method, --periods and --no-plots."""
    proc = subprocess.run([sys.executable, "-m", "robot_ident.cli", "demo", "--robot", robot, "--quiet", *flags],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and f"does not use {named}" in proc.stderr and not list(tmp_path.iterdir())


def test_identify_help_states_the_estimators_default_method(capsys):
    """`identify --help` once said wls while the default is physical (issue 27)."""
    from robot_ident.cli import main
    from robot_ident.estimation.pipeline import IdentificationSettings
    with pytest.raises(SystemExit):
        main(["identify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"else {IdentificationSettings().method})" in text


def test_a_missing_input_is_answered_before_the_engine_loads(tmp_path, capsys):
    """Issue 29: every command took 2-6 s (imports) before saying a file was missing. The
    input options are checked first: one line naming the option, and no engine module
    imported (checked in a fresh interpreter)."""
    code = ("import sys; from robot_ident.cli import main; "
            f"rc = main(['identify', '--bag', {str(tmp_path / 'nope')!r}, '--urdf', 'urdf/demo_arm.urdf', "
            "'--config', 'config/demo_arm.yaml', '--output', 'x']); "
            "print(rc, 'robot_ident.estimation' in sys.modules, 'scipy' in sys.modules)")
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["2", "False", "False"], (out.stdout, out.stderr)
    assert f"robot-ident identify: error: --bag: {tmp_path / 'nope'} not found" in out.stderr


def test_the_engine_loads_without_scipy_signal():
    """scipy.signal takes 0.7 s to import: it is imported where a filter is made, so
    `identify` starts reading a bag (in a forked reader) while it imports it. Loading the
    engine of `identify` does not import it (checked in a fresh interpreter)."""
    code = ("import sys; import robot_ident.cli.commands.identify, robot_ident.offline.inputs, "
            "robot_ident.estimation.flow, robot_ident.estimation.physical, robot_ident.data.processing; "
            "print(sorted(m for m in sys.modules if m.startswith(('scipy.signal', 'scipy.stats'))))")
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", (out.stdout, out.stderr)


@pytest.mark.parametrize("user", [None, ("OPENBLAS_NUM_THREADS", "2"), ("OMP_NUM_THREADS", "2")])
def test_the_program_runs_with_one_blas_thread_unless_told_otherwise(user):
    """`run` (the console script, ``python -m robot_ident.cli``) sets one OpenBLAS thread
    before numpy loads (loading the command line loads no numpy) and keeps a number the
    user set in any variable OpenBLAS reads; checked in a fresh interpreter, numpy's BLAS
    asked how many threads it has."""
    import os
    from pathlib import Path
    code = ("import os, sys; import robot_ident.cli as cli; assert 'numpy' not in sys.modules; "
            "cli.main = lambda: print(os.environ.get('OPENBLAS_NUM_THREADS', '-'), __import__('numpy').__name__ and "
            "max("
            "i['num_threads'] for i in __import__('threadpoolctl').threadpool_info() "
            "if i['internal_api'] == 'openblas')) or 0; sys.exit(cli.run())")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                                             "OMP_NUM_THREADS")}
    if user is not None:
        env[user[0]] = user[1]
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    setting, threads = out.stdout.split()
    if user is None:
        assert (setting, threads) == ("1", "1")
    else:
        assert setting == (user[1] if user[0] == "OPENBLAS_NUM_THREADS" else "-")
        assert int(threads) == min(int(user[1]), os.cpu_count())
