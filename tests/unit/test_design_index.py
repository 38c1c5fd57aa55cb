"""docs/DESIGN.md's pointers are facts: every function it names is in the file it names.

In docs/DESIGN.md (its tables and its prose) a backticked path (``share/engine.py``; relative
to ``kafka_share/`` unless it starts with ``kafka_share/``, ``tests/``,
``tools/`` or ``benchmarks/``) is followed, up to the next path or ``;``, by
the names it holds (backticked words in parentheses are remarks):
``Class.method`` (the class is in that file and has that method), ``.method``
(a method of the last class named for that file), or a bare ``name`` (a
function, class or constant of that file). A name that moved to another file
fails this test until the index follows it.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "DESIGN.md"

_PATH = re.compile(r"^[\w./]+\.py$")
_NAME = re.compile(r"^\.?[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$")
#: ``Class.method`` or ``.method``: a pointer that must name its file
_METHOD = re.compile(r"^(\.\w+|_*[A-Z]\w*\.\w+)$")
_OUTSIDE_PACKAGE = ("kafka_share/", "tests/", "tools/", "benchmarks/", "examples/")


def _resolve(path: str) -> Path:
    return ROOT / path if path.startswith(_OUTSIDE_PACKAGE) else ROOT / "kafka_share" / path


@cache
def _definitions(path: Path) -> tuple[dict[str, set[str]], set[str]]:
    """(class -> its attributes and methods, every name defined anywhere)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    classes: dict[str, set[str]] = {}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            members = classes.setdefault(node.name, set())
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    members.update(t.id for t in item.targets if isinstance(t, ast.Name))
            # attributes its methods set on self
            members.update(
                n.attr for n in ast.walk(node)
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name) and n.value.id == "self"
            )
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return classes, names


def pointers(text: str) -> list[tuple[int, str, str]]:
    """(line, path, name) for every name a line of ``text`` (outside code blocks)
    points at; a table's cells are read one at a time."""
    found: list[tuple[int, str, str]] = []
    in_code = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        for cell in line.split("|"):
            for clause in cell.split(";"):
                found += [(number, path, name) for path, name in _clause_pointers(clause)]
    return found


def _clause_pointers(clause: str) -> list[tuple[str, str]]:
    """A path holds the names after it up to the next path or the clause's end
    (a ``;``); backticked words in parentheses are remarks, not pointers."""
    found: list[tuple[str, str]] = []
    path: str | None = None
    depth = 0
    for i, piece in enumerate(re.split(r"`", clause)):
        if i % 2 == 0:  # outside backticks
            depth = max(0, depth + piece.count("(") - piece.count(")"))
            continue
        if depth:
            continue
        if _PATH.match(piece):
            path = piece
            continue
        name = piece.split("(")[0].strip()
        if _NAME.match(name) and (path is not None or _METHOD.match(name)):
            found.append((path or "", name))
    return found


def problem(path: str, name: str, last_class: str | None) -> str | None:
    """Why ``name`` is not in ``path`` (None: it is)."""
    if not path:
        return "no file named before it (write `path.py` `Class.method`)"
    file = _resolve(path)
    if not file.is_file():
        return f"{path} does not exist"
    classes, names = _definitions(file)
    if name.startswith("."):
        if last_class is None:
            return None if name[1:] in names else f"{name[1:]} is not in {path}"
        return None if name[1:] in classes.get(last_class, set()) else (
            f"{last_class}{name} is not in {path}")
    head, _, tail = name.partition(".")
    if tail and head.lstrip("_")[:1].isupper():
        if head not in classes:
            return f"class {head} is not in {path}"
        return None if tail in classes[head] else f"{name} is not in {path}"
    if tail:
        return None  # a lower-case dotted name: a module attribute or a config key
    return None if name in names else f"{name} is not in {path}"


def test_every_pointer_of_the_design_notes_names_a_function_in_its_file() -> None:
    problems = []
    last_class: dict[tuple[int, str], str] = {}
    for line, path, name in pointers(DESIGN.read_text(encoding="utf-8")):
        head = name.split(".")[0]
        if "." in name and head.lstrip("_")[:1].isupper():
            last_class[(line, path)] = head
        why = problem(path, name, last_class.get((line, path)))
        if why:
            problems.append(f"docs/DESIGN.md:{line}: `{path}` `{name}`: {why}")
    assert not problems, f"{len(problems)} stale pointers:\n" + "\n".join(problems)


def test_the_checker_catches_what_moved(tmp_path: Path) -> None:
    rows = ("| x | `share/engine.py` `ConsumerEngine.poll`, `.no_such_method`, "
            "`no_such_function` (`a_remark`); `_net/driver.py` `EngineDriver.run_once`; "
            "consumer `ShareConsumer.close`, `a_word` |\n")
    found = pointers(rows)
    assert [(p, n) for _, p, n in found] == [
        ("share/engine.py", "ConsumerEngine.poll"), ("share/engine.py", ".no_such_method"),
        ("share/engine.py", "no_such_function"), ("_net/driver.py", "EngineDriver.run_once"),
        ("", "ShareConsumer.close")]
    assert problem("", "ShareConsumer.close", None) == (
        "no file named before it (write `path.py` `Class.method`)")
    assert problem("share/engine.py", "ConsumerEngine.poll", None) is None
    assert problem("share/engine.py", ".no_such_method", "ConsumerEngine") == (
        "ConsumerEngine.no_such_method is not in share/engine.py")
    assert problem("share/engine.py", "no_such_function", None) == (
        "no_such_function is not in share/engine.py")
    assert problem("share/engine.py", "ShareConsumer.poll", None) == (
        "class ShareConsumer is not in share/engine.py")
    assert problem("nowhere.py", "x", None) == "nowhere.py does not exist"
