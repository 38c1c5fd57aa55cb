"""A tiny in-process Kafka broker for unit tests of the network layer.

:class:`FakeBroker` listens on ``127.0.0.1`` (an ephemeral port), reads size-
prefixed request frames, parses the request header, decodes the body with the
generated message classes and asks a handler what to do. It answers
ApiVersions itself (with a configurable version table, including the KIP-511
UNSUPPORTED_VERSION fallback); every other request goes to the handler passed
in, which returns one of:

* a response object: encoded at the request's version, with the response
  header version the protocol calls for;
* :class:`RawReply`: a body written as-is (for odd or malformed answers);
* :data:`NO_REPLY`: never answer (to exercise request timeouts);
* :data:`CLOSE`: close the connection without answering (peer close).

Each connection is served by its own thread, so one stalled connection does not
block another. Everything the broker received is kept in
:attr:`FakeBroker.received`, in arrival order, for assertions.

Use it as a context manager so its sockets and threads are always released::

    with FakeBroker(handler) as broker:
        client = NetworkClient(address_of=lambda n: broker.address, ...)
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from kafka_share.protocol.api_keys import CLIENT_VERSIONS, ApiKey
from kafka_share.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    request_header_version,
    response_header_version,
)
from kafka_share.protocol.messages import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
    ApiVersionsRequest,
    ApiVersionsResponse,
)

__all__ = [
    "CLOSE",
    "NO_REPLY",
    "FakeBroker",
    "RawReply",
    "ReceivedRequest",
    "default_api_versions",
]

_SIZE = struct.Struct(">i")
_API_VERSIONS = 18
_UNSUPPORTED_VERSION = 35
_MAX_FRAME = 16 * 1024 * 1024


class _Sentinel:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: Handler result: do not answer this request (the client should time out).
NO_REPLY: Final = _Sentinel("NO_REPLY")
#: Handler result: close the connection instead of answering.
CLOSE: Final = _Sentinel("CLOSE")


@attrs.frozen
class RawReply:
    """Handler result: send ``body`` after the correct response header, untouched."""

    body: bytes


@attrs.frozen
class ReceivedRequest:
    """One request as the broker saw it."""

    connection_index: int
    header: RequestHeader
    #: The decoded body, or None when it could not be decoded at that version.
    request: Any
    decode_error: Exception | None = None

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version


Handler = Callable[[ReceivedRequest], Any]
_TELEMETRY_APIS = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})


def default_api_versions() -> dict[int, tuple[int, int]]:
    """Every API the client knows, at the client's own ranges (a perfect match),
    but telemetry: like a real broker without a telemetry reporter, it does not
    offer GetTelemetrySubscriptions or PushTelemetry."""
    return {int(k): v for k, v in CLIENT_VERSIONS.items() if k not in _TELEMETRY_APIS}


def _flexible(cls: Any, version: int) -> bool:
    flex = getattr(cls, "FLEXIBLE_MIN_VERSION", None)
    return flex is not None and version >= flex


def _refuse(request: ReceivedRequest) -> Any:
    raise AssertionError(f"unexpected request {type(request.request).__name__}")


class FakeBroker:
    """A threaded fake broker; see the module docstring.

    Args:
        handler: called (on a broker thread) for every request except ApiVersions.
        api_versions: API key -> (min, max) advertised in ApiVersionsResponse.
        api_versions_max_version: highest ApiVersions version this broker
            understands; a higher one gets the KIP-511 v0 UNSUPPORTED_VERSION
            answer listing ``0..api_versions_max_version``.
        api_versions_handler: replaces the built-in ApiVersions answer (may
            return NO_REPLY, CLOSE, RawReply or a response).
    """

    def __init__(
        self,
        handler: Handler = _refuse,
        *,
        api_versions: Mapping[int, tuple[int, int]] | None = None,
        api_versions_max_version: int = 4,
        api_versions_handler: Handler | None = None,
    ) -> None:
        self._handler = handler
        self._api_versions = dict(api_versions if api_versions is not None
                                  else default_api_versions())
        self._api_versions_max_version = api_versions_max_version
        self._api_versions_handler = api_versions_handler
        self._lock = threading.Lock()
        self.received: list[ReceivedRequest] = []
        #: Exceptions raised on broker threads (a test should assert this stays empty).
        self.errors: list[BaseException] = []
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.05)
        self.accepted = 0
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name="fake-broker-accept", daemon=True
        )
        self._accept_thread.start()

    # -- public ------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    @property
    def port(self) -> int:
        return self.address[1]

    def requests_of(self, api_key: int) -> list[ReceivedRequest]:
        with self._lock:
            return [r for r in self.received if r.api_key == api_key]

    def drop_connections(self) -> None:
        """Close every accepted connection from the broker side (a restart)."""
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._accept_thread.join(2.0)
        self._listener.close()
        self.drop_connections()
        for t in list(self._threads):
            t.join(2.0)

    def __enter__(self) -> FakeBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- server ------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with self._lock:
                index = self.accepted
                self.accepted += 1
                self._conns.append(conn)
            t = threading.Thread(
                target=self._serve, args=(conn, index), name=f"fake-broker-{index}", daemon=True
            )
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket, index: int) -> None:
        try:
            while True:
                frame = _read_frame(conn)
                if frame is None:
                    return
                if not self._answer(conn, index, frame):
                    return
        except OSError:
            return
        except BaseException as exc:  # recorded for the test; a broker bug is a test bug
            with self._lock:
                self.errors.append(exc)
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _answer(self, conn: socket.socket, index: int, frame: bytes) -> bool:
        view = memoryview(frame)
        api_key, api_version = struct.unpack_from(">hh", frame, 0)
        request_cls: Any = REQUEST_TYPES[api_key]
        header, pos = RequestHeader.decode(
            view, request_header_version(api_key, _flexible(request_cls, api_version))
        )
        body: Any = None
        error: Exception | None = None
        try:
            body = request_cls.decode(view[pos:], api_version)
        except Exception as exc:  # an unknown version: the handler decides
            error = exc
        received = ReceivedRequest(index, header, body, error)
        with self._lock:
            self.received.append(received)
        reply: Any
        if api_key == _API_VERSIONS:
            reply = (
                self._api_versions_handler(received)
                if self._api_versions_handler is not None
                else self._answer_api_versions(received)
            )
        else:
            reply = self._handler(received)
        if reply is NO_REPLY:
            return True
        if reply is CLOSE:
            return False
        payload: bytes
        if isinstance(reply, RawReply):
            payload = reply.body
        else:
            expected = RESPONSE_TYPES[api_key]
            assert type(reply) is expected, (
                f"handler answered {type(reply).__name__} to API key {api_key}"
            )
            encoder: Any = expected.encode
            payload = encoder(reply, api_version)
        response_cls = RESPONSE_TYPES[api_key]
        head = ResponseHeader(correlation_id=header.correlation_id).encode(
            response_header_version(api_key, _flexible(response_cls, api_version))
        )
        conn.sendall(_SIZE.pack(len(head) + len(payload)) + head + payload)
        return True

    def _answer_api_versions(self, received: ReceivedRequest) -> Any:
        if received.api_version > self._api_versions_max_version:
            # KIP-511: the answer is a v0 body whatever version was asked for.
            body = ApiVersionsResponse(
                error_code=_UNSUPPORTED_VERSION,
                api_keys=[
                    ApiVersionsResponse.ApiVersion(
                        api_key=_API_VERSIONS, min_version=0,
                        max_version=self._api_versions_max_version,
                    )
                ],
            ).encode(0)
            return RawReply(body)
        assert isinstance(received.request, ApiVersionsRequest)
        return api_versions_response(self._api_versions)


def api_versions_response(versions: Mapping[int, tuple[int, int]]) -> ApiVersionsResponse:
    """A successful ApiVersionsResponse advertising ``versions``."""
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(versions.items())
        ],
    )


def _read_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(conn: socket.socket) -> bytes | None:
    head = _read_exact(conn, 4)
    if head is None:
        return None
    (size,) = _SIZE.unpack(head)
    if not 0 < size <= _MAX_FRAME:
        raise AssertionError(f"client sent a frame of size {size}")
    return _read_exact(conn, size)


def free_port() -> int:
    """A local TCP port with nothing listening on it (connecting gets refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
