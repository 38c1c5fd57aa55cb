"""What the parts of the share consume manager share: settings, collaborators,
the per-node states, the held records, and the consumer's phase.

The parts (:mod:`.acknowledging`, :mod:`.fetching`, :mod:`.renewing`,
:mod:`.completion`) each hold this one object instead of reaching into each
other: it is the state Java's share request managers keep on
``ShareConsumeRequestManager`` itself.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from kafka_share._log import Logger
from kafka_share._reprs import attrs_repr
from kafka_share.cluster import ClusterMetadata
from kafka_share.errors import UnsupportedVersionError
from kafka_share.models import TopicIdPartition
from kafka_share.share.ack_deferral import AckDeferral
from kafka_share.share.capabilities import ShareCapabilities, ShareFeature
from kafka_share.share.consume.nodes import NodeState, SyncCommit
from kafka_share.share.held import HeldRecords
from kafka_share.share.session import ShareSession
from kafka_share.share.unsent import Sink

if TYPE_CHECKING:
    from kafka_share.metrics import ShareConsumerMetrics

__all__ = ["ACK_LINGER_MS", "ConsumeContext", "ConsumePhase", "FetchSettings"]

#: How long acknowledgements waiting for a ShareFetch to ride on may wait for one
#: before they go as a ShareAcknowledge of their own.
ACK_LINGER_MS = 50


@attrs_repr
@attrs.frozen(repr=False)
class FetchSettings:
    group_id: str
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    record_limit: bool
    retry_backoff_ms: int
    #: cap of the exponential backoff after failed share requests to a node
    retry_backoff_max_ms: int = 1_000
    #: how long a session close after leaving the group may take
    close_timeout_ms: int = 30_000
    #: deadline for acks that were waiting for a fetch and go on their own instead
    ack_timeout_ms: int = 60_000
    #: ``share.auto.renew``: renew the locks of held records (see share/renewal.py)
    auto_renew: bool = False
    auto_renew_max_ms: int = 300_000


class ConsumePhase(enum.Enum):
    """Where the consumer stands with its group, as the consume manager sees it."""

    #: not a member yet (or left): only session closes and commits go out
    WAITING_FOR_MEMBER = "waiting-for-member"
    #: a member with an assignment: fetches, acknowledgements and renewals go out
    MEMBER = "member"
    #: the consumer is closing: the last acks and session closes, no fetch
    CLOSING = "closing"


#: phase -> the phases it may move to (CLOSING is final)
_TRANSITIONS: dict[ConsumePhase, frozenset[ConsumePhase]] = {
    ConsumePhase.WAITING_FOR_MEMBER: frozenset({ConsumePhase.MEMBER, ConsumePhase.CLOSING}),
    ConsumePhase.MEMBER: frozenset({ConsumePhase.WAITING_FOR_MEMBER, ConsumePhase.CLOSING}),
    ConsumePhase.CLOSING: frozenset(),
}


@attrs_repr
@attrs.define(eq=False, repr=False)
class ConsumeContext:
    """The consume manager's shared state. Network thread only."""

    settings: FetchSettings
    cluster: ClusterMetadata
    sink: Sink
    member_id: str
    #: node -> what its negotiated share protocol can do (None while unknown)
    capabilities: Callable[[int], ShareCapabilities | None]
    metrics: ShareConsumerMetrics | None
    log: Logger
    #: every record this consumer holds, from acquisition until its ack completes
    held: HeldRecords
    nodes: dict[int, NodeState] = attrs.field(factory=dict)
    assigned: list[TopicIdPartition] = attrs.field(factory=list)
    phase: ConsumePhase = ConsumePhase.WAITING_FOR_MEMBER
    #: the consumer's close (set with the CLOSING phase)
    closing: SyncCommit | None = None
    #: the application wants records (a fetch round is on)
    fetch_more: bool = False
    #: never fetch again: the configuration cannot work with this cluster
    fetch_blocked: bool = False
    #: the time of the latest round or answer (handlers time their backoffs from it)
    now_ms: int = 0

    def move_to(self, phase: ConsumePhase) -> None:
        """Change phase; staying put is allowed, a move the table forbids is a bug."""
        if phase is self.phase:
            return
        if phase not in _TRANSITIONS[self.phase]:
            raise AssertionError(f"consume phase {self.phase.value} -> {phase.value}")
        self.phase = phase

    def node(self, node_id: int) -> NodeState:
        """The state of ``node_id``, made on first use."""
        state = self.nodes.get(node_id)
        if state is None:
            state = NodeState(ShareSession(node_id, self.log), deferral=AckDeferral())
            self.nodes[node_id] = state
        return state

    def missing(self, node_id: int, feature: ShareFeature) -> UnsupportedVersionError | None:
        """The error for using ``feature`` with ``node_id``, if it cannot be used."""
        caps = self.capabilities(node_id)
        if caps is None:
            return None  # not negotiated yet: the encode-time guard decides
        try:
            caps.require(feature)
        except UnsupportedVersionError as exc:
            return exc
        return None

