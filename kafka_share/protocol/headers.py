"""Request and response headers (hand-written: they are tiny and have quirks).

Request header v1: api_key int16, api_version int16, correlation_id int32,
client_id nullable int16-length string. v2 adds a tagged-field section. The
client_id stays a *non-compact* string even in v2 (Kafka marks it
``flexibleVersions: none``).

Response header v0: correlation_id int32. v1 adds a tagged-field section.

Which version to use: a request whose body version is flexible uses request
header v2 and gets response header v1; otherwise v1/v0. The one exception is
ApiVersions: its *response* always uses header v0, whatever the request
version, because the client cannot know yet whether the broker speaks
flexible versions (KIP-511).
"""

from __future__ import annotations

import struct

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import CorruptMessageError
from kafka_share.protocol.primitives import (
    read_nullable_string,
    skip_tagged_fields,
    write_nullable_string,
)

__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "request_header_version",
    "response_header_version",
]

_API_VERSIONS_KEY = 18
_HEAD = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")


def request_header_version(api_key: int, flexible: bool) -> int:
    """Request header version for a request body that is (not) flexible."""
    del api_key  # every request follows the flexible rule; kept for symmetry
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    """Response header version; ApiVersions responses always use v0."""
    if api_key == _API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0


@attrs_repr
@attrs.define(slots=True, kw_only=True, repr=False)
class RequestHeader:
    """Kafka request header (v1 or v2)."""

    request_api_key: int
    request_api_version: int
    correlation_id: int
    client_id: str | None = None

    def encode(self, version: int) -> bytes:
        """Encode at header ``version`` (1 or 2)."""
        if version not in (1, 2):
            raise ValueError(f"request header version {version} is not supported (1-2)")
        out = bytearray(
            _HEAD.pack(self.request_api_key, self.request_api_version, self.correlation_id)
        )
        write_nullable_string(out, self.client_id)
        if version >= 2:
            out.append(0)  # no tagged fields
        return bytes(out)

    @classmethod
    def decode(cls, buf: memoryview, version: int) -> tuple[RequestHeader, int]:
        """Decode from the start of ``buf``; returns the header and the body offset."""
        try:
            api_key, api_version, correlation_id = _HEAD.unpack_from(buf, 0)
        except struct.error:
            raise CorruptMessageError(
                f"request header needs 8 bytes, got {len(buf)}"
            ) from None
        client_id, pos = read_nullable_string(buf, 8)
        if version >= 2:
            pos = skip_tagged_fields(buf, pos)
        return cls(
            request_api_key=api_key,
            request_api_version=api_version,
            correlation_id=correlation_id,
            client_id=client_id,
        ), pos


@attrs_repr
@attrs.define(slots=True, kw_only=True, repr=False)
class ResponseHeader:
    """Kafka response header (v0 or v1)."""

    correlation_id: int

    def encode(self, version: int) -> bytes:
        """Encode at header ``version`` (0 or 1)."""
        if version not in (0, 1):
            raise ValueError(f"response header version {version} is not supported (0-1)")
        data = _CORRELATION.pack(self.correlation_id)
        return data + b"\x00" if version == 1 else data

    @classmethod
    def decode(cls, buf: memoryview, version: int) -> tuple[ResponseHeader, int]:
        """Decode from the start of ``buf``; returns the header and the body offset."""
        if len(buf) < 4:
            raise CorruptMessageError(
                f"response header needs 4 bytes for the correlation id, got {len(buf)}"
            )
        (correlation_id,) = _CORRELATION.unpack_from(buf, 0)
        pos = 4
        if version >= 1:
            pos = skip_tagged_fields(buf, pos)
        return cls(correlation_id=correlation_id), pos
