"""Compression codecs of Kafka record batches, with a hard cap on output size.

Codec ids are the low three bits of a batch's ``attributes``
(:class:`CompressionType`): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Decoding (:func:`decompress`):

* **gzip**: :mod:`zlib` (stdlib) with a gzip/zlib header, concatenated gzip
  members accepted, output bounded through ``decompressobj(...).decompress(data,
  max_length)``.
* **snappy**: ``cramjam.snappy`` raw blocks. Java producers (and librdkafka)
  wrap them in the *xerial* framing: the 8-byte magic ``\\x82SNAPPY\\x00``, two
  big-endian int32 (version, min compatible version), then blocks of a 4-byte
  big-endian length plus one raw snappy block. Both the framed and the plain raw
  form are accepted. The decompressed length is read from each block's preamble
  and checked against the cap *before* decompressing.
* **lz4**: the LZ4 frame format (KIP-57) through ``lz4.frame``, bounded with
  ``LZ4FrameDecompressor.decompress(data, max_length)``.
* **zstd**: ``zstandard``; a frame that declares its content size is checked
  against the cap first, a streamed frame (what Java producers write) is read
  in chunks until the cap is passed.

The fetch size limits only bound *compressed* bytes, so every decoder enforces
``max_decompressed_bytes`` (default :data:`DEFAULT_MAX_DECOMPRESSED_BYTES`,
64 MiB): a batch that would inflate beyond it raises
:class:`~kafka_share.errors.CorruptMessageError` naming the cap, before more
than about the cap (plus one chunk) has been allocated.

Errors: malformed compressed data raises ``CorruptMessageError``; an unknown
codec id, or a codec whose library is not installed, raises
:class:`UnsupportedCodecError` (a ``CorruptMessageError`` subclass, so decoders
still raise only ``CorruptMessageError``) whose message names the package to
install.

Encoding (:func:`compress`) is used by :mod:`kafka_share.records.builder` and by
tests; snappy can be written raw or in the xerial framing.
"""

from __future__ import annotations

import enum
import importlib
import struct
import zlib
from typing import Any

from kafka_share.errors import CorruptMessageError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "XERIAL_MAGIC",
    "CompressionType",
    "UnsupportedCodecError",
    "compress",
    "decompress",
]

DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
"""Default cap on the decompressed size of one batch (64 MiB)."""

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_LEN = 16  # magic + int32 version + int32 min compatible version
_XERIAL_BLOCK = 32 * 1024  # block size Java's SnappyOutputStream uses
_CHUNK = 256 * 1024  # read size for streamed zstd output


