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

from collections.abc import Callable

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
    # The ``crc32c`` package is imported at the first checksum, not with this
    # module: its import reads the package metadata (importlib.metadata, email,
    # zipfile...: about 4 MB and 15 ms), which a consumer that has not fetched
    # yet, or runs with check.crcs=false, need not pay.
    global _impl
    try:
        from crc32c import crc32c as c_crc32c  # noqa: PLC0415
    except ImportError:  # pragma: no cover - depends on the environment
        _impl = crc32c_pure
    else:
        _impl = c_crc32c
    return _impl


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC32C of ``data``: the C implementation if the ``crc32c`` package is
    installed, else :func:`crc32c_pure`."""
    impl = _impl or _resolve()
    return impl(data)


def accelerated() -> bool:
    """Whether :func:`crc32c` runs the C implementation."""
    return (_impl or _resolve()) is not crc32c_pure
