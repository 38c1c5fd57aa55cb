"""ShareFetch and ShareAcknowledge for every broker node: the share consume manager.

Theory of operation
-------------------
This is Java's ``ShareConsumeRequestManager``, sans-IO: :meth:`poll` is called
on every network-thread loop with ``now_ms`` and returns the requests to send;
each request carries a handler the network layer calls with the answer.

Per node there is one :class:`~kafka_share.share.session.ShareSession` and at
most one share request in flight. Each round:

1. Acknowledgements first. For every node with no request in flight, send the
   queued acknowledgements as a standalone ShareAcknowledge, in this order:
   the merged asynchronous acks (``commit_async`` and acks that could not ride
   on a fetch), then the ``commit_sync`` calls (FIFO), then the closing request.
2. Then, only if the application asked for more records (``fetch_more``), one
   ShareFetch per leader node of the assigned partitions, carrying the
   piggyback acknowledgements for that node.

Acknowledgements always go to the node that delivered the records: the
acquisition locks live in that broker's share-partition. A session at epoch 0
cannot carry acknowledgements, so acks that meet a new session (the
connection dropped, the broker restarted) fail locally with a NetworkError:
their records are redelivered after the lock expires.

Every completable operation (``commit_sync``, close) finishes by its deadline:
unanswered partitions complete with ``RequestTimedOutError``.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kafka_share._log import Logger
from kafka_share.cluster import BrokerInfo, ClusterMetadata, PartitionLeader
from kafka_share.errors import (
    CorruptRecordError,
    InvalidRecordStateError,
    KafkaError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from kafka_share.share.ack_deferral import AckDeferral
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.backoff import ExponentialBackoff
from kafka_share.share.capabilities import ShareCapabilities, ShareFeature
from kafka_share.share.consume.errors import (
    LEADER_MOVED,
    REFRESH_METADATA_ERRORS,
    TOPIC_ID_ERRORS,
    retriable,
    session_lost,
    transport_failure,
)
from kafka_share.share.consume.nodes import NodeState, SyncCommit, merge_into, queue_async
from kafka_share.share.consume.responses import (
    AckAnswer,
    FetchAnswer,
    PartitionFetch,
    read_acknowledge,
    read_fetch,
)
from kafka_share.share.consume.wire import ack_topics, fetch_topics, forgotten, guard_v2_features
from kafka_share.share.held import HeldRecords, HeldSpan, lock_expiry_ms
from kafka_share.share.renewal import RenewalSchedule
from kafka_share.share.results import AcknowledgementCompletion, CompletedShareFetch, LocksLost
from kafka_share.share.session import SESSION_RESET_ERRORS, SessionAcknowledgePlan, ShareSession
from kafka_share.share.unsent import (
    Channel,
    ResponseHandler,
    Sink,
    UnsentRequest,
)

if TYPE_CHECKING:
    from kafka_share.metrics import ShareConsumerMetrics

__all__ = ["FetchSettings", "ShareConsumeManager"]

log = logging.getLogger("kafka_share.fetch")

#: Lock duration assumed when a response does not say (ShareFetch v0)
_UNKNOWN_LOCK_MS = 30_000
#: How long acknowledgements waiting for a ShareFetch to ride on may wait for one
#: before they go as a ShareAcknowledge of their own.
ACK_LINGER_MS = 50
@attrs.frozen
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



class ShareConsumeManager:
    """Share sessions, fetching and acknowledging, for one consumer. Network thread only."""

    def __init__(
        self,
        *,
        settings: FetchSettings,
        cluster: ClusterMetadata,
        sink: Sink,
        member_id: str,
        capabilities: Callable[[int], ShareCapabilities | None],
        metrics: ShareConsumerMetrics | None = None,
        logger: Logger | None = None,
        random_source: Callable[[], float] | None = None,
    ) -> None:
        self._metrics = metrics
        self._log: Logger = logger or log
        self._settings = settings
        self._backoff = ExponentialBackoff(
            settings.retry_backoff_ms, settings.retry_backoff_max_ms,
            random_source=random_source,
        )
        self._cluster = cluster
        self._sink = sink
        self._member_id = member_id
        #: node -> what its negotiated share protocol can do (None while unknown)
        self._capabilities = capabilities
        self._nodes: dict[int, NodeState] = {}
        self.assigned: list[TopicIdPartition] = []
        self.fetch_more = False
        #: the wanted round is a fetch ahead: max_wait_ms 0, one shot
        self._ahead = False
        self.member_ready = False
        self._closing: SyncCommit | None = None
        self._record_limit_cursor = 0
        self._reported_v1_limit = False
        self._now_ms = 0
        self._fetch_blocked = False
        #: every record this consumer holds, from acquisition until its ack completes
        self.held = HeldRecords(track_acks=settings.auto_renew)
        #: share.auto.renew's schedule (None: off, or given up on)
        self._renewal = RenewalSchedule(settings.auto_renew_max_ms) if settings.auto_renew else None
        #: id of each auto-renewal's Acknowledgements in flight -> when it was sent
        self._auto_renewals: dict[int, int] = {}
        #: a renewal succeeded at least once (a refusal after that is not the group's setting)
        self._renewed_once = False
        #: cap on the records a fetch asks for (the application's pace); None: max_records
        self._max_records_cap: int | None = None
        #: the wanted round ends then, fetched or not (the poll that asked for it
        #: gave up); None: it lasts until records arrive
        self._fetch_until_ms: int | None = None
        #: a ShareFetch of the wanted round went out (a round sends at least one)
        self._round_fetched = False

    # -- inputs from the application ------------------------------------------------

    def _node(self, node_id: int) -> NodeState:
        state = self._nodes.get(node_id)
        if state is None:
            state = NodeState(
                ShareSession(node_id, self._log),
                deferral=AckDeferral(),
            )
            self._nodes[node_id] = state
        return state

    def on_fetch(
        self,
        acks: Mapping[TopicIdPartition, tuple[int, Acknowledgements]],
        *,
        ahead: bool = False,
        max_records: int | None = None,
        until_ms: int | None = None,
    ) -> None:
        """The application wants records; ``acks`` ride on the next ShareFetch.

        ``max_records`` caps the records asked for (the application's measured
        pace within the lock, or what its poll still takes); None asks for
        ``max.poll.records``.

        ``until_ms``: the round ends then even if it brought nothing (once it
        has sent a fetch: ``poll(0)`` still asks), and no fetch of it waits on
        the broker past it (``max_wait_ms`` is cut). A
        ``record_limit`` consumer asks so for its poll's deadline: a fetch that
        outlived the poll would lock records nobody asked for, and an idle
        consumer would keep long-polling, taking every record produced or
        released meanwhile from the members that do poll. None: the round lasts
        until records arrive (``batch_optimized`` fetches in the background).

        ``ahead``: the application still has records to deliver and asks early.
        Such a round has ``max_wait_ms`` 0 and is not repeated if it brings
        nothing: the broker answers at once with what it can acquire now. A
        fetch ahead that waited would hold this consumer's acks behind it (one
        request per node is in flight) while the broker waits for locks that
        those very acks, or the records still being delivered, would free.
        """
        if not ahead:
            self._ahead = False
        elif not self.fetch_more:
            self._ahead = True
        self._max_records_cap = max_records
        self._fetch_until_ms = until_ms
        self._round_fetched = False
        self.fetch_more = True
        for tip, (node_id, a) in self._current(acks, None).items():
            merge_into(self._node(node_id).piggyback, tip, a)

    def on_async(
        self,
        acks: Mapping[TopicIdPartition, tuple[int, Acknowledgements]],
        deadline_ms: int,
        *,
        linger_until_ms: int = 0,
    ) -> None:
        """Acknowledgements to send as a ShareAcknowledge; with ``linger_until_ms``
        they may wait until then for a ShareFetch to the same node to carry them."""
        for tip, (node_id, a) in self._current(acks, None).items():
            queue_async(self._node(node_id), {tip: a}, deadline_ms, linger_until_ms)

    def on_sync(
        self,
        acks: Mapping[TopicIdPartition, tuple[int, Acknowledgements]],
        deadline_ms: int,
        token: object,
    ) -> None:
        # A commit sends everything still waiting: acknowledgements queued to ride
        # on a fetch or lingering for one go with it (and are reported with it).
        per_node: dict[int, dict[TopicIdPartition, Acknowledgements]] = {}
        for node_id, state in self._nodes.items():
            for source in (state.async_acks, state.piggyback):
                for tip, a in source.items():
                    merge_into(per_node.setdefault(node_id, {}), tip, a)
            state.async_acks = {}
            state.piggyback = {}
        commit = SyncCommit(deadline_ms, token, per_node)
        for tip, (node_id, a) in self._current(acks, commit).items():
            merge_into(per_node.setdefault(node_id, {}), tip, a)
        for node_id in per_node:
            self._node(node_id).sync_queue.append(commit)
        if commit.done():
            self._resolve(commit)

    def on_close(
        self,
        acks: Mapping[TopicIdPartition, tuple[int, Acknowledgements]],
        deadline_ms: int,
        token: object,
    ) -> None:
        """Final acks and a closing ShareAcknowledge (epoch -1) to every node with a session."""
        self.fetch_more = False
        per_node: dict[int, dict[TopicIdPartition, Acknowledgements]] = {}
        commit = SyncCommit(deadline_ms, token, per_node)
        for tip, (node_id, a) in self._current(acks, commit).items():
            per_node.setdefault(node_id, {})[tip] = a
        for node_id, state in self._nodes.items():
            pending = per_node.setdefault(node_id, {})
            for source in (state.piggyback, state.async_acks):
                for tip, a in source.items():
                    merge_into(pending, tip, a)
            state.piggyback = {}
            state.async_acks = {}
            if not pending and state.session.is_new:
                del per_node[node_id]  # no session was ever opened there
        for node_id in per_node:
            self._node(node_id).close = commit
        self._closing = commit
        if commit.done():
            self._resolve(commit)

    def _current(
        self,
        acks: Mapping[TopicIdPartition, tuple[int, Acknowledgements]],
        commit: SyncCommit | None,
    ) -> Mapping[TopicIdPartition, tuple[int, Acknowledgements]]:
        """``acks`` less those of records acquired by a share session with their node
        that has since been replaced: a new session holds none of the old one's
        locks, so sending them would fail on the broker (INVALID_RECORD_STATE) or,
        worse, settle the same offsets re-acquired in the new session. They fail
        here as session lost; the broker redelivers those records."""
        stale = [
            tip for tip, (node_id, a) in acks.items()
            if a.session_generation is not None
            and a.session_generation != self._node(node_id).generation
        ]
        if self._renewal is not None:
            # Acknowledged records are not renewed any more.
            for tip, (_node_id, a) in acks.items():
                ranges = a.offset_ranges()
                if ranges is not None:
                    self.held.acks_sent_ranges(tip, ranges)
                else:
                    self.held.acks_sent(tip, a.offsets())
        if not stale:
            return acks
        for tip in stale:
            node_id, a = acks[tip]
            self._complete_error(tip, a, session_lost(node_id), commit)
        return {tip: na for tip, na in acks.items() if tip not in stale}

    def block_fetching(self) -> None:
        """Never fetch again (the consumer's configuration cannot work with this cluster)."""
        self._fetch_blocked = True
        self.fetch_more = False

    def close_sessions(self) -> None:
        """The member left the group (poll timeout or unsubscribe): close every
        established share session with a ShareAcknowledge at epoch -1, carrying the
        acknowledgements still waiting for that node. The broker releases the
        records the member still holds at once, instead of after the lock expires.
        Sessions reopen (epoch 0) when the member fetches again.
        """
        self.fetch_more = False
        self.member_ready = False
        for node_id, state in self._nodes.items():
            if state.session.is_new or state.session.closed or state.close is not None:
                continue
            pending: dict[TopicIdPartition, Acknowledgements] = {}
            for source in (state.piggyback, state.async_acks):
                for tip, a in source.items():
                    merge_into(pending, tip, a)
            state.piggyback = {}
            state.async_acks = {}
            state.close = SyncCommit(
                self._now_ms + self._settings.close_timeout_ms, None, {node_id: pending}
            )
            state.reopen_after_close = True

    # -- the round ------------------------------------------------------------------

    def poll(self, now_ms: int) -> list[UnsentRequest]:
        out: list[UnsentRequest] = []
        # Handlers run between rounds; they time their backoffs from this.
        self._now_ms = now_ms
        self._expire(now_ms)
        self._expire_held(now_ms)
        if (
            not self.member_ready
            and self._closing is None
            and not any(s.close for s in self._nodes.values())
        ):
            return out
        busy: set[int] = set()
        for node_id, state in self._nodes.items():
            if state.session.in_flight or now_ms < state.not_before_ms:
                continue
            req = self._next_ack_request(node_id, state, now_ms)
            if req is not None:
                out.append(req)
                busy.add(node_id)
        if self._renewal is not None and self.held:
            out.extend(self._renewal_requests(now_ms, busy))
        until = self._fetch_until_ms
        if self.fetch_more and until is not None and now_ms >= until and self._round_fetched:
            self.fetch_more = False  # the poll that asked gave up
        if self.fetch_more and self._closing is None and not self._fetch_blocked:
            out.extend(self._fetch_requests(now_ms))
        return out

    # -- lock renewal (share.auto.renew) -------------------------------------------

    def _may_renew_on(self, node_id: int, now_ms: int) -> bool:
        state = self._nodes.get(node_id)
        return (
            state is not None
            and self.member_ready
            and self._closing is None
            and state.close is None
            and not state.session.in_flight
            and not state.session.is_new
            and not state.session.closed
            and now_ms >= state.not_before_ms
        )

    def _expire_held(self, now_ms: int) -> None:
        """Forget records whose lock has run out; under auto-renewal, tell the
        application side (buffered ones must not be handed out)."""
        gone = self.held.expire(now_ms)
        if self._renewal is not None and gone:
            why = (
                "their locks ran out: share.auto.renew.max.ms "
                f"({self._renewal.max_ms} ms) after their acquisition had passed, or "
                "renewing them kept failing"
            )
            for span in gone:
                self._report_lost(span, why)

    def _report_lost(self, span: HeldSpan, reason: str) -> None:
        offsets = frozenset(span.held())
        if offsets:
            self._sink.locks_lost(
                LocksLost(span.partition, span.node_id, span.generation, offsets, reason)
            )

    def _renewal_requests(self, now_ms: int, busy: set[int]) -> list[UnsentRequest]:
        """One ShareAcknowledge of RENEWs per free node with locks due for renewal."""
        assert self._renewal is not None
        due = self._renewal.due(
            self.held, now_ms,
            lambda n: n not in busy and self._may_renew_on(n, now_ms),
        )
        per_node: dict[int, list[tuple[HeldSpan, list[int]]]] = {}
        for span, offsets in due:
            per_node.setdefault(span.node_id, []).append((span, offsets))
        out: list[UnsentRequest] = []
        for node_id, spans in sorted(per_node.items()):
            state = self._nodes[node_id]
            missing = self._missing(node_id, ShareFeature.AUTO_RENEW)
            if missing is not None:
                self._give_up_renewing(missing)
                return out
            acks: dict[TopicIdPartition, Acknowledgements] = {}
            chosen: list[tuple[HeldSpan, list[int]]] = []
            for span, offsets in spans:
                if span.generation != state.generation:
                    span.renewal_over = True  # an older session's: its locks are gone
                    continue
                a = acks.get(span.partition)
                if a is None:
                    a = acks[span.partition] = Acknowledgements()
                    a.session_generation = span.generation
                for o in offsets:
                    a.add(o, AcknowledgeType.RENEW)
                chosen.append((span, offsets))
            plan = state.session.build_acknowledge(acks) if acks else None
            if plan is None:
                continue
            for span, offsets in chosen:
                self.held.renew_sent(span, offsets)
            for a in plan.acknowledgements.values():
                self._auto_renewals[id(a)] = now_ms
            if self._metrics is not None:
                self._metrics.record_renewals(
                    sum(len(a) for a in plan.acknowledgements.values()), 0, now_ms
                )
            self._log.debug(
                "renewing the acquisition locks of %d record(s) on node %s",
                sum(len(a) for a in plan.acknowledgements.values()), node_id,
            )
            out.append(self._share_acknowledge(node_id, state, plan, None, close=False))
        return out

    def _give_up_renewing(self, error: KafkaError) -> None:
        """Auto-renewal cannot work with this broker or group: say so (fatal: the
        consumer was configured to rely on it) and stop renewing."""
        self._renewal = None
        self._sink.error(error, fatal=True)

    def _auto_renewed(
        self, tip: TopicIdPartition, acks: Acknowledgements, error: KafkaError | None,
        lock_ms: int | None,
    ) -> None:
        """The answer to an auto-renewal (never reported to the application)."""
        sent_ms = self._auto_renewals.pop(id(acks))
        offsets = acks.offsets()
        if error is None:
            self._renewed_once = True
            self.held.renewed(tip, offsets, sent_ms, lock_ms)
            return
        spans = self.held.renew_failed(tip, offsets)
        if self._metrics is not None:
            self._metrics.record_renewals(0, len(offsets), self._now_ms)
        self._log.debug(
            "renewing the locks of %d record(s) of %s-%s failed: %s",
            len(offsets), tip.topic, tip.partition, error,
        )
        refused = (
            isinstance(error, InvalidRecordStateError)
            and not self._renewed_once
            and self._renewal is not None
            and all(s.lock_expires_ms > sent_ms for s in spans)
        )
        for span in spans:
            self._report_lost(span, f"the broker refused to renew their locks ({error})")
        if refused:
            self._give_up_renewing(InvalidRecordStateError(
                "share.auto.renew: the broker refused to renew acquisition locks that had "
                f"not expired ({error}). The group most likely has "
                "share.renew.acknowledge.enable=false: enable it (kafka-share groups config "
                "GROUP --set share.renew.acknowledge.enable=true, or "
                "Admin.alter_group_configs) or set share.auto.renew=false and keep "
                "processing within the lock"
            ))

    def time_until_next_ms(self, now_ms: int) -> int:
        waits = [
            max(0, s.not_before_ms - now_ms)
            for s in self._nodes.values()
            if s.not_before_ms > now_ms
        ]
        if self._renewal is not None and self.held:
            renew_at = self._renewal.next_due_ms(
                self.held, now_ms, lambda n: self._may_renew_on(n, now_ms)
            )
            if renew_at is not None:
                waits.append(max(0, renew_at - now_ms))
            expiry = self.held.next_expiry_ms()
            if expiry is not None:
                waits.append(max(1, expiry - now_ms + 1))
        for s in self._nodes.values():
            # A node with a request in flight takes its acks when it answers (or
            # times out), which wakes the loop; one backing off after an error
            # takes them when the backoff ends. Until then they are not due: a
            # response that never completed held the loop in waits of 0 ms,
            # about a thousand rounds a second, until the request timed out.
            if not s.async_acks or s.session.in_flight:
                continue
            due = s.async_linger_until_ms
            if s.acks_held and now_ms >= due:
                due += ACK_LINGER_MS  # held acks past their window wait for the fetch
            waits.append(max(0, max(due, s.not_before_ms) - now_ms))
        return min(waits) if waits else 5000

    def on_disconnect(self, node_id: int) -> None:
        """The share connection to ``node_id`` dropped: its session is gone."""
        state = self._nodes.get(node_id)
        if state is not None and not state.session.in_flight:
            state.session.handle_error()

    # -- acknowledgements ---------------------------------------------------------------

    def _next_ack_request(
        self, node_id: int, state: NodeState, now_ms: int
    ) -> UnsentRequest | None:
        if (
            state.async_acks
            and now_ms >= state.async_linger_until_ms
            # held-back acks whose window ended ride on the fetch this round builds
            and not (state.acks_held and self._fetch_takes_held(state, now_ms))
        ):
            acks, state.async_acks = state.async_acks, {}
            state.acks_held = False
            return self._ack_request(node_id, state, acks, None, now_ms)
        while state.sync_queue:
            commit = state.sync_queue[0]
            acks_for_node = commit.per_node.pop(node_id, None)
            if acks_for_node is None:
                state.sync_queue.popleft()
                continue
            req = self._ack_request(node_id, state, acks_for_node, commit, now_ms)
            if req is not None:
                return req
            state.sync_queue.popleft()
        if state.close is not None:
            commit, state.close = state.close, None
            acks_for_node = commit.per_node.pop(node_id, {})
            if state.reopen_after_close and (state.session.closed or state.session.is_new):
                state.reopen_after_close = False
                state.session = ShareSession(node_id, self._log)
            if state.session.closed:
                self._fail(acks_for_node, NetworkError("the share session is closed"), commit)
                self._maybe_resolve(commit)
                return None
            if state.session.is_new:
                # Never established (or lost): there is nothing to close, and acks
                # cannot open a session.
                self._fail(acks_for_node, session_lost(node_id), commit)
                self._maybe_resolve(commit)
                return None
            plan = state.session.build_close(acks_for_node)
            return self._share_acknowledge(node_id, state, plan, commit, close=True)
        return None

    def _fetch_takes_held(self, state: NodeState, now_ms: int) -> bool:
        """Whether acks held back from a fetch (whose window has ended) may wait
        for the fetch this round builds instead of going as a ShareAcknowledge
        that the fetch would queue behind. Bounded: past ``ACK_LINGER_MS`` after
        the window they go on their own whatever happens."""
        return (
            self.fetch_more
            and self._closing is None
            and not self._fetch_blocked
            and now_ms < state.async_linger_until_ms + ACK_LINGER_MS
        )

    def _share_acknowledge(
        self,
        node_id: int,
        state: NodeState,
        plan: SessionAcknowledgePlan,
        commit: SyncCommit | None,
        *,
        close: bool,
    ) -> UnsentRequest:
        """The ShareAcknowledge for a session plan, with its response handler."""
        if commit is not None:
            commit.in_flight[node_id] = plan.acknowledgements
        self._count_sent(plan.acknowledgements)
        request = ShareAcknowledgeRequest(
            group_id=self._settings.group_id,
            member_id=self._member_id,
            share_session_epoch=plan.epoch,
            is_renew_ack=plan.is_renew_ack,
            topics=ack_topics(plan.topics),
        )
        handler = self._ack_handler(node_id, state, plan.acknowledgements, commit, close=close)
        return UnsentRequest(node_id, Channel.SHARE, guard_v2_features(request), handler)

    def _ack_request(
        self,
        node_id: int,
        state: NodeState,
        acks: dict[TopicIdPartition, Acknowledgements],
        commit: SyncCommit | None,
        now_ms: int,
    ) -> UnsentRequest | None:
        missing = self._missing(node_id, ShareFeature.RENEW)
        if missing is not None and any(a.has_renew for a in acks.values()):
            self._fail(acks, missing, commit)
            self._maybe_resolve(commit)
            return None
        plan = state.session.build_acknowledge(acks)
        if plan is None:
            self._fail(acks, session_lost(node_id), commit)
            self._maybe_resolve(commit)
            return None
        return self._share_acknowledge(node_id, state, plan, commit, close=False)

    def _ack_handler(
        self,
        node_id: int,
        state: NodeState,
        acks: dict[TopicIdPartition, Acknowledgements],
        commit: SyncCommit | None,
        *,
        close: bool,
    ) -> ResponseHandler:
        # The session this request was built on: the answer updates that one, even
        # if the node's session has been replaced meanwhile.
        session = state.session

        def handle(response: Any, error: KafkaError | None, now_ms: int) -> None:
            self._now_ms = max(self._now_ms, now_ms)
            if commit is not None:
                commit.in_flight.pop(node_id, None)
            if error is not None:
                session.handle_error()
            else:
                assert isinstance(response, ShareAcknowledgeResponse)
                session.handle_response(response.error_code)
            if close and state.reopen_after_close and state.session is session:
                # The member left and will rejoin: the next request opens a new session.
                state.reopen_after_close = False
                state.session = ShareSession(node_id, self._log)
            if error is not None:
                self._fail(acks, transport_failure(node_id, error), commit)
            elif response.error_code != 0:
                err = self._top_level_ack_error(
                    node_id, response.error_code, response.error_message
                )
                self._fail(acks, err, commit)
            else:
                self._apply_leader_hints(response.responses, response.node_endpoints)
                self._take_ack_answer(
                    node_id, state, acks, commit, read_acknowledge(response, acks),
                    response.acquisition_lock_timeout_ms or None, close=close, now_ms=now_ms,
                )
            self._maybe_resolve(commit)

        return handle

    def _take_ack_answer(
        self,
        node_id: int,
        state: NodeState,
        acks: dict[TopicIdPartition, Acknowledgements],
        commit: SyncCommit | None,
        answer: AckAnswer,
        lock_ms: int | None,
        *,
        close: bool,
        now_ms: int,
    ) -> None:
        """Complete each acknowledged partition as answered; a commit's
        retriable failures are sent again (after the backoff)."""
        retry: dict[TopicIdPartition, Acknowledgements] = {}
        for tip, code, message in answer.answered:
            a = acks[tip]
            if code != 0 and commit is not None and not close and retriable(code):
                retry[tip] = a
                continue
            self._complete(tip, a, code, message, commit, lock_ms)
        for tip in answer.unanswered:
            self._complete_error(tip, acks[tip], _unanswered(), commit)
        if retry and commit is not None and commit.resolved:
            # The commit already timed out: retry these on their own.
            queue_async(state, retry, now_ms + self._settings.ack_timeout_ms, 0)
            state.not_before_ms = now_ms + self._settings.retry_backoff_ms
        elif retry and commit is not None:
            commit.per_node.setdefault(node_id, {}).update(retry)
            state.sync_queue.appendleft(commit)
            state.not_before_ms = now_ms + self._settings.retry_backoff_ms

    def _top_level_ack_error(self, node_id: int, code: int, message: str | None) -> KafkaError:
        if code in SESSION_RESET_ERRORS:
            return session_lost(node_id)
        if code in (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION):
            err = error_for_code(code, message)
            self._sink.error(err)
            return err
        return error_for_code(code, message)

    # -- fetching ------------------------------------------------------------------------

    def _missing(self, node_id: int, feature: ShareFeature) -> UnsupportedVersionError | None:
        """The error for using ``feature`` with ``node_id``, if it cannot be used."""
        caps = self._capabilities(node_id)
        if caps is None:
            return None  # not negotiated yet: the encode-time guard decides
        try:
            caps.require(feature)
        except UnsupportedVersionError as exc:
            return exc
        return None

    def _fetch_requests(self, now_ms: int) -> list[UnsentRequest]:
        wanted: dict[int, list[TopicIdPartition]] = {}
        for tip in self.assigned:
            leader = self._cluster.leader_of(tip.topic, tip.partition)
            if leader is None:
                self._cluster.request_update()
                continue
            wanted.setdefault(leader, []).append(tip)
        candidates = set(wanted) | {
            n for n, s in self._nodes.items() if s.piggyback or s.session.partitions
        }
        record_node: int | None = None
        if self._settings.record_limit and wanted:
            nodes = sorted(wanted)
            record_node = nodes[self._record_limit_cursor % len(nodes)]
            self._record_limit_cursor += 1
        out: list[UnsentRequest] = []
        for node_id in sorted(candidates):
            state = self._node(node_id)
            if state.session.in_flight or state.session.closed or now_ms < state.not_before_ms:
                continue
            parts = wanted.get(node_id, [])
            if not parts and not state.piggyback and not state.session.partitions:
                continue
            missing_limit = self._missing(node_id, ShareFeature.RECORD_LIMIT)
            if self._settings.record_limit and missing_limit is not None:
                if not self._reported_v1_limit:
                    self._reported_v1_limit = True
                    self._sink.error(missing_limit)
                continue
            fetch_records = bool(parts) and (record_node is None or record_node == node_id)
            out.append(self._fetch_request(node_id, state, parts, fetch_records, now_ms))
            self._round_fetched = self._round_fetched or fetch_records
        return out

    def _fetch_request(
        self, node_id: int, state: NodeState, parts: list[TopicIdPartition],
        fetch_records: bool, now_ms: int,
    ) -> UnsentRequest:
        """The ShareFetch to one node: its session's partitions, the acks that
        ride on it, and (``fetch_records``) how many records it asks for."""
        acks = self._riding_acks(node_id, state)
        s = self._settings
        hold_until = self._hold_acks_until(state, acks, fetch_records, now_ms)
        if hold_until is not None:
            queue_async(state, acks, now_ms + s.ack_timeout_ms, hold_until)
            state.acks_held = True
            acks = {}
        plan = state.session.build_fetch(parts, acks)
        if plan.epoch == 0:
            state.generation += 1  # a new session: what it acquires is its own
            self.held.session_replaced(node_id, state.generation)
            if state.generation > 1:
                self._sink.session_replaced(node_id, state.generation)
        if plan.unsendable:
            self._fail(plan.unsendable, session_lost(node_id), None)
        if plan.is_renew_ack or not fetch_records:
            max_wait = min_bytes = max_bytes = max_records = 0
        else:
            min_bytes, max_bytes = s.min_bytes, s.max_bytes
            max_wait, max_records = self._fetch_limits(node_id, hold_until, now_ms)
        request = ShareFetchRequest(
            group_id=s.group_id,
            member_id=self._member_id,
            share_session_epoch=plan.epoch,
            max_wait_ms=max_wait,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            max_records=max_records,
            batch_size=max_records,
            share_acquire_mode=1 if s.record_limit else 0,
            is_renew_ack=plan.is_renew_ack,
            topics=fetch_topics(plan.topics),
            forgotten_topics_data=forgotten(plan.forgotten),
        )
        known = {tip.topic_id: tip.topic for tip in state.session.partitions}
        known.update({tip.topic_id: tip.topic for tip in plan.forgotten})
        known.update({tip.topic_id: tip.topic for tip in plan.acknowledgements})
        self._count_sent(plan.acknowledgements)
        handler = self._fetch_handler(
            node_id, state, plan.acknowledgements, known, now_ms, self._ahead,
            state.generation, max_records,
        )
        return UnsentRequest(node_id, Channel.SHARE, guard_v2_features(request), handler)

    def _riding_acks(
        self, node_id: int, state: NodeState,
    ) -> dict[TopicIdPartition, Acknowledgements]:
        """The acks that ride on the next ShareFetch to ``node_id`` (taken from
        its queues); RENEWs fail here if the node cannot take them."""
        acks = state.piggyback
        state.piggyback = {}
        if state.async_acks:
            # Waiting acknowledgements ride on this fetch instead of costing
            # a ShareAcknowledge of their own.
            for tip, a in state.async_acks.items():
                merge_into(acks, tip, a)
            state.async_acks = {}
            state.acks_held = False
        missing_renew = self._missing(node_id, ShareFeature.RENEW)
        if missing_renew is not None and any(a.has_renew for a in acks.values()):
            renew = {t: a for t, a in acks.items() if a.has_renew}
            self._fail(renew, missing_renew, None)
            acks = {t: a for t, a in acks.items() if not a.has_renew}
        return acks

    def _fetch_limits(self, node_id: int, hold_until: int | None, now_ms: int) -> tuple[int, int]:
        """(max_wait_ms, max_records) of a fetch that asks for records."""
        s = self._settings
        max_wait, max_records = s.max_wait_ms, s.max_records
        if self._max_records_cap is not None:
            max_records = max(1, min(max_records, self._max_records_cap))
        if self._ahead:
            max_wait = 0
        if self._fetch_until_ms is not None:
            max_wait = max(0, min(max_wait, self._fetch_until_ms - now_ms))
        if hold_until is not None:
            # The held acks go with the next fetch, at the latest when
            # this one comes back empty at the end of their window.
            max_wait = max(0, min(max_wait, hold_until - now_ms))
        if self._renewal is not None:
            # A long-polling fetch would hold back the next renewal to
            # this node (one share request per node is in flight).
            renew_at = self._renewal.next_due_for_node(self.held, node_id)
            if renew_at is not None:
                max_wait = max(0, min(max_wait, renew_at - now_ms))
        return max_wait, max_records

    def _hold_acks_until(
        self,
        state: NodeState,
        acks: Mapping[TopicIdPartition, Acknowledgements],
        fetch_records: bool,
        now_ms: int,
    ) -> int | None:
        """Until when ``acks`` wait for a later fetch instead of riding on this
        long-polling one (see share/ack_deferral.py); None: they ride on it."""
        if (
            not acks
            or not fetch_records
            or self._ahead
            or state.deferral is None
            or state.session.is_new
            or self._settings.max_wait_ms <= 0
            or any(a.has_renew for a in acks.values())
        ):
            return None
        return state.deferral.hold_until_ms(now_ms, sum(len(a) for a in acks.values()))

    def _fetch_handler(
        self,
        node_id: int,
        state: NodeState,
        acks: dict[TopicIdPartition, Acknowledgements],
        topic_names: dict[uuid.UUID, str],
        sent_ms: int,
        ahead: bool,
        generation: int,
        max_records: int,
    ) -> ResponseHandler:
        session = state.session  # the session this request was built on

        def handle(response: Any, error: KafkaError | None, now_ms: int) -> None:
            self._now_ms = max(self._now_ms, now_ms)
            if error is not None:
                self._fetch_failed(node_id, state, session, acks, error, now_ms)
                return
            assert isinstance(response, ShareFetchResponse)
            session.handle_response(response.error_code)
            state.failures = 0
            if response.error_code != 0:
                err = self._top_level_ack_error(
                    node_id, response.error_code, response.error_message
                )
                self._fail(acks, err, None)
                if response.error_code not in SESSION_RESET_ERRORS:
                    self._log.warning("ShareFetch to node %s failed: %s", node_id, err)
                return
            self._apply_leader_hints(response.responses, response.node_endpoints)
            answer = read_fetch(response, acks, topic_names, self._cluster.topic_names)
            completed = self._take_fetch_answer(
                node_id, generation, acks, answer, response.acquisition_lock_timeout_ms, now_ms
            )
            self._fetch_done(state, completed, response.throttle_time_ms,
                             sent_ms=sent_ms, ahead=ahead, max_records=max_records, now_ms=now_ms)

        return handle

    def _fetch_failed(
        self, node_id: int, state: NodeState, session: ShareSession,
        acks: dict[TopicIdPartition, Acknowledgements], error: KafkaError, now_ms: int,
    ) -> None:
        """A ShareFetch got no answer (transport failure, unsupported version)."""
        if state.deferral is not None:
            state.deferral.on_failure()
        session.handle_error()
        # Back off before the next request to this node: a broker that is
        # down (or a leader that moved) would otherwise be asked again on
        # every loop, each failure also asking for new metadata.
        state.not_before_ms = now_ms + self._backoff.backoff_ms(state.failures)
        state.failures += 1
        if isinstance(error, UnsupportedVersionError):
            if not self._reported_v1_limit:
                self._reported_v1_limit = True
                self._sink.error(error)
            self.fetch_more = False
        self._fail(acks, transport_failure(node_id, error), None)
        self._cluster.request_update()

    def _take_fetch_answer(
        self, node_id: int, generation: int, acks: dict[TopicIdPartition, Acknowledgements],
        answer: FetchAnswer, lock_ms: int, now_ms: int,
    ) -> list[CompletedShareFetch]:
        """Per partition, in the response's order: complete the acks it carried,
        act on its error, or take what it acquired. Returns the partitions'
        data for the application."""
        completed: list[CompletedShareFetch] = []
        for p in answer.partitions:
            if p.acks is not None:
                self._complete(p.partition, p.acks, p.ack_error_code, p.ack_error_message,
                               None, None)
            if p.error_code != 0:
                self._partition_fetch_error(p.partition, p.error_code, p.error_message)
            elif p.acquired:
                fetch = self._acquired(node_id, generation, p, lock_ms, now_ms)
                if fetch is not None:
                    completed.append(fetch)
        for tip in answer.unanswered:
            self._complete_error(tip, acks[tip], _unanswered(), None)
        return completed

    def _acquired(
        self, node_id: int, generation: int, p: PartitionFetch, lock_ms: int, now_ms: int,
    ) -> CompletedShareFetch | None:
        """Hold what a partition acquired; its data for the application (None if
        all of it was an acquisition sent again)."""
        tip = p.partition
        acquired, resent = self.held.acquire(
            tip, node_id, generation, p.acquired,
            now_ms, lock_ms if lock_ms > 0 else _UNKNOWN_LOCK_MS,
        )
        if resent:
            # The same acquisition sent again (same node, session and delivery
            # count): delivering it again would hand the application a record
            # twice and acknowledge it twice.
            self._log.debug(
                "dropped %d record(s) of %s-%s that node %s sent again while this "
                "consumer holds them", resent, tip.topic, tip.partition, node_id,
            )
            if self._metrics is not None:
                self._metrics.record_dropped("resent", resent, now_ms)
        if not acquired:
            return None
        return CompletedShareFetch(
            node_id, tip, p.records, acquired, lock_ms if lock_ms > 0 else None, generation,
            lock_expiry_ms(now_ms, lock_ms) if lock_ms > 0 else None,
        )

    def _fetch_done(
        self, state: NodeState, completed: list[CompletedShareFetch], throttle_time_ms: int,
        *, sent_ms: int, ahead: bool, max_records: int, now_ms: int,
    ) -> None:
        """Pace, measure, and hand over what a fetch brought; end its round."""
        size_bytes = sum(len(f.records) for f in completed)
        acquired_count = sum(b - a + 1 for f in completed for a, b, _ in f.acquired)
        if state.deferral is not None:
            state.deferral.on_response(acquired_count, size_bytes, max_records)
        if self._metrics is not None:
            self._metrics.record_fetch(
                now_ms, latency_ms=now_ms - sent_ms, size_bytes=size_bytes,
                records=acquired_count, throttle_time_ms=throttle_time_ms,
            )
        if completed or (ahead and self._ahead):
            # An empty answer to a fetch ahead ends that round too, unless the
            # application asked for a normal fetch in the meantime.
            self.fetch_more = False
            self._unstrand_piggyback()
        if completed:
            self._sink.add_fetches(completed)

    def _unstrand_piggyback(self) -> None:
        """The fetch round ended: acks queued to ride on a fetch since that round's
        requests went out would wait for the next round, which may be a whole
        response away. They linger briefly for one, then go as a ShareAcknowledge."""
        for state in self._nodes.values():
            if state.piggyback:
                acks, state.piggyback = state.piggyback, {}
                queue_async(
                    state, acks, self._now_ms + self._settings.ack_timeout_ms,
                    self._now_ms + ACK_LINGER_MS,
                )

    def _partition_fetch_error(self, tip: TopicIdPartition, code: int, message: str | None) -> None:
        if code in REFRESH_METADATA_ERRORS:
            if code in TOPIC_ID_ERRORS:
                self._cluster.forget_topic_id(tip.topic_id)
            self._cluster.request_update()
            self._log.debug("ShareFetch for %s: error %s; refreshing metadata", tip, code)
            return
        if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            self._sink.error(error_for_code(code, message or f"not authorized to read {tip.topic}"))
            return
        if code == ErrorCode.CORRUPT_MESSAGE:
            self._sink.error(
                CorruptRecordError(
                    f"Encountered corrupt message when fetching {tip.topic}-{tip.partition}"
                )
            )
            return
        self._log.warning("ShareFetch for %s returned error %s: %s", tip, code, message)

    def _apply_leader_hints(self, topics: Iterable[Any], endpoints: Iterable[Any]) -> None:
        brokers = [BrokerInfo(e.node_id, e.host, e.port, e.rack) for e in endpoints]
        for topic in topics:
            name = self._cluster.topic_names.get(topic.topic_id)
            for p in topic.partitions:
                if p.error_code in LEADER_MOVED and name is not None:
                    leader = p.current_leader
                    self._cluster.update_leader(
                        name,
                        p.partition_index,
                        PartitionLeader(leader.leader_id, leader.leader_epoch),
                        brokers,
                    )

    # -- completion ---------------------------------------------------------------------

    def _complete(
        self,
        tip: TopicIdPartition,
        acks: Acknowledgements,
        code: int,
        message: str | None,
        commit: SyncCommit | None,
        lock_ms: int | None,
    ) -> None:
        if acks.is_completed:
            return  # already failed locally (e.g. timed out); a late answer changes nothing
        acks.complete(code, message)
        error = error_for_code(code, message) if code != 0 else None
        renewed = (
            frozenset(o for o, t in acks.items() if t == AcknowledgeType.RENEW)
            if code == 0 and acks.has_renew
            else frozenset()
        )
        self._report(tip, acks, error, commit, renewed, lock_ms)

    def _complete_error(
        self,
        tip: TopicIdPartition,
        acks: Acknowledgements,
        error: KafkaError,
        commit: SyncCommit | None,
    ) -> None:
        if acks.is_completed:
            return
        acks.complete(getattr(error, "code", -1), str(error))
        self._report(tip, acks, error, commit, frozenset(), None)

    def _fail(
        self,
        acks: Mapping[TopicIdPartition, Acknowledgements],
        error: KafkaError,
        commit: SyncCommit | None,
    ) -> None:
        for tip, a in acks.items():
            self._complete_error(tip, a, error, commit)

    def _report(
        self,
        tip: TopicIdPartition,
        acks: Acknowledgements,
        error: KafkaError | None,
        commit: SyncCommit | None,
        renewed: frozenset[int],
        lock_ms: int | None,
    ) -> None:
        # A partition in several batches of one commit keeps its first error.
        if id(acks) in self._auto_renewals:
            self._auto_renewed(tip, acks, error, lock_ms)
            return
        if commit is not None and commit.results.get(tip) is None:
            commit.results[tip] = error
        count = len(acks)
        if self.held:
            # Settled either way; RENEWed ones are held again (by the application).
            ranges = acks.offset_ranges()
            if ranges is not None and not renewed:
                self.held.settle_ranges(tip, ranges)  # a batch accepted as a whole
            else:
                offsets = acks.offsets()
                self.held.settle(tip, offsets - renewed if renewed else offsets)
            if renewed:
                self.held.ack_returned(tip, renewed)
        if error is not None:
            # Visible at the default level: these records come back to the group.
            self._log.warning(
                "acknowledging %d record(s) of %s-%s failed: %s",
                count, tip.topic, tip.partition, error,
            )
            if self._metrics is not None:
                self._metrics.record_acknowledgements(0, count, self._now_ms)
        self._sink.ack_completed(
            AcknowledgementCompletion(
                partition=tip,
                acknowledgements=acks,
                error=error,
                renewed_offsets=renewed,
                acquisition_lock_timeout_ms=lock_ms,
            )
        )

    def _count_sent(self, acks: Mapping[TopicIdPartition, Acknowledgements]) -> None:
        if self._metrics is not None and acks:
            self._metrics.record_acknowledgements(
                sum(len(a) for a in acks.values()), 0, self._now_ms
            )

    def _expire(self, now_ms: int) -> None:
        """Complete every operation whose deadline has passed."""
        for node_id, state in self._nodes.items():
            if state.async_acks and now_ms >= state.async_deadline_ms:
                acks, state.async_acks = state.async_acks, {}
                self._fail(
                    acks,
                    RequestTimedOutError(
                        "acknowledgements could not be sent before their deadline"
                    ),
                    None,
                )
            for commit in list(state.sync_queue):
                if now_ms >= commit.deadline_ms:
                    self._expire_commit(commit, now_ms)
            if state.close is not None and now_ms >= state.close.deadline_ms:
                self._expire_close(state.close)
                state.close = None
            state.sync_queue = deque(c for c in state.sync_queue if not c.resolved)
            del node_id
        if self._closing is not None and now_ms >= self._closing.deadline_ms:
            self._expire_close(self._closing)

    def _expire_commit(self, commit: SyncCommit, now_ms: int) -> None:
        """A ``commit_sync`` ran out of time: the caller gets a timeout, but no
        acknowledgement is thrown away. Those not sent yet stay pending (they ride on
        the next ShareFetch to their node or go with the next commit, as Java's
        do); those sent keep waiting for their answer, which reaches the commit
        callback when it comes. Throwing them away would redeliver records the
        application has processed."""
        for node_id, acks in list(commit.per_node.items()):
            queue_async(
                self._node(node_id), acks, now_ms + self._settings.ack_timeout_ms,
                now_ms + ACK_LINGER_MS,
            )
        commit.per_node.clear()
        self._resolve(commit, timed_out=True)

    def _expire_close(self, commit: SyncCommit) -> None:
        """A close (or a leave's session close) ran out of time: the consumer is
        going away, so what was not answered fails; the broker releases those
        records when the session or the lock ends."""
        for _node_id, acks in list(commit.per_node.items()):
            self._fail(
                acks,
                RequestTimedOutError("acknowledgements could not be sent before the deadline"),
                commit,
            )
        commit.per_node.clear()
        for _node_id, acks in list(commit.in_flight.items()):
            # Sent but unanswered: the answer, if it ever comes, is ignored
            # (Acknowledgements.complete keeps the first outcome).
            self._fail(acks, RequestTimedOutError(
                "no answer to the acknowledgements before the deadline"), commit)
        commit.in_flight.clear()
        self._resolve(commit, timed_out=True)

    def _resolve(self, commit: SyncCommit, *, timed_out: bool = False) -> None:
        if commit.resolved:
            return
        commit.resolved = True
        if commit.token is not None:
            self._sink.commit_completed(commit.token, dict(commit.results), timed_out=timed_out)

    def _maybe_resolve(self, commit: SyncCommit | None) -> None:
        if commit is not None and commit.done():
            self._resolve(commit)

    @property
    def close_done(self) -> bool:
        return self._closing is None or self._closing.resolved or self._closing.token is None


def _unanswered() -> InvalidRecordStateError:
    # Java's words for acknowledgements a response does not mention.
    return InvalidRecordStateError(
        "Acknowledgement not successful due to invalid response from broker"
    )
