"""YAML reading that refuses duplicate keys.

PyYAML's `safe_load` keeps the last of two equal keys in a mapping without a word
(an actuator listed twice under `actuators:` silently loses the first entry).
`safe_load_strict` is `yaml.safe_load` with a SafeLoader subclass whose mapping
constructor raises `DuplicateKeyError` (a `yaml.YAMLError`, so existing
``except yaml.YAMLError`` handlers report it) naming the key and both lines.
Hand-written because PyYAML has no option for it; ruamel.yaml refuses duplicates
but would be a second YAML library for one check.
"""
from __future__ import annotations

import yaml
from yaml.constructor import ConstructorError


class DuplicateKeyError(ConstructorError):
    """A mapping holds the same key twice."""


class StrictSafeLoader(yaml.SafeLoader):
    """SafeLoader whose mappings refuse duplicate keys."""


def _construct_mapping(loader: StrictSafeLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict = {}
    for key_node, _ in node.value:        # the node's own keys; `<<:` merges may be overridden
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            continue                       # the base constructor reports unhashable keys
        if key in seen:
            raise DuplicateKeyError(
                None, None,
                f"duplicate key {key!r} (first at line {seen[key] + 1})",
                key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


StrictSafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def safe_load_strict(stream):
    """`yaml.safe_load` that raises `DuplicateKeyError` on a duplicate mapping key."""
    return yaml.load(stream, Loader=StrictSafeLoader)   # noqa: S506 (a SafeLoader subclass)


def yaml_error_line(exc: BaseException) -> str:
    """A YAML error as one line: the problem and where (PyYAML's messages span lines)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem:
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        ctx = getattr(exc, "context", None)
        return f"{problem}{where}" + (f" ({ctx})" if ctx and "duplicate" not in problem else "")
    return " ".join(str(exc).split())
