"""The ROS 2 nodes' parameters -- name, default, range, meaning -- read from the nodes'
source without importing ROS (CI has none), for the generated reference docs/config.md.

Each node declares its parameters with `nodes._common.declare(self, NAME, DEFAULT,
MEANING, read_only=..., low=..., high=...)`: the calls are read with `ast`. A default is a
literal or a name of `robot_ident.defaults` (``defaults.MONITOR_GAIN``); anything else is an
error here, so that a parameter the reference cannot show fails its test rather than
going undocumented. The excitation node declares its run settings from the tables of
`online/excitation_actions.py` (SETTING_PARAMETERS with ExcitationSettings' defaults,
GOAL_PARAMETERS), which are read from that file's source the same way. `declare_robot_description(self)` adds
`robot_description` and `urdf_file`.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

NODES = Path(__file__).resolve().parents[1] / "nodes"
TABLES = {"SETTING_PARAMETERS", "GOAL_PARAMETERS"}     # online/excitation_actions.py


@dataclass(frozen=True)
class NodeParameter:
    node: str
    name: str
    default: object
    meaning: str
    low: float | None = None
    high: float | None = None
    read_only: bool = False


def _value(expr: ast.expr, where: str):
    from .. import defaults
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "defaults":
        return getattr(defaults, expr.attr)
    try:
        return ast.literal_eval(expr)
    except ValueError:
        raise ValueError(f"{where}: the default {ast.unparse(expr)!r} is neither a literal nor a name of "
                         "robot_ident.defaults; the reference cannot show it") from None


def _declared(tree: ast.AST, node: str, path: Path) -> list[NodeParameter]:
    out = []
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
             and c.func.id == "declare"]
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):     # in the order of the source
        if len(call.args) < 4 or not (isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str)):
            continue             # the excitation node's loops over its tables, read from the tables
        name = call.args[1].value
        where = f"{path.name}: parameter {name!r}"
        kw = {k.arg: _value(k.value, where) for k in call.keywords if k.arg in ("low", "high", "read_only")}
        out.append(NodeParameter(node, name, _value(call.args[2], where), _value(call.args[3], where), **kw))
    return out


def _tables(node: str) -> list[NodeParameter]:
    """The excitation node's settings, from the source of online/excitation_actions.py (read,
    not imported: the command line does not import the online layer)."""
    path = NODES.parent / "online" / "excitation_actions.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tables = {t.id: ast.literal_eval(a.value) for a in tree.body if isinstance(a, ast.Assign)
              for t in a.targets if isinstance(t, ast.Name) and t.id in TABLES}
    settings = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "ExcitationSettings")
    default = {f.target.id: ast.literal_eval(f.value) for f in settings.body
               if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name) and f.value is not None}
    out = [NodeParameter(node, name, default[name], doc, low, high, True)
           for name, (doc, low, high) in tables["SETTING_PARAMETERS"].items()]
    return out + [NodeParameter(node, name, value, doc, low, high, True)
                  for name, (value, doc, low, high) in tables["GOAL_PARAMETERS"].items()]


def node_parameters() -> list[NodeParameter]:
    """Every node's parameters, node by node (file order), in declaration order."""
    common = ast.parse((NODES / "_common.py").read_text(encoding="utf-8"))
    description = next(f for f in ast.walk(common)
                       if isinstance(f, ast.FunctionDef) and f.name == "declare_robot_description")
    out: list[NodeParameter] = []
    for path in sorted(NODES.glob("*_node.py")):
        node = path.stem
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if "declare_robot_description" in names:
            out += _declared(description, node, NODES / "_common.py")
        out += _declared(tree, node, path)
        if names & TABLES:
            out += _tables(node)
    return out


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return f"`{v}`" if v else "`\"\"`"
    return f"`{v!r}`" if not isinstance(v, bool) else f"`{str(v).lower()}`"


def node_parameters_markdown() -> list[str]:
    """The reference's section: a table per node."""
    out = ["## The nodes' parameters", "",
           "The ROS 2 nodes' own parameters (docs/ros2.md), read from the nodes' source "
           "(`robot_ident/cli/node_parameters.py`). They may sit in the same `ros__parameters` as the "
           "sections above and count as known keys of its top level. All are read at start-up "
           "(read-only) unless marked otherwise.", ""]
    by_node: dict[str, list[NodeParameter]] = {}
    for p in node_parameters():
        by_node.setdefault(p.node, []).append(p)
    for node, params in by_node.items():
        out += [f"### `{node}`", "", "| parameter | default | range | meaning |", "|---|---|---|---|"]
        for p in params:
            rng = "" if p.low is None and p.high is None else f"{p.low!r} to {p.high!r}"
            meaning = p.meaning.replace("|", "\\|") + ("" if p.read_only else " (can be set while running)")
            out.append(f"| `{p.name}` | {_cell(p.default)} | {rng} | {meaning} |")
        out.append("")
    return out
