"""KafkaCodec: sans-IO framing and correlation for one broker connection.

Modelled on h11: the codec never touches a socket. The caller:

1. calls :meth:`KafkaCodec.send_request` and writes the returned bytes;
2. reads from the socket straight into :meth:`KafkaCodec.get_buffer` and
   reports the count with :meth:`KafkaCodec.buffer_updated` (as asyncio's
   ``BufferedProtocol``; any chunking, down to one byte at a time);
3. calls :meth:`KafkaCodec.next_response` until it returns :data:`NEED_DATA`.

Receiving is built around one rule: a response body is written once, by the
kernel, into a buffer allocated at its exact size, and is never copied again.
Small reads land in a reused scratch buffer; as soon as a frame's size prefix
is known and the frame is not complete, the codec allocates the frame's own
buffer and the next read goes directly into it. (Appending reads to one
growing ``bytearray`` and slicing frames out of it costs two or three extra
copies per byte, plus a full copy on every growth once the front has been
trimmed; with 1 MiB+ ShareFetch responses that was most of the client's CPU.)
Decoded ``records`` fields are read-only memoryview slices of a frame buffer,
which the codec never touches again while any view of it exists. Once none
does (the application has decoded the response and dropped it) the buffer is
reused for a later frame no larger than it: allocating a multi-megabyte
``bytearray`` zero-fills it (and, when the allocator hands back fresh pages,
takes a page fault for every 4 KiB), which measured about 1 us per 10 KiB
record. Whether views remain is asked of the buffer itself: a ``bytearray``
refuses to change size while any buffer export (memoryview) of it is alive.

Kafka answers requests on a connection strictly in order, so each response
must carry the correlation id of the oldest in-flight request. Anything else
(a mismatched id, a frame larger than ``max_frame_bytes``, an undecodable
body) raises :class:`~kafka_share.errors.CorruptMessageError`, after which the
codec refuses further use: the connection must be closed. Bytes after a
complete body are not an error: Java's and librdkafka's clients ignore them too.

Frame: int32 size, then the response header, then the body.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from typing import Any, Final, NoReturn, Protocol

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import CorruptMessageError, UnsupportedVersionError
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    request_header_version,
    response_header_version,
)
from kafka_share.protocol.messages import RESPONSE_DECODERS, ApiVersionsResponse
from kafka_share.protocol.primitives import TrailingBytesError

__all__ = [
    "NEED_DATA",
    "InFlightRequest",
    "KafkaCodec",
    "NeedData",
    "RequestMessage",
    "decode_api_versions_unsupported",
]

_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_API_VERSIONS_KEY = 18
_MAX_CORRELATION_ID = 0x7FFFFFFF
#: Scratch buffer for size prefixes and small frames; one socket read at most.
_SCRATCH_BYTES = 64 * 1024
#: The largest frame buffer kept for reuse once its response is dropped (a larger
#: one is freed, so a rare huge response does not pin its memory).
MAX_REUSED_FRAME_BYTES = 16 * 1024 * 1024
#: Frame buffers kept for reuse: the application is usually still reading one
#: response (or two, with fetch-ahead) while the next streams in.
_SPARE_FRAMES = 3
#: Frames from this size up are shown to the C allocator (see _show_allocator):
#: above glibc's initial mmap threshold (128 KiB), up to its largest (32 MiB).
_ALLOCATOR_SHOWN_MIN_BYTES = 256 * 1024
_ALLOCATOR_SHOWN_MAX_BYTES = 32 * 1024 * 1024
#: The largest block _show_allocator has freed in this process.
_allocator_shown_bytes = 0


def _show_allocator(size: int) -> None:
    """Free one block of ``size`` bytes, once per new largest frame size.

    glibc's malloc returns freed memory at the top of its heap to the kernel
    past a trim threshold of 128 KiB, and raises that threshold (to twice the
    block's size) only when a block it had mmapped is freed. Reused frame
    buffers are seldom freed, so in some processes the threshold never rose,
    and the values of every poll (a few MB of ``bytes`` at 10 KiB a record,
    allocated and freed poll after poll) were trimmed away and faulted back in:
    100,000 x 10 KiB over six partitions took 96,000-194,000 page faults and
    10.2-13.2 µs a record in those processes, 4,800-7,700 and 7.1-9.5 µs with
    this block freed (docs/performance.md). ``bytes(size)`` is calloc'd, so its
    pages are never touched; other allocators ignore it.
    """
    global _allocator_shown_bytes
    size = min(size, _ALLOCATOR_SHOWN_MAX_BYTES)
    if size >= _ALLOCATOR_SHOWN_MIN_BYTES and size > _allocator_shown_bytes:
        _allocator_shown_bytes = size
        block = bytes(size)
        del block  # freed here: glibc raises its thresholds to match


class NeedData(enum.Enum):
    """Sentinel type: the codec needs more bytes before it can return a response."""

    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA


class RequestMessage(Protocol):
    """What :meth:`KafkaCodec.send_request` needs from a generated request class."""

    @property
    def API_KEY(self) -> int: ...  # noqa: N802 (Kafka-style class constant)

    @property
    def FLEXIBLE_MIN_VERSION(self) -> int | None: ...  # noqa: N802

    def encode(self, version: int) -> bytes: ...


@attrs_repr
@attrs.define(slots=True, kw_only=True, repr=False)
class InFlightRequest:
    """A request sent on this connection that still awaits its response."""

    correlation_id: int
    api_key: int
    api_version: int
    request: object
    tag: Any = None
    """Anything the caller wants back with the response (e.g. a future)."""

    def _flexible(self) -> bool:
        flex = getattr(self.request, "FLEXIBLE_MIN_VERSION", None)
        return flex is not None and self.api_version >= flex


class KafkaCodec:
    """Frames requests and matches responses for one connection.

    Args:
        client_id: sent in every request header (``None`` sends a null id).
        max_frame_bytes: largest response frame accepted; a bigger size prefix
            is treated as corruption before anything is buffered for it.
        first_correlation_id: the correlation id of the first request.
    """

    def __init__(
        self,
        client_id: str | None,
        max_frame_bytes: int = 104857600,
        first_correlation_id: int = 0,
    ) -> None:
        if max_frame_bytes <= 0:
            raise ValueError(f"max_frame_bytes must be positive, got {max_frame_bytes}")
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._next_correlation_id = first_correlation_id
        self._in_flight: list[InFlightRequest] = []
        # Unconsumed scratch bytes are _scratch[_s_start:_s_end]; after
        # buffer_updated() returns they are fewer than 4 (a partial size prefix).
        self._scratch = bytearray(_SCRATCH_BYTES)
        self._scratch_view = memoryview(self._scratch)  # never resized
        self._s_start = 0
        self._s_end = 0
        # The frame being filled in place: size known, bytes still arriving. Its
        # buffer may be longer than the frame (a reused one): only
        # _frame[:_frame_size] is the frame.
        self._frame: bytearray | None = None
        self._frame_size = 0
        self._frame_fill = 0
        # The buffers of the last large frames handed out, oldest first, for
        # reuse once no view of them is left (see _take_frame_buffer).
        self._spares: deque[bytearray] = deque(maxlen=_SPARE_FRAMES)
        # Complete frames (without their size prefix) and their sizes, oldest first.
        self._ready: deque[tuple[bytes | bytearray, int]] = deque()
        self._ready_bytes = 0
        # A bad size prefix is reported by next_response() after the good
        # frames before it, so their requests still get their answers.
        self._deferred: str | None = None
        self._broken: CorruptMessageError | None = None

    @property
    def in_flight(self) -> tuple[InFlightRequest, ...]:
        """The in-flight requests, oldest first."""
        return tuple(self._in_flight)

    @property
    def frame_missing_bytes(self) -> int:
        """Bytes still to come of the frame being received in place (0: none)."""
        return self._frame_size - self._frame_fill if self._frame is not None else 0

    def send_request(
        self, request: RequestMessage, version: int, *, tag: Any = None
    ) -> tuple[int, bytes]:
        """Frame ``request`` at ``version`` and record it as in flight.

        Returns:
            ``(correlation_id, frame)``: the bytes to write to the socket.

        Raises:
            UnsupportedVersionError / ValueError: the request cannot be
                encoded at ``version`` (from the message's ``encode``).
        """
        self._check_usable()
        api_key = request.API_KEY
        if api_key not in RESPONSE_DECODERS:
            raise ValueError(f"no response decoder for API key {api_key}")
        body = request.encode(version)
        flex = request.FLEXIBLE_MIN_VERSION
        flexible = flex is not None and version >= flex
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (
            0 if correlation_id >= _MAX_CORRELATION_ID else correlation_id + 1
        )
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=self.client_id,
        ).encode(request_header_version(api_key, flexible))
        frame = b"".join((_SIZE.pack(len(header) + len(body)), header, body))
        self._in_flight.append(
            InFlightRequest(
                correlation_id=correlation_id,
                api_key=api_key,
                api_version=version,
                request=request,
                tag=tag,
            )
        )
        return correlation_id, frame

    def get_buffer(self) -> memoryview:
        """A writable buffer for the next socket read (``sock.recv_into``).

        Report how many bytes the read wrote with :meth:`buffer_updated`; the
        buffer is only valid until then. It is either the unfilled rest of the
        frame being received or free space in the scratch buffer, so one read
        never crosses into a buffer the codec has already handed out.
        """
        self._check_usable()
        if self._deferred is not None:
            self._fail(self._deferred)
        frame = self._frame
        if frame is not None:
            return memoryview(frame)[self._frame_fill : self._frame_size]
        scratch = self._scratch
        start = self._s_start
        if start:
            # At most 3 bytes (a partial size prefix) move to the front.
            left = self._s_end - start
            scratch[:left] = scratch[start : self._s_end]
            self._s_start = 0
            self._s_end = left
        return self._scratch_view[self._s_end :]

    def buffer_updated(self, nbytes: int) -> None:
        """Record that ``nbytes`` were written into the last :meth:`get_buffer`."""
        frame = self._frame
        if frame is not None:
            self._frame_fill += nbytes
            size = self._frame_size
            if self._frame_fill == size:
                self._ready.append((frame, size))
                self._ready_bytes += 4 + size
                self._frame = None
            return
        self._s_end += nbytes
        self._split_scratch()

    def _split_scratch(self) -> None:
        """Move complete frames out of the scratch buffer; start a partial one."""
        scratch = self._scratch_view
        pos = self._s_start
        end = self._s_end
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(scratch, pos)
            if size < 4 or size > self.max_frame_bytes:
                self._deferred = (
                    f"response frame size {size} is outside the accepted range "
                    f"4..{self.max_frame_bytes} (max_frame_bytes)"
                )
                break
            body_start = pos + 4
            have = end - body_start
            if have >= size:
                # Small frame wholly in scratch: one short, cache-hot copy.
                self._ready.append((bytes(scratch[body_start : body_start + size]), size))
                self._ready_bytes += 4 + size
                pos = body_start + size
                continue
            # Allocated at its full size as soon as the prefix is known, as Java's
            # NetworkReceive does; max_frame_bytes bounds what a bad prefix costs.
            frame = self._take_frame_buffer(size)
            frame[:have] = scratch[body_start:end]
            self._frame = frame
            self._frame_size = size
            self._frame_fill = have
            pos = end
            break
        if pos == end:
            pos = end = 0
        self._s_start = pos
        self._s_end = end

    def _take_frame_buffer(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes for the next frame: a spare one
        that is large enough and that nothing views any more, else a new one."""
        spares = self._spares
        for spare in spares:
            if len(spare) < size:
                continue
            try:
                # Both steps stay inside the buffer's allocation (no copy), and the
                # first raises BufferError while any memoryview of it exists: a
                # response decoded from it that is still being read, on any thread
                # (no new view can appear: only this codec holds the buffer itself).
                del spare[-1]
                spare.append(0)
            except BufferError:
                continue
            spares.remove(spare)
            return spare
        _show_allocator(size)
        return bytearray(size)

    def next_response(self) -> tuple[InFlightRequest, object] | NeedData:
        """Return the next complete ``(in_flight_request, response)``, or :data:`NEED_DATA`.

        Raises:
            CorruptMessageError: oversized or negative frame size, response
                without a matching in-flight request, mismatched correlation id,
                or an undecodable header/body. The codec is unusable afterwards.
        """
        self._check_usable()
        if not self._ready:
            if self._deferred is not None:
                self._fail(self._deferred)
            return NEED_DATA
        frame, size = self._ready.popleft()
        self._ready_bytes -= 4 + size
        if type(frame) is bytearray and len(frame) <= MAX_REUSED_FRAME_BYTES:
            self._spares.append(frame)
        if not self._in_flight:
            (cid,) = _SIZE.unpack_from(frame, 0)
            self._fail(f"received a response (correlation id {cid}) with no request in flight")
        req = self._in_flight[0]
        # Read-only, so decoded record slices are hashable and cannot be written.
        view = memoryview(frame)[:size].toreadonly()
        try:
            header, body_pos = ResponseHeader.decode(
                view, response_header_version(req.api_key, req._flexible())
            )
        except CorruptMessageError as exc:
            self._fail(f"bad response header for correlation id {req.correlation_id}: {exc}")
        if header.correlation_id != req.correlation_id:
            self._fail(
                f"correlation id mismatch: expected {req.correlation_id} "
                f"(api key {req.api_key} v{req.api_version}), got {header.correlation_id}"
            )
        body = view[body_pos:]
        response: object
        if (
            req.api_key == _API_VERSIONS_KEY
            and len(body) >= 2
            and _INT16.unpack_from(body, 0)[0] == ErrorCode.UNSUPPORTED_VERSION
        ):
            response = decode_api_versions_unsupported(body, req.api_version)
        else:
            try:
                response = RESPONSE_DECODERS[req.api_key](body, req.api_version)
            except TrailingBytesError as exc:
                # The body is complete; what follows it is not ours to judge.
                # Java and librdkafka read no further either, and librdkafka's
                # mock cluster ends some responses with a second tag section.
                response = exc.decoded
            except CorruptMessageError as exc:
                self._fail(f"correlation id {req.correlation_id}: {exc}")
        self._in_flight.pop(0)
        return req, response

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise CorruptMessageError(
                f"codec unusable after an earlier protocol error: {self._broken}"
            )

    def _fail(self, message: str) -> NoReturn:
        err = CorruptMessageError(message)
        self._broken = err
        raise err


def decode_api_versions_unsupported(
    body: bytes | memoryview, sent_version: int
) -> ApiVersionsResponse:
    """Decode an ApiVersions answer whose error code is UNSUPPORTED_VERSION (35).

    KIP-511 says such an answer is a v0 body listing the ApiVersions versions
    the broker supports, and Apache Kafka sends exactly that. Other brokers
    use other layouts: the request's own version, or (librdkafka's mock
    cluster) a mix of the two that no version describes. The error code, the
    first two bytes in every layout, is certain; the list is a hint. So the
    body is tried as v0, then at ``sent_version``, and when neither fits the
    answer is error 35 with an empty list, for which the client retries at v0
    (Java's NetworkClient does the same). Never raises: an unreadable hint is
    no reason to drop the connection.
    """
    for version in (0,) if sent_version == 0 else (0, sent_version):
        try:
            return ApiVersionsResponse.decode(body, version)
        except (CorruptMessageError, UnsupportedVersionError):
            continue
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)

