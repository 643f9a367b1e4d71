"""The package layout keeps its import direction: the core never imports the online
logic, the ROS nodes, the offline workflow, the demos or the command line; only
robot_ident/nodes imports rclpy or ROS message packages. Checked by walking every
module's imports with `ast` (lazy imports inside functions included)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "robot_ident"

CORE = {"errors", "util", "model", "mechanisms", "data", "estimation", "excitation", "io", "sim", "report"}
# What each top-level part of the package may import from robot_ident (besides itself).
ALLOWED = {
    **{part: CORE for part in CORE},
    "online": CORE,
    "nodes": CORE | {"online"},
    "offline": CORE,
    "demos": CORE,
    "cli": CORE | {"offline", "demos"},
}
ROS_MODULES = {"rclpy", "rosidl_runtime_py", "sensor_msgs", "std_msgs", "control_msgs", "trajectory_msgs",
               "builtin_interfaces", "diagnostic_msgs", "std_srvs", "rosgraph_msgs", "action_msgs",
               "launch", "launch_ros", "ament_index_python", "rcl_interfaces", "geometry_msgs"}
# ament_index_python is looked up (inside try/except) to find the installed share folder.
ROS_ALLOWED_OUTSIDE_NODES = {("util", "ament_index_python")}


def _part(module_path: Path) -> str:
    rel = module_path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[str, int]]:
    """Absolute module names imported by a file (relative imports resolved)."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = list(rel.parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:   # from . import x
                    out += [(f"{mod}.{a.name}", node.lineno) for a in node.names]
                    continue
            else:
                mod = node.module or ""
            out.append((mod, node.lineno))
    return out


MODULES = sorted(p for p in PKG.rglob("*.py"))


def test_every_top_level_part_is_known():
    parts = {_part(p) for p in MODULES} - {"__init__"}
    assert parts <= set(ALLOWED), f"unclassified parts of robot_ident: {sorted(parts - set(ALLOWED))}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_import_direction(path):
    part = _part(path)
    if part == "__init__":
        return
    bad = []
    for mod, line in _imports(path):
        top = mod.split(".")
        if top[0] == "robot_ident" and len(top) > 1:
            target = top[1]
            if target != part and target not in ALLOWED[part]:
                bad.append(f"line {line}: {mod} ({part} may not import {target})")
        elif top[0] in ROS_MODULES and part != "nodes" and (part, top[0]) not in ROS_ALLOWED_OUTSIDE_NODES:
            bad.append(f"line {line}: {mod} (only robot_ident/nodes imports ROS)")
    assert not bad, f"{path.relative_to(PKG)}: " + "; ".join(bad)


def test_the_checker_sees_relative_and_lazy_imports(tmp_path):
    """The walker must resolve `from ..x import y` inside functions, or the test above
    could pass on a tree that breaks the rule."""
    src = PKG / "online" / "identification_window.py"
    mods = {m for m, _ in _imports(src)}
    assert "robot_ident.estimation.pipeline" in mods      # a lazy, relative import in a function
    assert "robot_ident.errors" in mods


def test_no_module_far_over_400_lines():
    long = {str(p.relative_to(PKG)): n for p in MODULES
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 450}
    assert not long, f"modules over 450 lines (split them where a natural seam exists): {long}"
