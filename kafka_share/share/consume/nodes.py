"""Per-node state of the consume manager: a node's share session, the
acknowledgements waiting for it (to ride on a fetch, asynchronous, per
``commit_sync``, the close), its backoff; and one ``commit_sync`` (or close)
spanning nodes."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import KafkaError
from kafka_share.models import TopicIdPartition
from kafka_share.share.ack_deferral import AckDeferral
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.session import ShareSession

__all__ = ["NodeState", "SyncCommit", "merge_into", "queue_async"]


@attrs_repr
@attrs.define(eq=False, repr=False)
class SyncCommit:
    """One ``commit_sync`` (or close) call spanning several nodes."""

    deadline_ms: int
    #: the driver's handle for the waiting call (None: nobody waits, e.g. a leave)
    token: object | None
    #: node -> acks still to send to that node
    per_node: dict[int, dict[TopicIdPartition, Acknowledgements]]
    results: dict[TopicIdPartition, KafkaError | None] = attrs.field(factory=dict)
    #: node -> acks sent and not answered yet
    in_flight: dict[int, dict[TopicIdPartition, Acknowledgements]] = attrs.field(factory=dict)
    #: the outcome went to the sink (or nobody waits for one)
    resolved: bool = False

    def done(self) -> bool:
        return not self.per_node and not self.in_flight


@attrs_repr
@attrs.define(eq=False, repr=False)
class NodeState:
    session: ShareSession
    #: acks to piggyback on the next ShareFetch to this node
    piggyback: dict[TopicIdPartition, Acknowledgements] = attrs.field(factory=dict)
    #: merged asynchronous acks and their deadline
    async_acks: dict[TopicIdPartition, Acknowledgements] = attrs.field(factory=dict)
    async_deadline_ms: int = 0
    #: the async acks may wait until then for a ShareFetch to ride on (0: send now)
    async_linger_until_ms: int = 0
    sync_queue: deque[SyncCommit] = attrs.field(factory=deque)
    close: SyncCommit | None = None
    not_before_ms: int = 0
    #: consecutive failed share requests (transport errors) to this node
    failures: int = 0
    #: counts the share sessions opened with this node; records carry the one
    #: that acquired them, and their acknowledgements are refused by any other
    generation: int = 0
    #: the close is a leave (not the consumer closing): open a new session afterwards
    reopen_after_close: bool = False
    #: whether acks wait for a later fetch while this node's answers are a trickle
    deferral: AckDeferral | None = None
    #: the async acks are ones held back from a fetch (they ride on the next one)
    acks_held: bool = False


def merge_into(
    target: dict[TopicIdPartition, Acknowledgements], tip: TopicIdPartition, a: Acknowledgements
) -> None:
    existing = target.get(tip)
    if existing is None:
        target[tip] = a
    else:
        existing.merge(a)


def queue_async(
    state: NodeState,
    acks: Mapping[TopicIdPartition, Acknowledgements],
    deadline_ms: int,
    linger_until_ms: int,
) -> None:
    """Add ``acks`` to a node's asynchronous acks. The first to arrive set the
    linger; acks that must go now (``linger_until_ms`` 0) end it for all."""
    state.acks_held = False
    if not state.async_acks:
        state.async_linger_until_ms = linger_until_ms
    elif linger_until_ms == 0:
        state.async_linger_until_ms = 0
    for tip, a in acks.items():
        merge_into(state.async_acks, tip, a)
    state.async_deadline_ms = max(state.async_deadline_ms, deadline_ms)
