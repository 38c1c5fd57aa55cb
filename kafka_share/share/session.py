"""One share session per broker node.

Theory of operation
-------------------
The broker keeps a share session per (group, member, connection). Its epoch
sequence (Java ``ShareSessionHandler`` / ``ShareFetchMetadata``):

- :data:`INITIAL_EPOCH` (0) opens a session. The request lists every wanted
  partition and **must not carry acknowledgements** (the broker rejects the
  whole request); acknowledgements that would ride on it are handed back as
  ``unsendable`` so the caller fails them locally (Java 4.4 uses a
  NetworkException). ShareAcknowledge can never open a session.
- Every request (ShareFetch or ShareAcknowledge) after that uses the next
  epoch: +1, wrapping from ``2**31 - 1`` to 1.
- :data:`FINAL_EPOCH` (-1) closes the session; nothing follows it.
- ``SHARE_SESSION_NOT_FOUND``, ``INVALID_SHARE_SESSION_EPOCH`` and
  ``SHARE_SESSION_LIMIT_REACHED`` reset the epoch to 0, so the next request
  opens a fresh session with the full partition list. Other top-level errors
  still advance the epoch. A transport failure resets to 0 as well.

In an established session only the changes are sent: added partitions go in
``Topics``, partitions no longer wanted go in ``ForgottenTopicsData``, and a
partition whose topic was recreated (same name, new topic id) forgets the old
id and adds the new one. Acknowledgements for partitions outside the wanted
set are sent "ack-only": in ``Topics`` with their batches **and** in
``ForgottenTopicsData``, so the broker takes the acks without adding the
partition to the session.

At most one request per node may be in flight; building a request while one is
outstanding raises :class:`~kafka_share.errors.IllegalStateError`.

The session is updated when a request is built, not when it is answered: if
the request fails, the epoch goes back to 0 and the next request re-sends the
full partition list anyway.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from kafka_share._log import Logger
from kafka_share._reprs import attrs_repr
from kafka_share.errors import IllegalStateError
from kafka_share.models import TopicIdPartition, TopicPartition
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.share.acknowledgements import AckBatch, Acknowledgements

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "SESSION_RESET_ERRORS",
    "SessionAcknowledgePlan",
    "SessionFetchPlan",
    "ShareSession",
    "next_epoch",
]

log = logging.getLogger(__name__)

#: Epoch that opens a share session.
INITIAL_EPOCH: Final = 0
#: Epoch that closes a share session.
FINAL_EPOCH: Final = -1
_MAX_EPOCH: Final = 2**31 - 1

#: Top-level error codes after which the next request opens a new session.
SESSION_RESET_ERRORS: Final = frozenset(
    {
        ErrorCode.SHARE_SESSION_NOT_FOUND,
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        ErrorCode.SHARE_SESSION_LIMIT_REACHED,
    }
)


def next_epoch(epoch: int) -> int:
    """The epoch that follows ``epoch``: +1, wrapping to 1; -1 stays -1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _MAX_EPOCH:
        return 1
    return epoch + 1


@attrs_repr
@attrs.frozen(slots=True, eq=False, repr=False)
class SessionFetchPlan:
    """What one ShareFetch request to a node must contain.

    Attributes:
        node_id: the broker node.
        epoch: ``ShareSessionEpoch``.
        topics: the ``Topics`` entries in request order, each with its
            acknowledgement batches (empty when the partition carries no acks).
        forgotten: the ``ForgottenTopicsData`` entries.
        acknowledgements: the acknowledgements this request carries, by
            partition, to complete with the response's ``AcknowledgeErrorCode``.
        unsendable: acknowledgements that cannot go on this request (session
            epoch 0); the caller fails them locally.
        added / removed / replaced: the session diff (``replaced`` holds the old
            ids of recreated topics), for logging and tests.
        is_renew_ack: some batch carries RENEW, so ``IsRenewAck`` must be true
            (and the fetch limits zero).
    """

    node_id: int
    epoch: int
    topics: dict[TopicIdPartition, list[AckBatch]]
    forgotten: tuple[TopicIdPartition, ...]
    acknowledgements: dict[TopicIdPartition, Acknowledgements]
    unsendable: dict[TopicIdPartition, Acknowledgements]
    added: tuple[TopicIdPartition, ...]
    removed: tuple[TopicIdPartition, ...]
    replaced: tuple[TopicIdPartition, ...]
    is_renew_ack: bool


@attrs_repr
@attrs.frozen(slots=True, eq=False, repr=False)
class SessionAcknowledgePlan:
    """What one ShareAcknowledge request (or a closing request) must contain.

    ``topics`` maps each partition to its batches; ``acknowledgements`` holds the
    objects to complete with the response. ``epoch`` is -1 for a close.
    """

    node_id: int
    epoch: int
    topics: dict[TopicIdPartition, list[AckBatch]]
    acknowledgements: dict[TopicIdPartition, Acknowledgements]
    is_renew_ack: bool


