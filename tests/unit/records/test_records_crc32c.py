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
