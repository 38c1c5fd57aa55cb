#!/usr/bin/env python3
"""Generate ``kafka_share/_error_codes.py`` from the error-code table ``kafka_share/errors.toml``.

Usage::

    python tools/gen_errors.py           # (re)write _error_codes.py
    python tools/gen_errors.py --check   # exit 1 if _error_codes.py is stale

Table format (``kafka_share/errors.toml``, rows in ascending code order)::

    [[error]]
    code = 122                              # Kafka's numeric error code, not 0 (NONE)
    name = "SHARE_SESSION_NOT_FOUND"        # Kafka's name, as in Java's Errors enum
    class = "ShareSessionNotFoundError"     # the Python class; must end in "Error"
    java = "ShareSessionNotFoundException"  # Java's exception class for the code
    retriable = true                        # Java's exception is a RetriableException
    bases = ["KafkaTimeoutError"]           # optional: more hand-written bases after BrokerError
    doc = "What the error means."           # optional: the docstring's body

The output is one plain class per row, deriving from the hand-written
``BrokerError`` of ``kafka_share/errors.py`` (and the row's extra ``bases``),
with ``code``, ``name`` and ``retriable`` as class attributes, plus ``BY_CODE``,
the classes by code. ``kafka_share.errors`` re-exports every class; each class
names ``kafka_share.errors`` as its ``__module__`` so that reprs, tracebacks and
pickles show the public module.

The table is validated before anything is written: a bad row is reported with
its code and field, and the command exits with status 2.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import re
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "kafka_share" / "errors.toml"
OUTPUT = ROOT / "kafka_share" / "_error_codes.py"
ENUM_OUTPUT = ROOT / "kafka_share" / "protocol" / "error_codes.py"
# The hand-written module the generated classes derive from (and that re-exports them).
BASE_MODULE = ROOT / "kafka_share" / "_error_base.py"
#: the module the generated classes import their bases from (no import cycle)
BASE_IMPORT = "kafka_share._error_base"
PUBLIC_MODULE = "kafka_share.errors"

_LINE_LIMIT = 100  # ruff's line-length for the project
_DOC_WIDTH = 80  # docstring prose is wrapped narrower, as in the hand-written modules
_REQUIRED = {"code", "name", "class", "java", "retriable"}
_OPTIONAL = {"bases", "doc"}
_KAFKA_NAME = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*")
_CLASS_NAME = re.compile(r"[A-Z][A-Za-z0-9]*Error")
_JAVA_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
_INT16 = range(-(1 << 15), 1 << 15)


class TableError(Exception):
    """The error table is not valid; the message names the row and the field."""


@dataclass(frozen=True)
class Row:
    code: int
    name: str
    cls: str
    java: str
    retriable: bool
    bases: tuple[str, ...]
    doc: str


def hand_written_classes(path: Path) -> set[str]:
    """Names of the classes defined at the top level of the hand-written errors module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def _row(raw: Any, where: str, known_bases: set[str]) -> Row:
    if not isinstance(raw, dict):
        raise TableError(f"{where}: must be a table, got {type(raw).__name__}")
    if "code" in raw:
        where = f"{where} (code {raw['code']!r})"
    missing = _REQUIRED - raw.keys()
    if missing:
        raise TableError(f"{where}: missing field(s) {', '.join(sorted(missing))}")
    unknown = raw.keys() - _REQUIRED - _OPTIONAL
    if unknown:
        raise TableError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    code = raw["code"]
    if type(code) is not int or code not in _INT16 or code == 0:
        raise TableError(f"{where}: code must be a non-zero int16, got {code!r}")
    for key, pattern in (("name", _KAFKA_NAME), ("class", _CLASS_NAME), ("java", _JAVA_NAME)):
        value = raw[key]
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise TableError(f"{where}: {key} {value!r} does not match {pattern.pattern}")
    if not isinstance(raw["retriable"], bool):
        raise TableError(f"{where}: retriable must be true or false, got {raw['retriable']!r}")
    bases = raw.get("bases", [])
    if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
        raise TableError(f"{where}: bases must be a list of class names, got {bases!r}")
    for base in bases:
        if base == "BrokerError" or base not in known_bases:
            raise TableError(
                f"{where}: base {base!r} is not a hand-written class of {PUBLIC_MODULE} "
                "(BrokerError is always the first base and is not listed)"
            )
    if len(set(bases)) != len(bases):
        raise TableError(f"{where}: bases {bases!r} repeat a class")
    doc = raw.get("doc", "")
    if not isinstance(doc, str) or '"""' in doc or "\\" in doc:
        raise TableError(f"{where}: doc must be a string without triple quotes or backslashes")
    return Row(code, raw["name"], raw["class"], raw["java"], raw["retriable"], tuple(bases), doc)


