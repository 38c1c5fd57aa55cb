"""Events exchanged between the application thread and the network thread.

Application events go app -> network through one queue; the network thread
applies them in order. Completable events carry a ``concurrent.futures.Future``
and an absolute deadline (``deadline_ms``, on the monotonic clock); the
network thread completes every future by its deadline at the latest (the
"reaper"), so no application call can wait past its timeout.

Background events go network -> app: errors to raise from ``poll`` and the
results of acknowledgements (for the commit callback and ``commit_sync``).
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import KafkaError
from kafka_share.models import TopicIdPartition
from kafka_share.share.results import AcknowledgementCompletion, CompletedShareFetch
from kafka_share.share.unsent import AckResults

if TYPE_CHECKING:
    from kafka_share.share.acknowledgements import Acknowledgements

__all__ = [
    "AckResults",
    "AcknowledgeAsyncEvent",
    "AcknowledgeOnCloseEvent",
    "AcknowledgeSyncEvent",
    "AcknowledgementCompletion",
    "ApplicationEvent",
    "CompletableEvent",
    "CompletedShareFetch",
    "ErrorEvent",
    "FetchEvent",
    "LeaveGroupEvent",
    "NodeAcknowledgements",
    "PollEvent",
    "StopEvent",
    "SubscriptionChangeEvent",
]

@attrs_repr
@attrs.frozen(repr=False)
class NodeAcknowledgements:
    """Acknowledgements of one partition, routed to the node that delivered the records.

    The acquisition locks live on that broker's share-partition, so the acks
    must go there and nowhere else, even if leadership has moved since.
    """

    node_id: int
    acknowledgements: Acknowledgements


AcksByPartition = dict[TopicIdPartition, NodeAcknowledgements]


@attrs_repr
@attrs.define(eq=False, repr=False)
class CompletableEvent:
    deadline_ms: int
    future: Future[object] = attrs.field(factory=Future)


@attrs_repr
@attrs.define(eq=False, repr=False)
class SubscriptionChangeEvent(CompletableEvent):
    """``subscribe``: by ``topics``, or by ``pattern`` when it is set."""

    topics: frozenset[str] = frozenset()
    pattern: re.Pattern[str] | None = None


@attrs_repr
@attrs.define(eq=False, repr=False)
class LeaveGroupEvent(CompletableEvent):
    """Unsubscribe (or close): leave the group with a final heartbeat at epoch -1."""

    on_close: bool = False


@attrs_repr
@attrs.define(eq=False, repr=False)
class PollEvent:
    """The application called ``poll``: resets the poll timer, (re)joins if needed."""

    now_ms: int


@attrs_repr
@attrs.define(eq=False, repr=False)
class FetchEvent:
    """Fetch more records; ``acks`` ride on the next ShareFetch to their node."""

    acks: AcksByPartition
    #: set by the network thread once the round this event started was sent
    sent: threading.Event | None = None
    #: a fetch ahead: sent only while no response waits in the fetch buffer;
    #: otherwise ``acks`` go out as asynchronous acks due by ``ack_deadline_ms``
    ahead: bool = False
    ack_deadline_ms: int = 0
    #: cap on the records to acquire (the application's pace within the lock);
    #: None: ``max.poll.records``
    max_records: int | None = None
    #: the round ends then (record_limit: the poll's deadline); None: when records come
    until_ms: int | None = None
    #: the poll that sent it waits for I/O next, and that wait's first round sends
    #: it: the application thread running the loop need not run a round for it now
    #: (the asyncio shell's round for it covers the poll's PollEvent: it runs one)
    then_waits: bool = False


@attrs_repr
@attrs.define(eq=False, repr=False)
class AcknowledgeAsyncEvent:
    acks: AcksByPartition
    deadline_ms: int
    #: may wait this long for a ShareFetch to the same node to ride on
    linger_ms: int = 0


@attrs_repr
@attrs.define(eq=False, repr=False)
class AcknowledgeSyncEvent(CompletableEvent):
    """``commit_sync``: the future's result is an :data:`AckResults`."""

    acks: AcksByPartition = attrs.field(factory=dict)


@attrs_repr
@attrs.define(eq=False, repr=False)
class AcknowledgeOnCloseEvent(CompletableEvent):
    """Final acks plus a ShareAcknowledge at epoch -1 to every node with a session."""

    acks: AcksByPartition = attrs.field(factory=dict)


@attrs_repr
@attrs.define(eq=False, repr=False)
class StopEvent:
    """Stop the network thread's loop (after close has flushed what it could)."""


ApplicationEvent = (
    SubscriptionChangeEvent
    | LeaveGroupEvent
    | PollEvent
    | FetchEvent
    | AcknowledgeAsyncEvent
    | AcknowledgeSyncEvent
    | AcknowledgeOnCloseEvent
    | StopEvent
)


@attrs_repr
@attrs.frozen(repr=False)
class ErrorEvent:
    """An error the application thread raises from its next call.

    A ``fatal`` error (the member is FATAL, the cluster cannot serve this
    consumer, the network thread died) is raised again by every later ``poll``:
    the consumer cannot recover and must be closed.
    """

    error: KafkaError
    fatal: bool = False
