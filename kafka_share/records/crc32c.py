"""CRC32C (Castagnoli), the checksum of Kafka RecordBatch v2.

:func:`crc32c` uses the C implementation from the ``crc32c`` package when it is
importable (it uses SSE4.2 / ARMv8 CRC instructions where the CPU has them) and
otherwise a table-driven pure-Python fallback, :func:`crc32c_pure`, which is
far slower (about 110 ns per byte on CPython 3.11, some 15 us per 100-byte
record, against 0.02 us with the C version). With the fallback, leave ``check_crcs``
on only if the throughput is acceptable (see ``benchmarks/bench_records.py``).

:func:`accelerated` tells which one is in use.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType

__all__ = ["accelerated", "crc32c", "crc32c_pure"]

_POLY_REFLECTED = 0x82F63B78


def _make_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY_REFLECTED if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


def crc32c_pure(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC32C of ``data`` in pure Python, continuing from ``value`` (0 to start)."""
    table = _TABLE
    crc = value ^ 0xFFFFFFFF
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_impl: Callable[[bytes | bytearray | memoryview], int] | None = None


def _resolve() -> Callable[[bytes | bytearray | memoryview], int]:
    # Resolved at the first checksum, not with this module, and without running
    # the ``crc32c`` package's ``__init__`` (see :func:`_c_crc32c`).
    global _impl
    try:
        _impl = _c_crc32c()
    except ImportError:  # pragma: no cover - depends on the environment
        _impl = crc32c_pure
    return _impl


def _c_crc32c() -> Callable[[bytes | bytearray | memoryview], int]:
    """The ``crc32c`` package's C function, from its extension module alone.

    Importing the package runs its ``__init__``, which reads the package's own
    version through ``importlib.metadata`` (with ``email``, ``zipfile``, ``csv``
    ...): 20-30 ms and about 4 MB, paid by the first poll that brings records,
    so by the time to the first record of every consumer with the default
    ``check.crcs=true``. Loading the extension module (``crc32c._crc32c``)
    from its file takes about 1 ms. If the package is imported already, or its
    layout is not the one known (an extension module ``_crc32c`` in the
    package's directory, as since 2.4), the package is imported as usual.
    """
    if "crc32c" not in sys.modules:
        spec = importlib.util.find_spec("crc32c")
        for location in (spec.submodule_search_locations or []) if spec else []:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(location, "_crc32c" + suffix)
                if os.path.isfile(path):
                    return _load_extension("crc32c._crc32c", path).crc32c  # type: ignore[no-any-return]
    from crc32c import crc32c as c_crc32c  # noqa: PLC0415

    return c_crc32c


def _load_extension(name: str, path: str) -> ModuleType:
    """The extension module ``name`` from the file ``path``, not entered in
    ``sys.modules`` (an application's own ``import crc32c`` loads its own)."""
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    if spec is None:  # pragma: no cover - a file loader always gives a spec
        raise ImportError(f"cannot load {name} from {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC32C of ``data``: the C implementation if the ``crc32c`` package is
    installed, else :func:`crc32c_pure`."""
    impl = _impl or _resolve()
    return impl(data)


def accelerated() -> bool:
    """Whether :func:`crc32c` runs the C implementation."""
    return (_impl or _resolve()) is not crc32c_pure
