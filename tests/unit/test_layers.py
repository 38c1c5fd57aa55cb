"""The package's layers, as docs/DESIGN.md draws them, checked on every import.

A module may import its own layer and the layers below it, never one above;
``_app/`` and ``_net/`` (the two sides of the hand-off) never import each
other. Every import counts: at module level, inside functions and under
``TYPE_CHECKING``. And no two modules import each other, directly or around a
circle, at module level.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kafka_share

PACKAGE = Path(kafka_share.__file__).parent

#: lowest first; a module is in the layer of its top-level name under kafka_share
LAYERS: list[tuple[str, set[str]]] = [
    ("base", {"_version", "_error_base", "_error_codes", "errors", "models", "_log", "_reprs",
              "metrics", "credentials", "dead_letter", "_numpy_import"}),
    ("wire", {"protocol", "records", "cluster", "config"}),
    ("engine", {"share", "telemetry"}),
    ("hand-off", {"_handoff"}),
    ("sides", {"_app", "_net"}),
    ("facades", {"consumer", "aio", "admin", "spark", "commands", "cli", "workers",
                 "testing", "__init__"}),
]
#: pairs in one layer that must not import each other (either way)
APART = {("_app", "_net"), ("_net", "_app")}


def _layer_of(top: str) -> int:
    for i, (_, members) in enumerate(LAYERS):
        if top in members:
            return i
    raise AssertionError(f"kafka_share.{top} is in no layer: add it to LAYERS in {__file__}")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path, *, module_level_only: bool = False) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    found: list[tuple[int, str]] = []
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            # ``from package import x``: x is a module of the package, or a name in it
            found += [(node.lineno, f"{name}.{a.name}" if _is_module(f"{name}.{a.name}")
                       else name) for a in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "kafka_share"]


SOURCES = sorted(PACKAGE.rglob("*.py"))


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_no_module_imports_a_layer_above_its_own() -> None:
    problems = []
    for path in SOURCES:
        source = _top(_module_name(path))
        for line, name in _imports(path):
            target = _top(name)
            if target == source or name == "kafka_share":
                continue
            if _layer_of(target) > _layer_of(source) or (source, target) in APART:
                problems.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line} imports {name} "
                    f"({LAYERS[_layer_of(source)][0]} -> {LAYERS[_layer_of(target)][0]})"
                )
    assert not problems, "imports against the layers:\n" + "\n".join(problems)


def test_no_import_cycle_at_module_level() -> None:
    graph: dict[str, set[str]] = {}
    names = {_module_name(p) for p in SOURCES}
    for path in SOURCES:
        graph[_module_name(path)] = {
            name for _, name in _imports(path, module_level_only=True) if name in names
        } - {_module_name(path)}
    cycles = _cycles(graph)
    assert not cycles, "modules that import each other: " + "; ".join(
        " -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One representative circle per strongly connected component (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("graph,expected", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
])
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]],
                                       expected: list[list[str]]) -> None:
    assert _cycles(graph) == expected
