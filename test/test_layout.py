"""The package layout keeps its import direction: the core never imports the online
logic, the ROS nodes, the offline workflow, the demos or the command line; inside the
core every part imports only parts on a lower layer (LAYER); no two modules import each
other, directly or around a circle; only robot_ident/nodes imports rclpy or ROS message
packages. Checked by walking every module's imports with `ast` (lazy imports inside
functions included)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "robot_ident"

CORE = {"errors", "defaults", "util", "model", "mechanisms", "data", "estimation", "excitation", "io", "sim", "report",
        "monitor"}
# What each top-level part of the package may import from robot_ident (besides itself).
ALLOWED = {
    **{part: CORE for part in CORE},
    "online": CORE,
    "nodes": CORE | {"online"},
    "offline": CORE,
    "demos": CORE,
    "cli": CORE | {"offline", "demos"},
}
# The layers, lowest first: a part imports only parts on a lower layer (and itself).
LAYER = {"errors": 0, "defaults": 0, "util": 1, "model": 2, "mechanisms": 3, "data": 3, "estimation": 4, "io": 5,
         "excitation": 6, "sim": 7, "report": 7, "monitor": 7, "online": 8, "offline": 8, "demos": 8, "nodes": 9,
         "cli": 9}
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
    src = PKG / "offline" / "inputs.py"
    mods = {m for m, _ in _imports(src)}
    assert "robot_ident.estimation.pipeline" in mods      # a lazy, relative import in a function
    assert "robot_ident.errors" in mods


def test_no_module_far_over_400_lines():
    long = {str(p.relative_to(PKG)): n for p in MODULES
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 450}
    assert not long, f"modules over 450 lines (split them where a natural seam exists): {long}"


def test_every_part_imports_only_lower_layers():
    assert set(LAYER) == set(ALLOWED)
    bad = []
    for path in MODULES:
        part = _part(path)
        if part == "__init__":
            continue
        for mod, line in _imports(path):
            top = mod.split(".")
            if top[0] == "robot_ident" and len(top) > 1 and top[1] != part and top[1] in LAYER \
                    and LAYER[top[1]] >= LAYER[part]:
                bad.append(f"{path.relative_to(PKG)}:{line} imports {mod} ({part} is not above {top[1]})")
    assert not bad, "imports against the layer direction: " + "; ".join(bad)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _module_graph() -> dict[str, set[str]]:
    """module -> the modules of robot_ident it imports (a name imported from a module counts as
    that module; `from . import x` as the package or its module x)."""
    names = {_module_name(p) for p in MODULES}
    graph = {}
    for path in MODULES:
        me, out = _module_name(path), set()
        for mod, _ in _imports(path):
            while mod and mod not in names:
                mod = mod.rpartition(".")[0]
            if mod and mod != me:
                out.add(mod)
        graph[me] = out
    return graph


def _circles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles_between_modules():
    """Between modules; a package's __init__ only hands names on (its face), so it is no node."""
    graph = {m: {t for t in ts if not _is_package(t)} for m, ts in _module_graph().items() if not _is_package(m)}
    assert not _circles(graph), f"modules that import each other: {_circles(graph)}"


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def _is_package(name: str) -> bool:
    return (PKG.parent / Path(*name.split(".")) / "__init__.py").is_file()


BENCH = sorted((PKG.parent / "bench").glob("*.py"))


@pytest.mark.parametrize("path", MODULES + BENCH, ids=lambda p: str(p.relative_to(PKG.parent)))
def test_every_name_imported_from_robot_ident_exists(path):
    """Lazy imports inside functions run only when the function does: a name moved or renamed
    must not leave one behind (the nodes' modules need ROS to import and are skipped)."""
    import importlib.util

    missing = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            package = list(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
            mod = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        if not mod.startswith("robot_ident") or mod.startswith("robot_ident.nodes"):
            continue
        m = importlib.import_module(mod)
        for a in node.names:
            if a.name != "*" and not hasattr(m, a.name) and importlib.util.find_spec(f"{mod}.{a.name}") is None:
                missing.append(f"line {node.lineno}: {mod} has no {a.name}")
    assert not missing, f"{path.relative_to(PKG.parent)}: " + "; ".join(missing)