def load(table: Path, base_module: Path) -> list[Row]:
    """Read and validate the table; raise :class:`TableError` naming the first problem."""
    try:
        data = tomllib.loads(table.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TableError(f"{table.name}: not valid TOML: {exc}") from None
    extra = data.keys() - {"error"}
    if extra:
        raise TableError(f"{table.name}: unknown top-level key(s) {', '.join(sorted(extra))}")
    raws = data.get("error")
    if not isinstance(raws, list) or not raws:
        raise TableError(f"{table.name}: expected a non-empty list of [[error]] rows")
    known = hand_written_classes(base_module)
    rows = [_row(raw, f"{table.name} row {i + 1}", known) for i, raw in enumerate(raws)]
    for prev, row in itertools.pairwise(rows):
        if row.code <= prev.code:
            raise TableError(
                f"{table.name}: code {row.code} comes after {prev.code}; "
                "rows must be in strictly ascending code order (no duplicates)"
            )
    for attr, label in (("name", "name"), ("cls", "class"), ("java", "java")):
        seen: dict[str, int] = {}
        for row in rows:
            value = getattr(row, attr)
            if value in seen:
                raise TableError(
                    f"{table.name}: {label} {value!r} is used by codes {seen[value]} and {row.code}"
                )
            seen[value] = row.code
    for row in rows:
        if row.cls in known:
            raise TableError(
                f"{table.name} (code {row.code}): class {row.cls!r} is already defined "
                f"by hand in {PUBLIC_MODULE}"
            )
    return rows


def _docstring(row: Row) -> str:
    indent = "    "
    width = _DOC_WIDTH - len(indent)
    paragraphs = [f"{row.name} ({row.code})."]
    if row.doc:
        paragraphs.append(textwrap.fill(" ".join(row.doc.split()), width))
    paragraphs.append(f"Java's client raises ``{row.java}``.")
    body = "\n\n".join(paragraphs)
    lines = body.splitlines()
    lines[0] = '"""' + lines[0]
    text = "\n".join(indent + ln if ln else "" for ln in lines)
    if len(lines) == 1:
        return text + '"""\n'
    return text + "\n" + indent + '"""\n'


HEADER = '''\
# GENERATED by tools/gen_errors.py from kafka_share/errors.toml; do not edit.
# Regenerate with: python tools/gen_errors.py
"""One exception class per Kafka error code (Java's ``Errors`` enum, NONE excepted).

Import them from :mod:`kafka_share.errors`, which re-exports them; ``__module__``
names that public module so that reprs, tracebacks and pickles do too. Their base
classes are the hand-written ones of ``kafka_share._error_base``.
"""

'''


def render(rows: list[Row]) -> str:
    bases_used = sorted({"BrokerError", *(b for row in rows for b in row.bases)})
    parts = [HEADER]
    parts.append(f"from {BASE_IMPORT} import {', '.join(bases_used)}\n\n")
    names = sorted(row.cls for row in rows)
    parts.append("__all__: list[str] = [\n" + "".join(f'    "{n}",\n' for n in names) + "]\n")
    for row in rows:
        bases = ", ".join(("BrokerError", *row.bases))
        parts.append(
            f"\n\nclass {row.cls}({bases}):\n"
            f"{_docstring(row)}\n"
            f'    __module__ = "{PUBLIC_MODULE}"\n'
            f"    code = {row.code}\n"
            f'    name = "{row.name}"\n'
            f"    retriable = {row.retriable}\n"
        )
    parts.append("\n\nBY_CODE: dict[int, type[BrokerError]] = {\n")
    parts.append("".join(f"    {row.code}: {row.cls},\n" for row in rows))
    parts.append('}\n"""Every class above by its ``code``, in ascending code order."""\n')
    src = "".join(parts)
    too_long = [ln for ln in src.splitlines() if len(ln) > _LINE_LIMIT]
    if too_long:
        raise TableError(f"generated line longer than {_LINE_LIMIT} characters: {too_long[0]!r}")
    return src


ENUM_HEADER = '''\
# GENERATED by tools/gen_errors.py from kafka_share/errors.toml; do not edit.
# Regenerate with: python tools/gen_errors.py
"""Kafka's error codes by name (Java's ``Errors`` enum), for code that decides on them.

Responses carry codes as plain ints; ``ErrorCode`` is an ``IntEnum``, so
``code == ErrorCode.NOT_LEADER_OR_FOLLOWER`` and ``code in {ErrorCode.X, ...}``
read as Kafka's names while comparing ints. The exception for a code comes from
``kafka_share.errors.error_for_code``.
"""

import enum

__all__ = ["ErrorCode"]


class ErrorCode(enum.IntEnum):
    """Every Kafka error code, and NONE (0)."""

'''


def render_enum(rows: list[Row]) -> str:
    """The ``ErrorCode`` module for ``rows`` (NONE added: it is in no row)."""
    members = sorted([(0, "NONE"), *((row.code, row.name) for row in rows)])
    return ENUM_HEADER + "".join(f"    {name} = {code}\n" for code, name in members)


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (shorter messages)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if the output is stale")
    parser.add_argument("--table", type=Path, default=TABLE, help="the error table (TOML)")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the module to write")
    parser.add_argument("--enum-output", type=Path, default=ENUM_OUTPUT,
                        help="the ErrorCode module to write")
    parser.add_argument(
        "--base-module", type=Path, default=BASE_MODULE, help="the hand-written errors module"
    )
    args = parser.parse_args(argv)
    try:
        rows = load(args.table, args.base_module)
        outputs = {args.output: render(rows), args.enum_output: render_enum(rows)}
    except TableError as exc:
        print(f"error table is not valid: {exc}", file=sys.stderr)
        return 2
    if args.check:
        stale = [out for out, src in outputs.items()
                 if (out.read_text(encoding="utf-8") if out.exists() else "") != src]
        for out in stale:
            print(f"{_shown(out)} is stale: run `python tools/gen_errors.py` "
                  "and commit the result", file=sys.stderr)
        if stale:
            return 1
        for out in outputs:
            print(f"{_shown(out)} is up to date")
        return 0
    for out, src in outputs.items():
        out.write_text(src, encoding="utf-8")
        print(f"wrote {_shown(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