class CompressionType(enum.IntEnum):
    """Codec id stored in the low 3 bits of batch attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class UnsupportedCodecError(CorruptMessageError):
    """The codec id is unknown, or the library needed for it is not installed."""


# Optional codec libraries are imported at the first batch that uses their codec
# (a consumer of uncompressed or gzip topics never loads them); a missing one
# only fails when a batch actually uses that codec.
_MODULE_FOR = {
    CompressionType.SNAPPY: "cramjam",
    CompressionType.LZ4: "lz4.frame",
    CompressionType.ZSTD: "zstandard",
}
_PACKAGE_FOR = {
    CompressionType.SNAPPY: "cramjam",
    CompressionType.LZ4: "lz4",
    CompressionType.ZSTD: "zstandard",
}
#: the codec libraries imported so far (snappy: cramjam's ``snappy`` module)
_loaded: dict[CompressionType, Any] = {}


def _library(codec: CompressionType) -> Any:
    """The imported library for ``codec``, or a clear error naming the package."""
    lib = _loaded.get(codec)
    if lib is not None:
        return lib
    try:
        module = importlib.import_module(_MODULE_FOR[codec])
    except ImportError as exc:
        package = _PACKAGE_FOR[codec]
        raise UnsupportedCodecError(
            f"{codec.name.lower()} compression needs the {package!r} package, which could not "
            f"be imported ({exc}); install it with: pip install {package}"
        ) from None
    lib = _loaded[codec] = module.snappy if codec is CompressionType.SNAPPY else module
    return lib


def _codec(codec_id: int) -> CompressionType:
    try:
        return CompressionType(codec_id)
    except ValueError:
        raise UnsupportedCodecError(
            f"unknown compression codec id {codec_id} (known: 0 none, 1 gzip, 2 snappy, "
            "3 lz4, 4 zstd)"
        ) from None


def _too_big(codec: CompressionType, cap: int) -> CorruptMessageError:
    return CorruptMessageError(
        f"{codec.name.lower()} batch decompresses to more than max_decompressed_bytes={cap}; "
        "refusing to inflate it (raise the cap if such batches are legitimate)"
    )


# --------------------------------------------------------------------------- decode


def decompress(
    codec_id: int,
    data: bytes | bytearray | memoryview,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> bytes:
    """Decompress one batch's record section.

    Args:
        codec_id: the codec id from the batch attributes (0-4).
        data: the compressed bytes.
        max_decompressed_bytes: refuse to produce more than this many bytes.

    Returns:
        The decompressed bytes (``codec_id`` 0 returns ``bytes(data)``).

    Raises:
        CorruptMessageError: the data is malformed or inflates beyond the cap.
        UnsupportedCodecError: unknown codec id or its library is missing.
    """
    codec = _codec(codec_id)
    cap = max_decompressed_bytes
    if codec is CompressionType.NONE:
        if len(data) > cap:
            raise _too_big(codec, cap)
        return bytes(data)
    if codec is CompressionType.GZIP:
        return _gunzip(data, cap)
    if codec is CompressionType.SNAPPY:
        return _unsnappy(data, cap)
    if codec is CompressionType.LZ4:
        return _unlz4(data, cap)
    return _unzstd(data, cap)


#: The first piece of a gzip member fed to zlib; it doubles while the member
#: goes on. What zlib reads past a member's end comes back as a copy
#: (``unused_data``), so small first pieces keep a batch of many tiny members
#: linear in its size instead of copying the rest of the input per member.
_GZIP_FIRST_FEED = 512


def _gunzip(data: bytes | bytearray | memoryview, cap: int) -> bytes:
    view = memoryview(data).cast("B")
    end = len(view)
    parts: list[bytes] = []
    total = 0
    pos = 0
    try:
        while True:
            # wbits 47 = 32 + 15: accept a gzip or zlib header, 32 KiB window.
            d = zlib.decompressobj(47)
            feed = _GZIP_FIRST_FEED
            while not d.eof and pos < end:
                piece = view[pos : pos + feed]
                out = d.decompress(piece, cap + 1 - total)
                total += len(out)
                parts.append(out)
                if total > cap or d.unconsumed_tail:
                    raise _too_big(CompressionType.GZIP, cap)
                pos += len(piece) - len(d.unused_data)
                feed = min(feed * 2, _CHUNK)
            if not d.eof:
                raise CorruptMessageError("gzip data is truncated (no end of stream)")
            # Java's GZIPInputStream reads concatenated members; trailing zero
            # padding is not a member.
            if pos >= end or (view[pos] == 0 and not bytes(view[pos:]).strip(b"\x00")):
                break
    except zlib.error as exc:
        raise CorruptMessageError(f"invalid gzip data: {exc}") from None
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy_raw_len(block: bytes | memoryview) -> int:
    """Uncompressed length from a raw snappy block's uvarint preamble."""
    result = 0
    shift = 0
    for i in range(min(len(block), 5)):
        b = block[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
        shift += 7
    raise CorruptMessageError("invalid snappy block: bad length preamble")


def _unsnappy(data: bytes | bytearray | memoryview, cap: int) -> bytes:
    snappy = _library(CompressionType.SNAPPY)
    view = memoryview(data)
    blocks: list[memoryview] = []
    if bytes(view[:8]) == XERIAL_MAGIC:
        if len(view) < _XERIAL_HEADER_LEN:
            raise CorruptMessageError("xerial snappy data is truncated in its 16-byte header")
        pos = _XERIAL_HEADER_LEN
        end = len(view)
        while pos < end:
            if pos + 4 > end:
                raise CorruptMessageError(
                    f"xerial snappy block length truncated at byte {pos} of {end}"
                )
            (n,) = struct.unpack_from(">i", view, pos)
            pos += 4
            if n < 0 or pos + n > end:
                raise CorruptMessageError(
                    f"xerial snappy block at byte {pos - 4} claims {n} bytes, {end - pos} remain"
                )
            blocks.append(view[pos : pos + n])
            pos += n
    else:
        blocks.append(view)
    total = 0
    for block in blocks:
        total += _snappy_raw_len(block)
        if total > cap:
            raise _too_big(CompressionType.SNAPPY, cap)
    try:
        parts = [bytes(snappy.decompress_raw(block)) for block in blocks]
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise CorruptMessageError(f"invalid snappy data: {exc}") from None
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _unlz4(data: bytes | bytearray | memoryview, cap: int) -> bytes:
    lz4_frame = _library(CompressionType.LZ4)
    # Ask for bounded chunks: a single max_length=cap call would allocate the
    # whole cap up front (about 12x slower for a typical 50 KB batch).
    parts: list[bytes] = []
    total = 0
    try:
        d = lz4_frame.LZ4FrameDecompressor()
        out: bytes = d.decompress(bytes(data), max_length=min(_CHUNK, cap + 1))
        while True:
            total += len(out)
            if total > cap:
                raise _too_big(CompressionType.LZ4, cap)
            parts.append(out)
            if d.eof or d.needs_input:
                break
            out = d.decompress(b"", max_length=min(_CHUNK, cap + 1 - total))
    except RuntimeError as exc:  # lz4 reports malformed frames as RuntimeError
        raise CorruptMessageError(f"invalid lz4 frame: {exc}") from None
    if not d.eof:
        raise CorruptMessageError("lz4 frame is truncated (no end mark)")
    return parts[0] if len(parts) == 1 else b"".join(parts)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE = 0x184D2A50
#: A zstd frame header's largest size (magic 4, descriptor 1, window 1,
#: dictionary id 4, content size 8).
_ZSTD_MAX_HEADER = 18


def _zstd_check_complete(zstd: Any, raw: bytes) -> None:
    """Walk the frame and block headers; raise if the input ends mid-frame.

    The streaming reader silently returns partial output for a truncated
    frame, so completeness is checked structurally. Cost: one step per block
    (a block holds up to 128 KiB of output).
    """
    pos = 0
    end = len(raw)
    while pos < end:
        if pos + 4 > end:
            raise CorruptMessageError(f"zstd data truncated at byte {pos}")
        magic = int.from_bytes(raw[pos : pos + 4], "little")
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE:
            if pos + 8 > end:
                raise CorruptMessageError(f"zstd skippable frame truncated at byte {pos}")
            pos += 8 + int.from_bytes(raw[pos + 4 : pos + 8], "little")
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptMessageError(f"zstd data has a bad frame magic at byte {pos}")
        # The header only (at most 18 bytes): slicing the rest of the input per
        # frame made a batch of many small frames quadratic in its size.
        header = raw[pos : pos + _ZSTD_MAX_HEADER]
        has_checksum = zstd.get_frame_parameters(header).has_checksum
        pos += zstd.frame_header_size(header)
        while True:
            if pos + 3 > end:
                raise CorruptMessageError(f"zstd frame truncated at byte {pos}")
            block = int.from_bytes(raw[pos : pos + 3], "little")
            kind = (block >> 1) & 3
            pos += 3 + (1 if kind == 1 else block >> 3)
            if block & 1:
                break
        pos += 4 if has_checksum else 0
    if pos > end:
        raise CorruptMessageError("zstd frame truncated (a block runs past the end)")


def _unzstd(data: bytes | bytearray | memoryview, cap: int) -> bytes:
    zstd = _library(CompressionType.ZSTD)
    raw = bytes(data)
    parts: list[bytes] = []
    total = 0
    try:
        declared = zstd.frame_content_size(raw)  # -1 when the frame does not say
        if declared > cap:
            raise _too_big(CompressionType.ZSTD, cap)
        _zstd_check_complete(zstd, raw)
        # A declared size lets the first read allocate exactly; Java producers
        # and librdkafka stream and declare nothing, so read in chunks. Either
        # way the reads never ask for more than cap + 1 bytes in total.
        want = declared + 1 if declared >= 0 else _CHUNK
        with zstd.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as reader:
            while True:
                chunk = reader.read(min(want, cap + 1 - total))
                if not chunk:
                    break
                total += len(chunk)
                if total > cap:
                    raise _too_big(CompressionType.ZSTD, cap)
                parts.append(chunk)
                want = _CHUNK
    except zstd.ZstdError as exc:
        raise CorruptMessageError(f"invalid zstd data: {exc}") from None
    if not parts:
        return b""
    return parts[0] if len(parts) == 1 else b"".join(parts)


# --------------------------------------------------------------------------- encode


def compress(
    codec_id: int,
    data: bytes | bytearray | memoryview,
    *,
    xerial: bool = True,
    level: int | None = None,
) -> bytes:
    """Compress ``data`` with the given codec (the inverse of :func:`decompress`).

    Args:
        codec_id: codec id (0-4).
        data: bytes to compress.
        xerial: snappy only: write the xerial framing Java producers use
            (default) instead of one raw block.
        level: codec level, or ``None`` for the library default.
    """
    codec = _codec(codec_id)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        c = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec is CompressionType.SNAPPY:
        snappy = _library(CompressionType.SNAPPY)
        if not xerial:
            return bytes(snappy.compress_raw(bytes(data)))
        out = bytearray(XERIAL_MAGIC)
        out += struct.pack(">ii", 1, 1)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK])))
            out += struct.pack(">i", len(block))
            out += block
        return bytes(out)
    if codec is CompressionType.LZ4:
        result: bytes = _library(codec).compress(bytes(data), compression_level=level or 0)
        return result
    zresult: bytes = (
        _library(codec).ZstdCompressor(level=3 if level is None else level).compress(bytes(data))
    )
    return zresult
