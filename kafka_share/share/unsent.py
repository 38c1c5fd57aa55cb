"""Requests the sans-IO managers want sent, and where their answers go."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import KafkaError
from kafka_share.models import TopicIdPartition
from kafka_share.share.results import AcknowledgementCompletion, CompletedShareFetch, LocksLost

__all__ = ["AckResults", "Channel", "Sink", "UnsentRequest"]

#: Per-partition outcome of a commit: ``None`` for success, else the error.
AckResults = dict[TopicIdPartition, KafkaError | None]

R = TypeVar("R")


class Channel(enum.Enum):
    """Which connection to a node carries the request.

    Share traffic gets its own connection: the broker ties the share session
    to it, and a long-polling ShareFetch must not delay heartbeats.
    """

    CONTROL = "control"
    SHARE = "share"


@attrs_repr
@attrs.define(eq=False, repr=False)
class UnsentRequest(Generic[R]):
    """A request to send to ``node_id``, and where its answer goes.

    Exactly one handler is called, once: ``on_response`` with the decoded
    response, of ``response_type``, or ``on_error`` with why there is none
    (transport failure, timeout, unsupported version). Both get the time the
    answer (or failure) was seen, so engine handlers never read a clock.
    """

    node_id: int
    channel: Channel
    #: the request message (or a :class:`VersionedRequest`)
    request: Any
    response_type: type[R]
    on_response: Callable[[R, int], None]
    on_error: Callable[[KafkaError, int], None]

    def answer(self, response: object, error: KafkaError | None, now_ms: int) -> None:
        """Hand the connection's outcome to the handler it is for; the only
        place a response's type is checked."""
        if error is not None:
            self.on_error(error, now_ms)
        elif isinstance(response, self.response_type):
            self.on_response(response, now_ms)
        else:
            self.on_error(
                KafkaError(
                    f"a {type(response).__name__} came back for a request expecting a "
                    f"{self.response_type.__name__}"
                ),
                now_ms,
            )


class Sink(Protocol):
    """Where the share engine delivers results for the application side.

    Plain values only: the driver (the network thread) turns them into the
    application's events and completes its futures.
    """

    def add_fetches(self, fetches: list[CompletedShareFetch]) -> None: ...

    def ack_completed(self, completion: AcknowledgementCompletion) -> None: ...

    def commit_completed(self, token: object, results: AckResults, *, timed_out: bool) -> None:
        """A ``commit_sync`` or close identified by ``token`` is finished: ``results``
        per partition; ``timed_out`` when its deadline passed first (acknowledgements
        not sent by then stay pending and go with the next fetch or commit)."""

    def session_replaced(self, node_id: int, generation: int) -> None:
        """A new share session with ``node_id`` replaces a lost one (see
        :class:`~kafka_share.share.results.SessionReplaced`)."""

    def locks_lost(self, lost: LocksLost) -> None:
        """Auto-renewal gave up on these records' locks (see
        :class:`~kafka_share.share.results.LocksLost`)."""

    def leave_completed(self) -> None:
        """The leave heartbeat was answered (or failed): the member is out."""

    def subscription_changed(self, topics: frozenset[str]) -> None:
        """A pattern subscription now matches ``topics`` (empty at ``subscribe``,
        until the first full Metadata answer); what ``subscription()`` returns."""

    def error(self, error: KafkaError, *, fatal: bool = False) -> None: ...


@attrs_repr
@attrs.frozen(eq=False, repr=False)
class VersionedRequest:
    """A request whose fields depend on the negotiated version.

    ``build`` is called with the version the connection picked for ``api_key``
    (some fields exist only in some versions, e.g. FindCoordinator's ``key``
    before v4 and ``coordinator_keys`` from v4).
    """

    api_key: int
    build: Callable[[int], Any]
