#!/usr/bin/env python3
"""Generate ``kafka_share/protocol/messages.py`` from the TOML message schemas.

Usage::

    python tools/gen_messages.py           # (re)write messages.py
    python tools/gen_messages.py --check   # exit 1 if messages.py is stale

Schema format (one file per message under ``kafka_share/protocol/schemas/``)::

    name = "ShareFetchRequest"        # Kafka's message name
    kind = "request"                  # "request" | "response" | "header"
    api_key = 78
    valid_versions = "1-2"            # "N", "N-M" or "N+"
    flexible_versions = "0+"          # or "none"

    [[fields]]                        # in wire order
    name = "GroupId"                  # Kafka's CamelCase name; snake_cased in Python
    type = "string"                   # int8..int64, uint16, uint32, float64, bool, string,
                                      # bytes, records, uuid, []T, or a struct name
    versions = "0+"
    nullable_versions = "0+"          # optional
    default = "null"                  # optional: Kafka's default literal
    ignorable = true                  # optional: may be dropped when the version lacks it
    tag = 0                           # optional, with tagged_versions: a tagged field
    tagged_versions = "3+"
    sensitive = true                  # optional: credentials, left out of repr
      [[fields.fields]]               # a struct's (or struct array's) own fields
      ...

    [[common_structs]]                # structs shared by several fields
    name = "TopicPartitions"
    versions = "0+"
      [[common_structs.fields]]
      ...

The output is straight-line code: for every (struct, version) one reader over
``memoryview`` + position and one writer into a ``bytearray``, with runs of
fixed-width fields merged into one precompiled ``struct.Struct``. Versions
whose code would be identical share one function.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "kafka_share" / "protocol" / "schemas"
OUTPUT = ROOT / "kafka_share" / "protocol" / "messages.py"

_INF = 1 << 15

# Kafka type -> (struct format char, Python type)
FIXED: dict[str, tuple[str, str]] = {
    "int8": ("b", "int"),
    "int16": ("h", "int"),
    "int32": ("i", "int"),
    "int64": ("q", "int"),
    "uint16": ("H", "int"),
    "uint32": ("I", "int"),
    "float64": ("d", "float"),
    "bool": ("?", "bool"),
    "uuid": ("16s", "uuid.UUID"),
}
FIXED_SIZE = {"b": 1, "h": 2, "i": 4, "q": 8, "H": 2, "I": 4, "d": 8, "?": 1, "16s": 16}
VARIABLE = {"string": "str", "bytes": "bytes", "records": "bytes | memoryview"}


@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int  # inclusive; _INF for "N+"; lo > hi for "none"

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), _INF)
        if "-" in text:
            a, b = text.split("-")
            return cls(int(a), int(b))
        return cls(int(text), int(text))

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and self.lo <= v <= self.hi

    def intersects(self, lo: int, hi: int) -> bool:
        return max(self.lo, lo) <= min(self.hi, hi)


@dataclass
class Field:
    name: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions | None
    tag: int | None
    default: Any
    ignorable: bool
    struct: Struct | None = None  # for struct / []struct fields
    #: Credentials: left out of the class's repr, so logging a message cannot leak them.
    sensitive: bool = False

    @property
    def py_name(self) -> str:
        return snake(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass
class Struct:
    name: str
    path: str  # Python qualified name, e.g. ShareFetchRequest.FetchTopic
    fields: list[Field] = field(default_factory=list)


@dataclass
class Message:
    name: str
    kind: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: Struct
    structs: list[Struct]  # nested, post-order (leaves first), root excluded


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def const_name(name: str) -> str:
    return snake(name).upper()


def load(path: Path) -> Message:
    raw = tomllib.loads(path.read_text())
    name = raw["name"]
    structs: dict[str, Struct] = {}
    order: list[Struct] = []

    def parse_fields(items: list[dict[str, Any]]) -> list[Field]:
        out = []
        for it in items:
            f = Field(
                name=it["name"],
                type=it["type"],
                versions=Versions.parse(it["versions"]),
                nullable=Versions.parse(it.get("nullable_versions")),
                tagged=Versions.parse(it["tagged_versions"]) if "tagged_versions" in it else None,
                tag=it.get("tag"),
                default=it.get("default"),
                ignorable=bool(it.get("ignorable", False)),
                sensitive=bool(it.get("sensitive", False)),
            )
            if "fields" in it:
                sname = f.elem
                if sname in structs:
                    raise SystemExit(f"{path.name}: duplicate struct name {sname}")
                st = Struct(sname, f"{name}.{sname}")
                structs[sname] = st
                st.fields = parse_fields(it["fields"])
                order.append(st)
            out.append(f)
        return out

    for cs in raw.get("common_structs", []):
        st = Struct(cs["name"], f"{name}.{cs['name']}")
        structs[cs["name"]] = st
        st.fields = parse_fields(cs["fields"])
        order.append(st)
    root = Struct(name, name)
    root.fields = parse_fields(raw["fields"])

    def resolve(st: Struct) -> None:
        for f in st.fields:
            if f.elem in FIXED or f.elem in VARIABLE:
                continue
            if f.elem not in structs:
                raise SystemExit(f"{path.name}: unknown type {f.type} of field {f.name}")
            f.struct = structs[f.elem]

    for st in [*order, root]:
        resolve(st)
    return Message(
        name=name,
        kind=raw["kind"],
        api_key=raw.get("api_key"),
        valid=Versions.parse(raw["valid_versions"]),
        flexible=Versions.parse(raw["flexible_versions"]),
        root=root,
        structs=order,
    )


# -- Python types and defaults -----------------------------------------------------------------


class Gen:
    def __init__(self, msg: Message, structs_fmt: dict[str, str]) -> None:
        self.msg = msg
        self.vlo = msg.valid.lo
        self.vhi = msg.valid.hi
        self.struct_consts = structs_fmt  # fmt -> const name, shared across messages

    def nullable_any(self, f: Field) -> bool:
        return f.nullable.intersects(max(self.vlo, f.versions.lo), min(self.vhi, f.versions.hi))

    def elem_type(self, f: Field) -> str:
        if f.struct is not None:
            return f.struct.path
        if f.elem in FIXED:
            return FIXED[f.elem][1]
        return VARIABLE[f.elem]

    def py_type(self, f: Field) -> str:
        t = f"list[{self.elem_type(f)}]" if f.is_array else self.elem_type(f)
        if self.nullable_any(f):
            t += " | None"
        return t

    def default_expr(self, f: Field) -> tuple[str, bool]:
        """(expression, is_factory)."""
        d = f.default
        nullable = self.nullable_any(f)
        if f.is_array:
            if d == "null" and nullable:
                return "None", False
            return "list", True
        if f.struct is not None:
            if d == "null" and nullable:
                return "None", False
            return f"lambda: {f.struct.path}()", True
        t = f.type
        if t in ("string", "bytes", "records"):
            if (d == "null" or t == "records") and nullable:
                return "None", False
            if t == "string":
                return repr("" if d in (None, "null") else d), False
            return 'b""', False
        if t == "uuid":
            return "ZERO_UUID", False
        if t == "bool":
            return ("True" if str(d).lower() == "true" else "False"), False
        if t == "float64":
            return repr(float(d or 0)), False
        if d is None:
            return "0", False
        return str(int(str(d), 0)), False

    def default_value_check(self, f: Field, expr: str) -> str:
        """A boolean expression that is true when ``expr`` differs from the field's default."""
        d, factory = self.default_expr(f)
        if f.is_array:
            return f"{expr}" if factory else f"{expr} is not None"
        if f.struct is not None:
            return f"{expr} != {f.struct.path}()" if factory else f"{expr} is not None"
        if d == "None":
            return f"{expr} is not None"
        return f"{expr} != {d}"

    # -- code for one (struct, version) ---------------------------------------------------------

    def regular_fields(self, st: Struct, v: int) -> list[Field]:
        return [f for f in st.fields if v in f.versions and not (f.tagged and v in f.tagged)]

    def tagged_fields(self, st: Struct, v: int) -> list[Field]:
        fs = [f for f in st.fields if f.tagged is not None and v in f.tagged and v in f.versions]
        return sorted(fs, key=lambda f: f.tag or 0)

    def fixed_groups(self, fields: list[Field]) -> list[list[Field]]:
        groups: list[list[Field]] = []
        cur: list[Field] = []
        for f in fields:
            if not f.is_array and f.type in FIXED:
                cur.append(f)
            else:
                if cur:
                    groups.append(cur)
                    cur = []
                groups.append([f])
        if cur:
            groups.append(cur)
        return groups

    def sconst(self, fmt: str) -> str:
        if fmt not in self.struct_consts:
            self.struct_consts[fmt] = f"_S_{len(self.struct_consts)}"
        return self.struct_consts[fmt]

    def reader_name(self, st: Struct, v: int, canon: dict[tuple[str, int], str]) -> str:
        return canon[(st.path, v)]

    def read_value(
        self, f: Field, v: int, flex: bool, target: str, canon: dict[tuple[str, int], str],
        ind: str, buf: str = "buf", declare: bool = True,
    ) -> list[str]:
        """Lines that read field ``f`` into local ``target`` and advance ``pos``."""
        nullable = v in f.nullable
        c = "compact_" if flex else ""
        n = "nullable_" if nullable else ""
        lines: list[str] = []
        if f.is_array:
            etype = self.elem_type(f)
            lines.append(f"{ind}n, pos = read_{c}array_len({buf}, pos)")
            decl = f"list[{etype}]" + (" | None" if self.nullable_any(f) else "")
            if f.elem in FIXED and f.elem != "uuid":
                ch = FIXED[f.elem][0]
                size = FIXED_SIZE[ch]
                body = [
                    f"{ind}{target} = list(struct.unpack_from(f\">{{n}}{ch}\", {buf}, pos))",
                    f"{ind}pos += {size} * n" if size > 1 else f"{ind}pos += n",
                ]
            else:
                body = [f"{ind}{target} = []", f"{ind}for _ in range(n):"]
                el = f"e_{f.py_name}"
                body += self.read_scalar(f, v, flex, False, el, canon, ind + "    ", buf)
                body.append(f"{ind}    {target}.append({el})")
            if declare:
                lines.append(f"{ind}{target}: {decl}")
            lines.append(f"{ind}if n < 0:")
            if nullable:
                lines.append(f"{ind}    {target} = None")
            else:
                lines.append(
                    f"{ind}    raise CorruptMessageError(\"non-nullable array is null\")"
                )
            lines.append(f"{ind}else:")
            lines += ["    " + ln for ln in body]
            return lines
        out = self.read_scalar(f, v, flex, nullable, target, canon, ind, buf, c, n)
        if not declare:
            out = [ln for ln in out if not ln.startswith(f"{ind}{target}: ")]
        return out

    def read_scalar(
        self, f: Field, v: int, flex: bool, nullable: bool, target: str,
        canon: dict[tuple[str, int], str], ind: str, buf: str = "buf",
        c: str | None = None, n: str | None = None,
    ) -> list[str]:
        c = ("compact_" if flex else "") if c is None else c
        n = ("nullable_" if nullable else "") if n is None else n
        t = f.elem
        if f.struct is not None:
            reader = self.reader_name(f.struct, v, canon)
            if nullable and not f.is_array:
                return [
                    f"{ind}{target}: {f.struct.path} | None",
                    f"{ind}if {buf}[pos] >= 128:  # int8 marker: -1 = null",
                    f"{ind}    {target} = None",
                    f"{ind}    pos += 1",
                    f"{ind}else:",
                    f"{ind}    {target}, pos = {reader}({buf}, pos + 1)",
                ]
            return [f"{ind}{target}, pos = {reader}({buf}, pos)"]
        if t in FIXED:
            ch = FIXED[t][0]
            if t == "uuid":
                return [f"{ind}{target}, pos = read_uuid({buf}, pos)"]
            return [
                f"{ind}({target},) = {self.sconst(ch)}.unpack_from({buf}, pos)",
                f"{ind}pos += {FIXED_SIZE[ch]}",
            ]
        if t == "string":
            return [f"{ind}{target}, pos = read_{c}{n}string({buf}, pos)"]
        if t == "bytes":
            return [f"{ind}{target}, pos = read_{c}{n}bytes({buf}, pos)"]
        if t == "records":
            if nullable:
                return [f"{ind}{target}, pos = read_{c}records({buf}, pos)"]
            return [
                f"{ind}{target}_, pos = read_{c}records({buf}, pos)",
                f"{ind}if {target}_ is None:",
                f"{ind}    raise CorruptMessageError(\"non-nullable records field is null\")",
                f"{ind}{target} = {target}_",
            ]
        raise AssertionError(t)

    def gen_reader(self, st: Struct, v: int, fname: str, canon: dict[tuple[str, int], str]) -> str:
        flex = v in self.msg.flexible
        fields = self.regular_fields(st, v)
        tagged = self.tagged_fields(st, v) if flex else []
        sname = st.name
        lines = [
            f"def {fname}(buf: memoryview, pos: int) -> tuple[{st.path}, int]:",
            '    f = ""',
            "    try:",
        ]
        ind = "        "
        for grp in self.fixed_groups(fields):
            g0 = grp[0]
            if len(grp) > 1 or (g0.type in FIXED and not g0.is_array and g0.type != "uuid"):
                fmt = "".join(FIXED[g.type][0] for g in grp)
                size = sum(FIXED_SIZE[FIXED[g.type][0]] for g in grp)
                lines.append(f"{ind}f = {', '.join(g.py_name for g in grp)!r}")
                targets = [
                    ("v_" + g.py_name + "_b" if g.type == "uuid" else "v_" + g.py_name)
                    for g in grp
                ]
                unpack = f"{self.sconst(fmt)}.unpack_from(buf, pos)"
                lines.append(f"{ind}({', '.join(targets)},) = {unpack}")
                lines.append(f"{ind}pos += {size}")
                for g in grp:
                    if g.type == "uuid":
                        lines.append(f"{ind}v_{g.py_name} = uuid.UUID(bytes=v_{g.py_name}_b)")
                continue
            f = grp[0]
            lines.append(f"{ind}f = {f.py_name!r}")
            lines += self.read_value(f, v, flex, "v_" + f.py_name, canon, ind)
        if flex:
            lines.append(f"{ind}f = 'tagged fields'")
            if not tagged:
                lines.append(f"{ind}if buf[pos] == 0:")
                lines.append(f"{ind}    pos += 1")
                lines.append(f"{ind}else:")
                lines.append(f"{ind}    pos = skip_tagged_fields(buf, pos)")
            else:
                for tf in tagged:
                    d, factory = self.default_expr(tf)
                    if factory:
                        val = "[]" if d == "list" else f"{tf.struct.path}()" if tf.struct else d
                    else:
                        val = d
                    lines.append(f"{ind}v_{tf.py_name}: {self.py_type(tf)} = {val}")
                lines.append(f"{ind}if buf[pos] == 0:")
                lines.append(f"{ind}    pos += 1")
                lines.append(f"{ind}else:")
                lines.append(f"{ind}    count, pos = read_uvarint(buf, pos)")
                lines.append(f"{ind}    for _ in range(count):")
                lines.append(f"{ind}        tag, pos = read_uvarint(buf, pos)")
                lines.append(f"{ind}        size, pos = read_uvarint(buf, pos)")
                lines.append(f"{ind}        end = pos + size")
                lines.append(f"{ind}        if end > len(buf):")
                lines.append(
                    f"{ind}            raise CorruptMessageError("
                    f"f\"tagged field {{tag}} of {{size}} bytes overruns the buffer\")"
                )
                lines.append(f"{ind}        sub = buf[:end]")
                first = True
                for tf in tagged:
                    kw = "if" if first else "elif"
                    first = False
                    lines.append(f"{ind}        {kw} tag == {tf.tag}:")
                    lines.append(f"{ind}            f = {tf.py_name!r}")
                    lines += self.read_value(
                        tf, v, True, "v_" + tf.py_name, canon, ind + "            ", "sub", False
                    )
                lines.append(f"{ind}        pos = end")
        if lines[-1] == "    try:":
            lines.append(f"{ind}pass")
        lines.append("    except CorruptMessageError as exc:")
        lines.append(f"        raise CorruptMessageError(f\"{sname}.{{f}}: {{exc}}\") from None")
        lines.append("    except (struct.error, IndexError) as exc:")
        lines.append(
            f"        raise CorruptMessageError("
            f"f\"{sname}.{{f}} at offset {{pos}}: {{exc}}\") from None"
        )
        present = fields + tagged
        args = ", ".join(f"{f.py_name}=v_{f.py_name}" for f in present)
        lines.append(f"    return {st.path}({args}), pos")
        return "\n".join(lines) + "\n"

    # -- writers ----------------------------------------------------------------------------------

    def write_value(
        self, f: Field, v: int, flex: bool, expr: str, canon: dict[tuple[str, int], str],
        ind: str, out: str = "out",
    ) -> list[str]:
        nullable = v in f.nullable
        c = "compact_" if flex else ""
        lines: list[str] = []
        may_be_none = self.nullable_any(f)
        if may_be_none and not nullable:
            lines.append(f"{ind}if {expr} is None:")
            lines.append(
                f"{ind}    raise ValueError(\"{self.msg.name}: field {f.py_name} "
                f"cannot be null in version {v}\")"
            )
        if f.is_array:
            if nullable:
                lines.append(f"{ind}if {expr} is None:")
                lines.append(f"{ind}    write_{c}array_len({out}, -1)")
                lines.append(f"{ind}else:")
                ind2 = ind + "    "
            else:
                ind2 = ind
            lines.append(f"{ind2}write_{c}array_len({out}, len({expr}))")
            if f.elem in FIXED and f.elem != "uuid":
                ch = FIXED[f.elem][0]
                lines.append(f"{ind2}{out} += struct.pack(f\">{{len({expr})}}{ch}\", *{expr})")
            else:
                el = f"e_{f.py_name}"
                lines.append(f"{ind2}for {el} in {expr}:")
                lines += self.write_scalar(f, v, flex, False, el, canon, ind2 + "    ", out)
            return lines
        return lines + self.write_scalar(f, v, flex, nullable, expr, canon, ind, out)

    def write_scalar(
        self, f: Field, v: int, flex: bool, nullable: bool, expr: str,
        canon: dict[tuple[str, int], str], ind: str, out: str,
    ) -> list[str]:
        c = "compact_" if flex else ""
        n = "nullable_" if nullable else ""
        t = f.elem
        if f.struct is not None:
            writer = canon[(f.struct.path, v)].replace("_r_", "_w_", 1)
            if nullable and not f.is_array:
                return [
                    f"{ind}if {expr} is None:",
                    f"{ind}    {out}.append(0xFF)",
                    f"{ind}else:",
                    f"{ind}    {out}.append(1)",
                    f"{ind}    {writer}({expr}, {out})",
                ]
            return [f"{ind}{writer}({expr}, {out})"]
        if t in FIXED:
            if t == "uuid":
                return [f"{ind}{out} += {expr}.bytes"]
            return [f"{ind}{out} += {self.sconst(FIXED[t][0])}.pack({expr})"]
        if t == "string":
            return [f"{ind}write_{c}{n}string({out}, {expr})"]
        return [f"{ind}write_{c}{n}bytes({out}, {expr})"]

    def gen_writer(self, st: Struct, v: int, fname: str, canon: dict[tuple[str, int], str]) -> str:
        flex = v in self.msg.flexible
        fields = self.regular_fields(st, v)
        tagged = self.tagged_fields(st, v) if flex else []
        lines = [f"def {fname}(o: {st.path}, out: bytearray) -> None:"]
        ind = "    "
        # Fields this version cannot carry: Kafka refuses non-default values unless ignorable.
        for f in st.fields:
            if v in f.versions or f.ignorable or not f.versions.intersects(self.vlo, self.vhi):
                continue
            lines.append(f"{ind}if {self.default_value_check(f, 'o.' + f.py_name)}:")
            lines.append(
                f"{ind}    raise UnsupportedVersionError(\"{self.msg.name}: field "
                f"{st.name}.{f.py_name} is not supported in version {v}\")"
            )
        for grp in self.fixed_groups(fields):
            if len(grp) > 1:
                fmt = "".join(FIXED[g.type][0] for g in grp)
                vals = ", ".join(
                    f"o.{g.py_name}.bytes" if g.type == "uuid" else f"o.{g.py_name}" for g in grp
                )
                lines.append(f"{ind}out += {self.sconst(fmt)}.pack({vals})")
                continue
            f = grp[0]
            lines += self.write_value(f, v, flex, f"o.{f.py_name}", canon, ind)
        if flex:
            if not tagged:
                lines.append(f"{ind}out.append(0)")
            else:
                lines.append(f"{ind}count = 0")
                for tf in tagged:
                    lines.append(f"{ind}if {self.default_value_check(tf, 'o.' + tf.py_name)}:")
                    lines.append(f"{ind}    count += 1")
                lines.append(f"{ind}write_uvarint(out, count)")
                for tf in tagged:
                    lines.append(f"{ind}if {self.default_value_check(tf, 'o.' + tf.py_name)}:")
                    lines.append(f"{ind}    tmp = bytearray()")
                    lines += self.write_value(
                        tf, v, True, f"o.{tf.py_name}", canon, ind + "    ", "tmp"
                    )
                    lines.append(f"{ind}    write_uvarint(out, {tf.tag})")
                    lines.append(f"{ind}    write_uvarint(out, len(tmp))")
                    lines.append(f"{ind}    out += tmp")
        if len(lines) == 1:
            lines.append(f"{ind}pass")
        return "\n".join(lines) + "\n"

    # -- whole message --------------------------------------------------------------------------

    def gen_functions(self) -> tuple[str, dict[int, str], dict[int, str]]:
        """Reader/writer functions for every struct and version, deduplicated."""
        canon: dict[tuple[str, int], str] = {}
        chunks: list[str] = []
        root_r: dict[int, str] = {}
        root_w: dict[int, str] = {}
        for st in [*self.msg.structs, self.msg.root]:
            seen: dict[str, str] = {}  # reader body (with placeholder name) -> canonical name
            for v in range(self.vlo, self.vhi + 1):
                placeholder = "__FN__"
                rbody = self.gen_reader(st, v, placeholder, canon)
                wbody = self.gen_writer(st, v, placeholder, canon)
                key = rbody + "\0" + wbody
                if key in seen:
                    name = seen[key]
                else:
                    base = st.path.replace(".", "_")
                    name = f"_r_{base}_v{v}"
                    seen[key] = name
                    chunks.append(rbody.replace(placeholder, name))
                    chunks.append(wbody.replace(placeholder, name.replace("_r_", "_w_", 1)))
                canon[(st.path, v)] = name
                if st is self.msg.root:
                    root_r[v] = name
                    root_w[v] = name.replace("_r_", "_w_", 1)
        return "\n\n".join(chunks), root_r, root_w

    def gen_class(self, st: Struct, indent: str, nested: list[Struct]) -> list[str]:
        # A plain class with __slots__ and its methods written out: nothing is
        # generated when the module is imported (no exec, no decorator).
        lines = [f"{indent}class {st.name}:"]
        i2 = indent + "    "
        i3 = i2 + "    "
        if st is self.msg.root:
            lines.append(f'{i2}"""Kafka {st.name} (versions {self.vlo}-{self.vhi})."""')
        else:
            lines.append(f'{i2}"""The ``{st.name}`` struct of :class:`{self.msg.name}`."""')
        lines.append("")
        if st is self.msg.root:
            if self.msg.api_key is not None:
                lines.append(f"{i2}API_KEY: ClassVar[int] = {self.msg.api_key}")
            lines.append(f"{i2}MIN_VERSION: ClassVar[int] = {self.vlo}")
            lines.append(f"{i2}MAX_VERSION: ClassVar[int] = {self.vhi}")
            flo = self.msg.flexible.lo if self.msg.flexible.lo <= self.msg.flexible.hi else None
            lines.append(f"{i2}FLEXIBLE_MIN_VERSION: ClassVar[int | None] = {flo}")
            if self.msg.kind == "request":
                resp = self.msg.name[: -len("Request")] + "Response"
                lines.append(f"{i2}RESPONSE_TYPE: ClassVar[type[{resp}]]")
            lines.append("")
            for ns in nested:
                lines += self.gen_class(ns, i2, [])
                lines.append("")
        fields = [f for f in st.fields if f.versions.intersects(self.vlo, self.vhi)]
        names = [f.py_name for f in fields]
        slots = ", ".join(repr(n) for n in names) + ("," if len(names) == 1 else "")
        lines.append(f"{i2}__slots__ = ({slots})")
        # Compared by value and mutable, so unhashable (as attrs made them).
        lines.append(f"{i2}__hash__ = None  # type: ignore[assignment]")
        lines.append("")
        for f in fields:
            lines.append(f"{i2}{f.py_name}: {self.py_type(f)}")
        lines.append("")
        params: list[str] = []
        body: list[str] = []
        for f in fields:
            d, factory = self.default_expr(f)
            if factory:
                # A fresh list (or struct) per instance, as attrs' factory= did.
                # A sentinel, not None: None is a value of a nullable field.
                params.append(f"{f.py_name}: {self.py_type(f)} = _FRESH")
                make = "[]" if d == "list" else d.removeprefix("lambda: ")
                body.append(
                    f"{i3}self.{f.py_name} = {make} if {f.py_name} is _FRESH else {f.py_name}"
                )
            else:
                params.append(f"{f.py_name}: {self.py_type(f)} = {d}")
                body.append(f"{i3}self.{f.py_name} = {f.py_name}")
        if params:
            lines.append(f"{i2}def __init__(")
            lines.append(f"{i3}self,")
            lines.append(f"{i3}*,")
            lines += [f"{i3}{p}," for p in params]
            lines.append(f"{i2}) -> None:")
            lines += body
        else:
            lines.append(f"{i2}def __init__(self) -> None:")
            lines.append(f"{i3}pass")
        lines.append("")
        lines.append(f"{i2}def __eq__(self, other: object) -> bool:")
        lines.append(f"{i3}if not isinstance(other, {st.path}):")
        lines.append(f"{i3}    return NotImplemented")
        if names:
            mine = ", ".join(f"self.{n}" for n in names) + ("," if len(names) == 1 else "")
            theirs = ", ".join(f"other.{n}" for n in names) + ("," if len(names) == 1 else "")
            lines.append(f"{i3}return ({mine}) == ({theirs})")
        else:
            lines.append(f"{i3}return True")
        lines.append("")
        shown = [f for f in fields if not f.sensitive]
        qual = st.path
        lines.append(f"{i2}def __repr__(self) -> str:")
        if shown:
            inner = ", ".join(f"{f.py_name}={{self.{f.py_name}!r}}" for f in shown)
            lines.append(f'{i3}return f"{qual}({inner})"')
        else:
            lines.append(f'{i3}return "{qual}()"')
        if st is self.msg.root:
            rname = st.name
            table = f"_{const_name(rname)}"
            lines += [
                "",
                f"{i2}def encode(self, version: int) -> bytes:",
                f'{i2}    """Encode the body (no header) at ``version``.',
                "",
                f"{i2}    Raises:",
                f"{i2}        UnsupportedVersionError: the version is out of range, or a field",
                f"{i2}            holds a value this version cannot carry.",
                f"{i2}        ValueError: a value cannot be encoded (e.g. an int out of range).",
                f'{i2}    """',
                f"{i2}    if not {self.vlo} <= version <= {self.vhi}:",
                f"{i2}        raise UnsupportedVersionError(",
                f'{i2}            f"{rname} version {{version}} is not supported '
                f'(valid versions {self.vlo}-{self.vhi})"',
                f"{i2}        )",
                f"{i2}    out = bytearray()",
                f"{i2}    try:",
                f"{i2}        {table}_WRITERS[version - {self.vlo}](self, out)",
                f"{i2}    except (struct.error, TypeError, AttributeError, OverflowError) as exc:",
                f'{i2}        raise ValueError(',
                f'{i2}            f"cannot encode {rname} v{{version}}: {{exc}}"',
                f"{i2}        ) from exc",
                f"{i2}    return bytes(out)",
                "",
                f"{i2}@classmethod",
                f"{i2}def decode(cls, data: bytes | memoryview, version: int) -> {rname}:",
                f'{i2}    """Decode a body (no header) at ``version``.',
                "",
                f"{i2}    Raises:",
                f"{i2}        CorruptMessageError: the bytes are not a valid {rname} at this",
                f"{i2}            version; the message names the field and offset.",
                f"{i2}        UnsupportedVersionError: the version is out of range.",
                f'{i2}    """',
                f"{i2}    if not {self.vlo} <= version <= {self.vhi}:",
                f"{i2}        raise UnsupportedVersionError(",
                f'{i2}            f"{rname} version {{version}} is not supported '
                f'(valid versions {self.vlo}-{self.vhi})"',
                f"{i2}        )",
                f"{i2}    return _decode_body(",
                f'{i2}        "{rname}", {table}_READERS[version - {self.vlo}], data, version',
                f"{i2}    )",
            ]
        return lines

    def generate(self) -> tuple[str, str]:
        funcs, root_r, root_w = self.gen_functions()
        cls = "\n".join(self.gen_class(self.msg.root, "", self.msg.structs))
        table = f"_{const_name(self.msg.name)}"
        versions = range(self.vlo, self.vhi + 1)
        readers = ", ".join(root_r[v] for v in versions)
        writers = ", ".join(root_w[v] for v in versions)
        tail = (
            f"{table}_READERS: tuple[Callable[[memoryview, int], tuple[{self.msg.name}, int]], ...]"
            f" = (\n    {readers},\n)\n"
            f"{table}_WRITERS: tuple[Callable[[{self.msg.name}, bytearray], None], ...] = (\n"
            f"    {writers},\n)\n"
        )
        return cls + "\n", funcs + "\n\n" + tail


