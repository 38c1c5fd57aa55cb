"""The fetch rounds of the consume manager: one ShareFetch per leader node of the
assigned partitions, carrying that node's piggyback acknowledgements, and what
the answers bring (acquired records, acknowledgement outcomes, partition
errors, leader hints).

A round starts when the application asks for records (:meth:`Fetcher.ask`) and
ends when records arrive, or, for a fetch ahead or a poll with a deadline, when
its one shot is answered or the deadline passes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from kafka_share.errors import (
    CorruptRecordError,
    KafkaError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_share.models import TopicIdPartition
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import ShareFetchRequest, ShareFetchResponse
from kafka_share.share.ack_deferral import ACK_DEFER_MAX_RECORDS, ACK_DEFER_MS
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.backoff import ExponentialBackoff
from kafka_share.share.capabilities import ShareFeature
from kafka_share.share.consume.completion import Completion, unanswered
from kafka_share.share.consume.context import ACK_LINGER_MS, ConsumeContext
from kafka_share.share.consume.errors import (
    REFRESH_METADATA_ERRORS,
    TOPIC_ID_ERRORS,
    apply_leader_hints,
    session_lost,
    transport_failure,
)
from kafka_share.share.consume.nodes import NodeState, merge_into, queue_async
from kafka_share.share.consume.renewing import AutoRenewal
from kafka_share.share.consume.responses import FetchAnswer, PartitionFetch, read_fetch
from kafka_share.share.consume.wire import fetch_topics, forgotten, guard_v2_features
from kafka_share.share.held import lock_expiry_ms
from kafka_share.share.results import CompletedShareFetch
from kafka_share.share.session import SESSION_RESET_ERRORS, ShareSession
from kafka_share.share.unsent import Channel, UnsentRequest

__all__ = ["Fetcher"]

#: Lock duration assumed when a response does not say (ShareFetch v0)
_UNKNOWN_LOCK_MS = 30_000


class Fetcher:
    """Builds the ShareFetch requests of a round and takes their answers. Network thread only."""

    def __init__(
        self,
        ctx: ConsumeContext,
        completion: Completion,
        renewal: AutoRenewal,
        random_source: Callable[[], float] | None,
    ) -> None:
        self._ctx = ctx
        self._done = completion
        self._renewal = renewal
        s = ctx.settings
        self._backoff = ExponentialBackoff(
            s.retry_backoff_ms, s.retry_backoff_max_ms, random_source=random_source,
        )
        #: the wanted round is a fetch ahead: max_wait_ms 0, one shot
        self.ahead = False
        #: cap on the records a fetch asks for (the application's pace); None: max_records
        self._max_records_cap: int | None = None
        #: the wanted round ends then, fetched or not (the poll that asked for it
        #: gave up); None: it lasts until records arrive
        self._until_ms: int | None = None
        #: a ShareFetch of the wanted round went out (a round sends at least one)
        self._round_fetched = False
        self._record_limit_cursor = 0
        self._reported_v1_limit = False

    def ask(self, *, ahead: bool, max_records: int | None, until_ms: int | None) -> None:
        """Start (or renew) the round the application wants (see
        ``ShareConsumeManager.on_fetch``)."""
        ctx = self._ctx
        if not ahead:
            self.ahead = False
        elif not ctx.fetch_more:
            self.ahead = True
        self._max_records_cap = max_records
        self._until_ms = until_ms
        self._round_fetched = False
        ctx.fetch_more = True

    def end_if_given_up(self, now_ms: int) -> None:
        """The poll that asked for the round gave up: once the round has sent a
        fetch, it ends at the poll's deadline."""
        until = self._until_ms
        if self._ctx.fetch_more and until is not None and now_ms >= until and self._round_fetched:
            self._ctx.fetch_more = False

    def requests(self, now_ms: int) -> list[UnsentRequest[ShareFetchResponse]]:
        """This round's ShareFetch requests, one per free node."""
        ctx = self._ctx
        wanted: dict[int, list[TopicIdPartition]] = {}
        for tip in ctx.assigned:
            leader = ctx.cluster.leader_of(tip.topic, tip.partition)
            if leader is None:
                ctx.cluster.request_update()
                continue
            wanted.setdefault(leader, []).append(tip)
        candidates = set(wanted) | {
            n for n, s in ctx.nodes.items() if s.piggyback or s.session.partitions
        }
        record_node: int | None = None
        if ctx.settings.record_limit and wanted:
            nodes = sorted(wanted)
            record_node = nodes[self._record_limit_cursor % len(nodes)]
            self._record_limit_cursor += 1
        out: list[UnsentRequest[ShareFetchResponse]] = []
        for node_id in sorted(candidates):
            state = ctx.node(node_id)
            if state.session.in_flight or state.session.closed or now_ms < state.not_before_ms:
                continue
            parts = wanted.get(node_id, [])
            if not parts and not state.piggyback and not state.session.partitions:
                continue
            missing_limit = ctx.missing(node_id, ShareFeature.RECORD_LIMIT)
            if ctx.settings.record_limit and missing_limit is not None:
                if not self._reported_v1_limit:
                    self._reported_v1_limit = True
                    ctx.sink.error(missing_limit)
                continue
            fetch_records = bool(parts) and (record_node is None or record_node == node_id)
            out.append(self._fetch_request(node_id, state, parts, fetch_records, now_ms))
            self._round_fetched = self._round_fetched or fetch_records
        return out

    def _fetch_request(
        self, node_id: int, state: NodeState, parts: list[TopicIdPartition],
        fetch_records: bool, now_ms: int,
    ) -> UnsentRequest[ShareFetchResponse]:
        """The ShareFetch to one node: its session's partitions, the acks that
        ride on it, and (``fetch_records``) how many records it asks for."""
        ctx = self._ctx
        acks = self._riding_acks(node_id, state)
        s = ctx.settings
        hold_until = self._hold_acks_until(state, acks, fetch_records, now_ms)
        if hold_until is not None:
            queue_async(state, acks, now_ms + s.ack_timeout_ms, hold_until)
            state.acks_held = True
            acks = {}
        plan = state.session.build_fetch(parts, acks)
        if plan.epoch == 0:
            state.generation += 1  # a new session: what it acquires is its own
            ctx.held.session_replaced(node_id, state.generation)
            if state.generation > 1:
                ctx.sink.session_replaced(node_id, state.generation)
        if plan.unsendable:
            self._done.fail(plan.unsendable, session_lost(node_id), None)
        if plan.is_renew_ack or not fetch_records:
            max_wait = min_bytes = max_bytes = max_records = 0
        else:
            min_bytes, max_bytes = s.min_bytes, s.max_bytes
            max_wait, max_records = self._fetch_limits(node_id, hold_until, now_ms)
        request = ShareFetchRequest(
            group_id=s.group_id,
            member_id=ctx.member_id,
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
        self._done.count_sent(plan.acknowledgements)
        answered, failed = self._fetch_handlers(
            node_id, state, plan.acknowledgements, known, now_ms, self.ahead,
            state.generation, max_records,
        )
        return UnsentRequest(
            node_id, Channel.SHARE, guard_v2_features(request), ShareFetchResponse,
            answered, failed,
        )

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
        missing_renew = self._ctx.missing(node_id, ShareFeature.RENEW)
        if missing_renew is not None and any(a.has_renew for a in acks.values()):
            renew = {t: a for t, a in acks.items() if a.has_renew}
            self._done.fail(renew, missing_renew, None)
            acks = {t: a for t, a in acks.items() if not a.has_renew}
        return acks

    def _fetch_limits(self, node_id: int, hold_until: int | None, now_ms: int) -> tuple[int, int]:
        """(max_wait_ms, max_records) of a fetch that asks for records."""
        s = self._ctx.settings
        max_wait, max_records = s.max_wait_ms, s.max_records
        if self._max_records_cap is not None:
            max_records = max(1, min(max_records, self._max_records_cap))
        if self.ahead:
            max_wait = 0
        if self._until_ms is not None:
            max_wait = max(0, min(max_wait, self._until_ms - now_ms))
        if hold_until is not None:
            # The held acks go with the next fetch, at the latest when
            # this one comes back empty at the end of their window.
            max_wait = max(0, min(max_wait, hold_until - now_ms))
        # A long-polling fetch would hold back the next renewal to
        # this node (one share request per node is in flight).
        renew_at = self._renewal.next_due_for_node_ms(node_id)
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
        long-polling one (see share/ack_deferral.py); None: they ride on it.

        Acknowledgements of records whose lock has run out (or would within the
        window) are never held back: this fetch may acquire those records again,
        and the broker takes an acknowledgement by offset, so one that came after
        it would settle the new delivery (a late ACCEPT would complete a record
        its consumer never finished, and keep it from its delivery limit and
        dead-letter queue). Riding on the fetch, it is applied before the fetch
        acquires (and refused, as in Java's client)."""
        if (
            not acks
            or not fetch_records
            or self.ahead
            or state.deferral is None
            or state.session.is_new
            or self._ctx.settings.max_wait_ms <= 0
            or any(a.has_renew for a in acks.values())
        ):
            return None
        records = sum(len(a) for a in acks.values())
        held = self._ctx.held
        window_end_ms = now_ms + ACK_DEFER_MS
        if records <= ACK_DEFER_MAX_RECORDS and not all(
            held.locked_until(tip, a.offsets(), window_end_ms) for tip, a in acks.items()
        ):
            return None
        return state.deferral.hold_until_ms(now_ms, records)

    # -- the answer -------------------------------------------------------------------

    def _fetch_handlers(
        self,
        node_id: int,
        state: NodeState,
        acks: dict[TopicIdPartition, Acknowledgements],
        topic_names: dict[uuid.UUID, str],
        sent_ms: int,
        ahead: bool,
        generation: int,
        max_records: int,
    ) -> tuple[Callable[[ShareFetchResponse, int], None], Callable[[KafkaError, int], None]]:
        """The handlers of a ShareFetch's answer and of its failure."""
        session = state.session  # the session this request was built on
        ctx = self._ctx

        def answered(response: ShareFetchResponse, now_ms: int) -> None:
            ctx.now_ms = max(ctx.now_ms, now_ms)
            session.handle_response(response.error_code)
            state.failures = 0
            if response.error_code != 0:
                self._fetch_refused(node_id, acks, response)
                return
            apply_leader_hints(ctx.cluster, response.responses, response.node_endpoints)
            answer = read_fetch(response, acks, topic_names, ctx.cluster.topic_names)
            completed = self._take_fetch_answer(
                node_id, generation, acks, answer, response.acquisition_lock_timeout_ms, now_ms
            )
            self._fetch_done(state, completed, response.throttle_time_ms,
                             sent_ms=sent_ms, ahead=ahead, max_records=max_records, now_ms=now_ms)

        def failed(error: KafkaError, now_ms: int) -> None:
            ctx.now_ms = max(ctx.now_ms, now_ms)
            self._fetch_failed(node_id, state, session, acks, error, now_ms)

        return answered, failed

    def _fetch_refused(
        self, node_id: int, acks: dict[TopicIdPartition, Acknowledgements],
        response: ShareFetchResponse,
    ) -> None:
        """A ShareFetch answered with a top-level error: its acks fail."""
        err = self._done.top_level_error(node_id, response.error_code, response.error_message)
        self._done.fail(acks, err, None)
        if response.error_code not in SESSION_RESET_ERRORS:
            self._ctx.log.warning("ShareFetch to node %s failed: %s", node_id, err)

    def _fetch_failed(
        self, node_id: int, state: NodeState, session: ShareSession,
        acks: dict[TopicIdPartition, Acknowledgements], error: KafkaError, now_ms: int,
    ) -> None:
        """A ShareFetch got no answer (transport failure, unsupported version)."""
        ctx = self._ctx
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
                ctx.sink.error(error)
            ctx.fetch_more = False
        self._done.fail(acks, transport_failure(node_id, error), None)
        ctx.cluster.request_update()

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
                self._done.complete(p.partition, p.acks, p.ack_error_code, p.ack_error_message,
                                    None, None)
            if p.error_code != 0:
                self._partition_fetch_error(p.partition, p.error_code, p.error_message)
            elif p.acquired:
                fetch = self._acquired(node_id, generation, p, lock_ms, now_ms)
                if fetch is not None:
                    completed.append(fetch)
        for tip in answer.unanswered:
            self._done.complete_error(tip, acks[tip], unanswered(), None)
        return completed

    def _acquired(
        self, node_id: int, generation: int, p: PartitionFetch, lock_ms: int, now_ms: int,
    ) -> CompletedShareFetch | None:
        """Hold what a partition acquired; its data for the application (None if
        all of it was an acquisition sent again)."""
        ctx = self._ctx
        tip = p.partition
        acquired, resent = ctx.held.acquire(
            tip, node_id, generation, p.acquired,
            now_ms, lock_ms if lock_ms > 0 else _UNKNOWN_LOCK_MS,
        )
        if resent:
            # The same acquisition sent again (same node, session and delivery
            # count): delivering it again would hand the application a record
            # twice and acknowledge it twice.
            ctx.log.debug(
                "dropped %d record(s) of %s-%s that node %s sent again while this "
                "consumer holds them", resent, tip.topic, tip.partition, node_id,
            )
            if ctx.metrics is not None:
                ctx.metrics.record_dropped("resent", resent, now_ms)
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
        ctx = self._ctx
        size_bytes = sum(len(f.records) for f in completed)
        acquired_count = sum(b - a + 1 for f in completed for a, b, _ in f.acquired)
        if state.deferral is not None:
            state.deferral.on_response(acquired_count, size_bytes, max_records)
        if ctx.metrics is not None:
            ctx.metrics.record_fetch(
                now_ms, latency_ms=now_ms - sent_ms, size_bytes=size_bytes,
                records=acquired_count, throttle_time_ms=throttle_time_ms,
            )
        if completed or (ahead and self.ahead):
            # An empty answer to a fetch ahead ends that round too, unless the
            # application asked for a normal fetch in the meantime.
            ctx.fetch_more = False
            self._unstrand_piggyback()
        if completed:
            ctx.sink.add_fetches(completed)

    def _unstrand_piggyback(self) -> None:
        """The fetch round ended: acks queued to ride on a fetch since that round's
        requests went out would wait for the next round, which may be a whole
        response away. They linger briefly for one, then go as a ShareAcknowledge."""
        ctx = self._ctx
        for state in ctx.nodes.values():
            if state.piggyback:
                acks, state.piggyback = state.piggyback, {}
                queue_async(
                    state, acks, ctx.now_ms + ctx.settings.ack_timeout_ms,
                    ctx.now_ms + ACK_LINGER_MS,
                )

    def _partition_fetch_error(self, tip: TopicIdPartition, code: int, message: str | None) -> None:
        ctx = self._ctx
        if code in REFRESH_METADATA_ERRORS:
            if code in TOPIC_ID_ERRORS:
                ctx.cluster.forget_topic_id(tip.topic_id)
            ctx.cluster.request_update()
            ctx.log.debug("ShareFetch for %s: error %s; refreshing metadata", tip, code)
            return
        if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            ctx.sink.error(error_for_code(code, message or f"not authorized to read {tip.topic}"))
            return
        if code == ErrorCode.CORRUPT_MESSAGE:
            ctx.sink.error(
                CorruptRecordError(
                    f"Encountered corrupt message when fetching {tip.topic}-{tip.partition}"
                )
            )
            return
        ctx.log.warning("ShareFetch for %s returned error %s: %s", tip, code, message)
