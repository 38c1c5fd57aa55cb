"""Requests the sans-IO managers want sent, and where their answers go."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from kafka_share.errors import KafkaError

__all__ = ["Channel", "ResponseHandler", "Sink", "UnsentRequest"]

#: Called once with (response, None) or (None, error).
ResponseHandler = Callable[[Any, KafkaError | None], None]


class Channel(enum.Enum):
    """Which connection to a node carries the request.

    Share traffic gets its own connection: the broker ties the share session
    to it, and a long-polling ShareFetch must not delay heartbeats.
    """

    CONTROL = "control"
    SHARE = "share"


@attrs.define(eq=False)
class UnsentRequest:
    node_id: int
    channel: Channel
    request: Any
    handler: ResponseHandler


class Sink(Protocol):
    """Where the share engine delivers results for the application thread."""

    def add_fetches(self, fetches: list[Any]) -> None: ...

    def ack_completed(self, completion: Any) -> None: ...

    def error(self, error: KafkaError, *, fatal: bool = False) -> None: ...


@attrs.frozen(eq=False)
class VersionedRequest:
    """A request whose fields depend on the negotiated version.

    ``build`` is called with the version the connection picked for ``api_key``
    (some fields exist only in some versions, e.g. FindCoordinator's ``key``
    before v4 and ``coordinator_keys`` from v4).
    """

    api_key: int
    build: Callable[[int], Any]