HEADER = '''\
# GENERATED by tools/gen_messages.py from kafka_share/protocol/schemas/*.toml; do not edit.
# Regenerate with: python tools/gen_messages.py
"""Kafka message classes (bodies only; headers live in ``headers.py``).

Every message is a plain class (``__slots__``, keyword-only ``__init__``, ``__eq__``
and ``__repr__`` written out here, sensitive fields left out of the repr) with
snake_case fields and Kafka's defaults, nested struct classes under Kafka's struct names, and:

* ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION``: what this module can encode/decode;
* ``FLEXIBLE_MIN_VERSION``: first flexible (compact + tagged fields) version, or None;
* ``RESPONSE_TYPE`` on requests;
* ``encode(version) -> bytes`` and ``decode(data, version)`` (classmethod).

Decoding takes ``bytes`` or a ``memoryview``; ``records`` fields come back as
zero-copy ``memoryview`` slices of the input. Unknown tagged fields are skipped.
Bytes left after a complete body raise ``TrailingBytesError`` (a
``CorruptMessageError``) carrying the decoded message, for callers that accept it.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from kafka_share.errors import CorruptMessageError, UnsupportedVersionError
from kafka_share.protocol.primitives import (
    ZERO_UUID,
    TrailingBytesError,
    read_array_len,
    read_bytes,
    read_compact_array_len,
    read_compact_bytes,
    read_compact_nullable_bytes,
    read_compact_nullable_string,
    read_compact_records,
    read_compact_string,
    read_nullable_bytes,
    read_nullable_string,
    read_records,
    read_string,
    read_uuid,
    read_uvarint,
    skip_tagged_fields,
    write_array_len,
    write_bytes,
    write_compact_array_len,
    write_compact_bytes,
    write_compact_nullable_bytes,
    write_compact_nullable_string,
    write_compact_string,
    write_nullable_bytes,
    write_nullable_string,
    write_string,
    write_uvarint,
)

_T = TypeVar("_T")

#: Default of list and struct fields: each instance gets a fresh one.
_FRESH: Any = object()


def _decode_body(
    name: str,
    reader: Callable[[memoryview, int], tuple[_T, int]],
    data: bytes | memoryview,
    version: int,
) -> _T:
    buf = data if isinstance(data, memoryview) else memoryview(data)
    if buf.format != "B" or buf.ndim != 1:
        buf = buf.cast("B")
    try:
        obj, pos = reader(buf, 0)
    except CorruptMessageError as exc:
        raise CorruptMessageError(f"cannot decode {name} v{version}: {exc}") from None
    if pos != len(buf):
        raise TrailingBytesError(
            f"cannot decode {name} v{version}: {len(buf) - pos} unexpected trailing bytes "
            f"at offset {pos}",
            obj,
            len(buf) - pos,
        )
    return obj

'''