class ShareSession:
    """The share session with one broker node (see the module docstring)."""

    __slots__ = ("_closing", "_epoch", "_in_flight", "_log", "_partitions", "closed", "node_id")

    def __init__(self, node_id: int, logger: Logger | None = None) -> None:
        self.node_id = node_id
        self._log: Logger = logger or log
        self._epoch = INITIAL_EPOCH
        self._partitions: dict[TopicPartition, TopicIdPartition] = {}
        self._in_flight = False
        self._closing = False
        #: True once the closing request (epoch -1) was answered or failed.
        self.closed = False

    # -- state ----------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch the next request will carry."""
        return self._epoch

    @property
    def is_new(self) -> bool:
        """True if the next request opens a session (epoch 0): it cannot carry acks."""
        return self._epoch == INITIAL_EPOCH

    @property
    def in_flight(self) -> bool:
        """True while a request to this node awaits its response."""
        return self._in_flight

    @property
    def partitions(self) -> tuple[TopicIdPartition, ...]:
        """The partitions the session holds (as of the last built request)."""
        return tuple(self._partitions.values())

    @property
    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name for the topics in the session."""
        return {tip.topic_id: tip.topic for tip in self._partitions.values()}

    def __repr__(self) -> str:
        return (
            f"ShareSession(node={self.node_id}, epoch={self._epoch}, "
            f"partitions={len(self._partitions)}, in_flight={self._in_flight})"
        )

    # -- building requests ----------------------------------------------------

    def build_fetch(
        self,
        wanted: Iterable[TopicIdPartition],
        acks: Mapping[TopicIdPartition, Acknowledgements] | None = None,
    ) -> SessionFetchPlan:
        """Plan the next ShareFetch and mark a request in flight.

        Args:
            wanted: the partitions this node should fetch (led by this node and
                assigned to the member), in the order they should be listed.
            acks: acknowledgements to piggyback, by partition. Empty ones are
                ignored. Partitions outside ``wanted`` are sent ack-only.

        Raises:
            IllegalStateError: a request is already in flight, or the session is
                closing or closed.
            ValueError: ``wanted`` names the same topic name and partition with
                two different topic ids.
        """
        self._check_can_send()
        want = _by_topic_partition(wanted)
        pending = {tip: a for tip, a in (acks or {}).items() if a}
        epoch = self._epoch
        if epoch == INITIAL_EPOCH:
            plan = self._opening_fetch(want, pending)
        else:
            plan = self._session_fetch(epoch, want, pending)
        self._in_flight = True
        if self._log.isEnabledFor(logging.DEBUG):
            self._log.debug(
                "Build ShareFetch for node %d epoch %d: added %d, removed %d, replaced %d, "
                "%d partition(s) with acks, %d in session",
                self.node_id,
                epoch,
                len(plan.added),
                len(plan.removed),
                len(plan.replaced),
                len(plan.acknowledgements),
                len(self._partitions),
            )
        return plan

    def _opening_fetch(
        self,
        want: dict[TopicPartition, TopicIdPartition],
        pending: dict[TopicIdPartition, Acknowledgements],
    ) -> SessionFetchPlan:
        """The ShareFetch that opens the session (epoch 0): every wanted
        partition, and no acknowledgement (an opening request cannot carry any)."""
        self._partitions = want
        plan = SessionFetchPlan(
            node_id=self.node_id,
            epoch=INITIAL_EPOCH,
            topics={tip: [] for tip in want.values()},
            forgotten=(),
            acknowledgements={},
            unsendable=pending,
            added=tuple(want.values()),
            removed=(),
            replaced=(),
            is_renew_ack=False,
        )
        if pending:
            self._log.debug(
                "Node %d: share session is new; %d partition(s) of acknowledgements "
                "cannot be sent on it",
                self.node_id,
                len(pending),
            )
        return plan

    def _session_fetch(
        self,
        epoch: int,
        want: dict[TopicPartition, TopicIdPartition],
        pending: dict[TopicIdPartition, Acknowledgements],
    ) -> SessionFetchPlan:
        """A ShareFetch in an open session: the partitions added, removed or
        replaced (topic recreated) since the last request, and the acks."""
        added: list[TopicIdPartition] = []
        removed: list[TopicIdPartition] = []
        replaced: list[TopicIdPartition] = []
        for key, previous in self._partitions.items():
            current = want.get(key)
            if current is None:
                removed.append(previous)
            elif current != previous:
                # Topic recreated: same name and partition, new topic id.
                replaced.append(previous)
                added.append(current)
        for key, tip in want.items():
            if key not in self._partitions:
                added.append(tip)
        self._partitions = want

        topics: dict[TopicIdPartition, list[AckBatch]] = {tip: [] for tip in added}
        forgotten: dict[TopicIdPartition, None] = dict.fromkeys([*removed, *replaced])
        wanted_set = set(want.values())
        renew = False
        for tip, a in pending.items():
            topics[tip] = a.to_batches()
            renew = renew or a.has_renew
            if tip not in wanted_set:
                forgotten[tip] = None  # ack-only: do not add it to the session
        return SessionFetchPlan(
            node_id=self.node_id,
            epoch=epoch,
            topics=topics,
            forgotten=tuple(forgotten),
            acknowledgements=pending,
            unsendable={},
            added=tuple(added),
            removed=tuple(removed),
            replaced=tuple(replaced),
            is_renew_ack=renew,
        )

    def build_acknowledge(
        self, acks: Mapping[TopicIdPartition, Acknowledgements]
    ) -> SessionAcknowledgePlan | None:
        """Plan a standalone ShareAcknowledge and mark a request in flight.

        Returns None, leaving nothing in flight, when there is nothing to send or
        when the session is new (epoch 0): ShareAcknowledge cannot open a session,
        so the caller must fail those acknowledgements locally.

        Raises:
            IllegalStateError: a request is already in flight, or the session is
                closing or closed.
        """
        self._check_can_send()
        pending = {tip: a for tip, a in acks.items() if a}
        if not pending or self._epoch == INITIAL_EPOCH:
            return None
        plan = _ack_plan(self.node_id, self._epoch, pending)
        self._in_flight = True
        return plan

    def build_close(
        self, acks: Mapping[TopicIdPartition, Acknowledgements] | None = None
    ) -> SessionAcknowledgePlan:
        """Plan the closing request (epoch -1), with any final acknowledgements.

        The broker commits the acknowledgements, releases every record still
        acquired by the member in this session and removes the session. Like
        Java, the close is sent even if the session was never established; the
        broker then answers ``SHARE_SESSION_NOT_FOUND``.

        Raises:
            IllegalStateError: a request is already in flight, or the session is
                already closing or closed.
        """
        self._check_can_send()
        pending = {tip: a for tip, a in (acks or {}).items() if a}
        self._epoch = FINAL_EPOCH
        self._closing = True
        self._in_flight = True
        return _ack_plan(self.node_id, FINAL_EPOCH, pending)

    def _check_can_send(self) -> None:
        if self._in_flight:
            raise IllegalStateError(
                f"a share request to node {self.node_id} is already in flight; "
                "only one may be outstanding per node"
            )
        if self._closing or self.closed:
            raise IllegalStateError(f"the share session with node {self.node_id} is closed")

    # -- responses ------------------------------------------------------------

    def handle_response(self, error_code: int) -> bool:
        """Apply the top-level error code of a ShareFetch/ShareAcknowledge response.

        Returns True on success. On a session error the next request opens a new
        session; on any other error the epoch still advances.

        Raises:
            IllegalStateError: no request was in flight.
        """
        if not self._in_flight:
            raise IllegalStateError(f"no share request to node {self.node_id} is in flight")
        self._in_flight = False
        if self._closing:
            self.closed = True
            self._closing = False
            return error_code == ErrorCode.NONE
        if error_code == ErrorCode.NONE:
            self._epoch = next_epoch(self._epoch)
            return True
        if error_code in SESSION_RESET_ERRORS:
            self._log.debug(
                "Node %d answered error %d for share session epoch %d; the next request "
                "opens a new session",
                self.node_id,
                error_code,
                self._epoch,
            )
            self._epoch = INITIAL_EPOCH
        else:
            self._log.info(
                "Node %d could not process the share request at epoch %d: error %d",
                self.node_id,
                self._epoch,
                error_code,
            )
            self._epoch = next_epoch(self._epoch)
        return False

    def handle_error(self) -> None:
        """The request failed in transport or the connection dropped.

        The broker ties the session to the connection, so the next request opens
        a new session. Safe to call with nothing in flight (an idle disconnect).
        """
        self._in_flight = False
        if self._closing:
            self.closed = True
            self._closing = False
            return
        self._epoch = INITIAL_EPOCH


def _by_topic_partition(
    wanted: Iterable[TopicIdPartition],
) -> dict[TopicPartition, TopicIdPartition]:
    out: dict[TopicPartition, TopicIdPartition] = {}
    for tip in wanted:
        key = TopicPartition(tip.topic, tip.partition)
        other = out.get(key)
        if other is not None and other != tip:
            raise ValueError(
                f"partition {key} is wanted under two topic ids: {other.topic_id} and "
                f"{tip.topic_id}"
            )
        out[key] = tip
    return out


def _ack_plan(
    node_id: int, epoch: int, pending: dict[TopicIdPartition, Acknowledgements]
) -> SessionAcknowledgePlan:
    return SessionAcknowledgePlan(
        node_id=node_id,
        epoch=epoch,
        topics={tip: a.to_batches() for tip, a in pending.items()},
        acknowledgements=pending,
        is_renew_ack=any(a.has_renew for a in pending.values()),
    )
