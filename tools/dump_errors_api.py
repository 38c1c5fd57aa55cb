#!/usr/bin/env python3
"""Dump the public surface of ``kafka_share.errors`` as JSON, to prove a refactor changed nothing.

Usage::

    python tools/dump_errors_api.py before.json   # on the old code
    python tools/dump_errors_api.py after.json    # on the new code
    diff before.json after.json

For every public name: what it is, and for classes the MRO, ``code``, ``name``,
``retriable``, the docstring, the default message and the pickle round trip;
for ``error_for_code`` its result for every known code and an unknown one.
"""

from __future__ import annotations

import inspect
import json
import pickle
import sys
from pathlib import Path
from typing import Any

# Dump the kafka_share of this checkout, not an installed copy.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka_share import errors


def _qual(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _doc(obj: object) -> dict[str, str]:
    doc = inspect.getdoc(obj) or ""
    return {"doc_first_line": doc.splitlines()[0] if doc else "", "doc": doc}


def _signature(cls: type) -> str:
    try:
        return str(inspect.signature(cls))
    except ValueError:  # a class whose __init__ is a builtin's (no Python signature)
        return "(builtin)"


def _class(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "class",
        "qualname": _qual(cls),
        "mro": [_qual(c) for c in cls.__mro__],
        "retriable": getattr(cls, "retriable", None),
        **_doc(cls),
        "signature": _signature(cls),
    }
    if issubclass(cls, errors.BrokerError):
        out["code"] = cls.code
        out["name"] = cls.name
        out["own_attrs"] = sorted(k for k in vars(cls) if not k.startswith("__"))
        inst = cls()
        out["default_str"] = str(inst)
        out["default_repr"] = repr(inst)
        out["message"] = inst.message
        again = pickle.loads(pickle.dumps(inst))
        out["pickle_roundtrip"] = type(again) is cls and again.args == inst.args
    return out


def dump() -> dict[str, Any]:
    result: dict[str, Any] = {"__all__": sorted(errors.__all__)}
    names: dict[str, Any] = {}
    for name in sorted(n for n in dir(errors) if not n.startswith("_")):
        obj = getattr(errors, name)
        if isinstance(obj, type):
            names[name] = _class(obj)
        elif callable(obj):
            signature = str(inspect.signature(obj))
            names[name] = {"kind": "function", "signature": signature, **_doc(obj)}
        else:
            names[name] = {"kind": type(obj).__name__}
    result["names"] = names
    result["ERROR_CODES"] = [[code, _qual(cls)] for code, cls in errors.ERROR_CODES.items()]
    calls = {}
    for code in [*errors.ERROR_CODES, 9999, -2]:
        for msg in (None, "broker says"):
            err = errors.error_for_code(code, msg)
            calls[f"{code}/{msg}"] = [_qual(type(err)), str(err), err.code, err.name, err.retriable]
    result["error_for_code"] = calls
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: dump_errors_api.py OUT.json", file=sys.stderr)
        return 2
    print(f"dumping {errors.__file__}", file=sys.stderr)
    with open(argv[1], "w", encoding="utf-8") as f:
        json.dump(dump(), f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