def _unused_imports_guard(src: str) -> str:
    """Drop primitive imports the generated code does not use (keeps mypy/ruff quiet)."""
    head, sep, body = src.partition('_T = TypeVar("_T")')
    lines = head.splitlines()
    kept = []
    for ln in lines:
        m = re.fullmatch(r"    (\w+),", ln)
        if m and m.group(1) not in body:
            continue
        kept.append(ln)
    return "\n".join(kept) + "\n" + sep + body


def render() -> str:
    msgs = [load(p) for p in sorted(SCHEMA_DIR.glob("*.toml"))]
    consts: dict[str, str] = {}
    classes: list[str] = []
    funcs: list[str] = []
    for m in msgs:
        c, f = Gen(m, consts).generate()
        classes.append(c)
        funcs.append(f)
    parts = [HEADER]
    parts.append("\n".join(f"{name} = struct.Struct(\">{fmt}\")" for fmt, name in consts.items()))
    parts.append("\n\n" + "\n\n".join(classes))
    parts.append("\n\n" + "\n\n".join(funcs))
    # Wire requests to responses and index by API key.
    reqs = [m for m in msgs if m.kind == "request"]
    resps = [m for m in msgs if m.kind == "response"]
    links = "\n".join(
        f"{m.name}.RESPONSE_TYPE = {m.name[: -len('Request')]}Response" for m in reqs
    )
    parts.append("\n\n" + links + "\n")
    parts.append(
        "\nREQUEST_TYPES: dict[int, type] = {\n"
        + "".join(f"    {m.api_key}: {m.name},\n" for m in reqs)
        + "}\n\"\"\"Request classes by API key.\"\"\"\n"
    )
    parts.append(
        "\nRESPONSE_TYPES: dict[int, type] = {\n"
        + "".join(f"    {m.api_key}: {m.name},\n" for m in resps)
        + "}\n\"\"\"Response classes by API key.\"\"\"\n"
    )
    parts.append(
        "\nRESPONSE_DECODERS: dict[int, Callable[[bytes | memoryview, int], object]] = {\n"
        + "".join(f"    {m.api_key}: {m.name}.decode,\n" for m in resps)
        + "}\n\"\"\"``decode(data, version)`` of each response class, by API key.\"\"\"\n"
    )
    names = [*sorted(m.name for m in msgs), "REQUEST_TYPES", "RESPONSE_DECODERS", "RESPONSE_TYPES"]
    parts.append("\n__all__ = [\n" + "".join(f'    "{n}",\n' for n in names) + "]\n")
    return _unused_imports_guard("".join(parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if messages.py is stale")
    args = parser.parse_args(argv)
    src = render()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != src:
            print(
                f"{OUTPUT.relative_to(ROOT)} is stale: run `python tools/gen_messages.py` "
                "and commit the result",
                file=sys.stderr,
            )
            return 1
        print(f"{OUTPUT.relative_to(ROOT)} is up to date")
        return 0
    OUTPUT.write_text(src)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
