import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_share.records import crc32c as crc_module
from kafka_share.records.crc32c import crc32c, crc32c_pure

# Known CRC32C vectors (RFC 3720 appendix B.4 and the common check value).
VECTORS = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (b"\x00" * 32, 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_pure_python_matches_known_vectors(data: bytes, expected: int) -> None:
    assert crc32c_pure(data) == expected


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_selected_implementation_matches_known_vectors(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected
    assert crc32c(memoryview(data)) == expected


def test_accelerated_when_crc32c_package_is_installed() -> None:
    pytest.importorskip("crc32c")
    assert crc_module.accelerated() is True


def test_pure_accepts_views_and_continuation() -> None:
    data = bytes(range(256)) * 3
    assert crc32c_pure(memoryview(data)[10:500]) == crc32c(data[10:500])
    part = crc32c_pure(data[:100])
    assert crc32c_pure(data[100:], part) == crc32c_pure(data)


def test_the_first_checksum_loads_the_c_function_without_the_package_init() -> None:
    """The package's ``__init__`` imports importlib.metadata (20-30 ms on the
    first record's path): the extension module is loaded from its file instead."""
    pytest.importorskip("crc32c")
    code = (
        "import sys\n"
        "from kafka_share.records import crc32c as m\n"
        "assert m.crc32c(b'123456789') == 0xE3069283\n"
        "print(m.accelerated(), 'crc32c' in sys.modules, 'importlib.metadata' in sys.modules)\n"
        # An application importing the package afterwards gets a working one.
        "import crc32c\n"
        "print(crc32c.crc32c(b'123456789') == 0xE3069283)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["True", "False", "False", "True"]


def test_an_imported_package_or_an_unknown_layout_goes_through_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package = pytest.importorskip("crc32c")
    monkeypatch.setitem(sys.modules, "crc32c", package)
    assert crc_module._c_crc32c() is package.crc32c
    # Not imported yet, and no _crc32c extension where the package lives.
    monkeypatch.delitem(sys.modules, "crc32c")
    elsewhere = importlib.machinery.ModuleSpec("crc32c", None, is_package=True)
    elsewhere.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: elsewhere)
    function = crc_module._c_crc32c()
    assert function(b"123456789") == 0xE3069283
    assert "crc32c" in sys.modules  # imported as usual
