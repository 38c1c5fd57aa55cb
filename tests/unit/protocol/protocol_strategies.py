"""Hypothesis strategies built from the TOML schemas: random valid messages per version."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from kafka_share.protocol import messages

SCHEMA_DIR = Path(messages.__file__).parent / "schemas"

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _in(spec: str | None, v: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return v >= int(spec[:-1])
    if "-" in spec:
        a, b = spec.split("-")
        return int(a) <= v <= int(b)
    return v == int(spec)


def _snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def load_schemas() -> list[dict[str, Any]]:
    return [tomllib.loads(p.read_text()) for p in sorted(SCHEMA_DIR.glob("*.toml"))]


def message_versions() -> list[tuple[type[Any], int]]:
    """Every (message class, version) pair the generated module supports."""
    out = []
    for schema in load_schemas():
        cls = getattr(messages, schema["name"])
        out += [(cls, v) for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]
    return out


def _scalar(t: str) -> st.SearchStrategy[Any]:
    if t in _INTS:
        lo, hi = _INTS[t]
        return st.integers(lo, hi)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return st.text(max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    if t == "uuid":
        return st.uuids()
    raise AssertionError(t)


def message_strategy(cls: type[Any], version: int) -> st.SearchStrategy[Any]:
    """Random instances of ``cls`` holding only what ``version`` can carry."""
    schema = next(s for s in load_schemas() if s["name"] == cls.__name__)
    commons = {c["name"]: c for c in schema.get("common_structs", [])}

    def struct_strategy(pycls: type[Any], fields: list[dict[str, Any]]) -> st.SearchStrategy[Any]:
        kw: dict[str, st.SearchStrategy[Any]] = {}
        for f in fields:
            if not _in(f["versions"], version):
                continue
            t: str = f["type"]
            elem = t[2:] if t.startswith("[]") else t
            if "fields" in f or elem in commons:
                sub_fields = f.get("fields") or commons[elem]["fields"]
                base: st.SearchStrategy[Any] = struct_strategy(getattr(cls, elem), sub_fields)
            else:
                base = _scalar(elem)
            s = st.lists(base, max_size=3) if t.startswith("[]") else base
            if _in(f.get("nullable_versions"), version):
                s = st.none() | s
            kw[_snake(f["name"])] = s
        return st.fixed_dictionaries(kw).map(lambda d: pycls(**d))

    return struct_strategy(cls, schema["fields"])
