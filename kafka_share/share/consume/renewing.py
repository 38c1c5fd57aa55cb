"""``share.auto.renew``: renewing the acquisition locks of the records this
consumer holds, with ShareAcknowledge requests of RENEWs, and telling the
application side when a record's lock is lost for good.

When renewals are due comes from :class:`~kafka_share.share.renewal.RenewalSchedule`
(pure policy); this part picks the nodes free to take a request, builds the
plans, and takes the answers, which never reach the application as
acknowledgements.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_share.errors import InvalidRecordStateError, KafkaError
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.capabilities import ShareFeature
from kafka_share.share.consume.context import ConsumeContext, ConsumePhase
from kafka_share.share.consume.nodes import NodeState
from kafka_share.share.held import HeldSpan
from kafka_share.share.renewal import RenewalSchedule
from kafka_share.share.results import LocksLost
from kafka_share.share.session import SessionAcknowledgePlan

__all__ = ["AutoRenewal"]


class AutoRenewal:
    """Renews held records' locks while ``share.auto.renew`` is on. Network thread only."""

    def __init__(self, ctx: ConsumeContext) -> None:
        self._ctx = ctx
        s = ctx.settings
        #: share.auto.renew's schedule (None: off, or given up on)
        self._schedule = RenewalSchedule(s.auto_renew_max_ms) if s.auto_renew else None
        #: id of each auto-renewal's Acknowledgements in flight -> when it was sent
        self._in_flight: dict[int, int] = {}
        #: a renewal succeeded at least once (a refusal after that is not the group's setting)
        self._renewed_once = False

    @property
    def active(self) -> bool:
        """Renewing (configured, and not given up on)."""
        return self._schedule is not None

    def owns(self, acks: Acknowledgements) -> bool:
        """Whether ``acks`` are an auto-renewal's (their answer comes here)."""
        return id(acks) in self._in_flight

    def acks_sent(self, acks: Mapping[TopicIdPartition, tuple[int, Acknowledgements]]) -> None:
        """The application acknowledged these: they are not renewed any more."""
        if self._schedule is None:
            return
        held = self._ctx.held
        for tip, (_node_id, a) in acks.items():
            ranges = a.offset_ranges()
            if ranges is not None:
                held.acks_sent_ranges(tip, ranges)
            else:
                held.acks_sent(tip, a.offsets())

    def _may_renew_on(self, node_id: int, now_ms: int) -> bool:
        ctx = self._ctx
        state = ctx.nodes.get(node_id)
        return (
            state is not None
            and ctx.phase is ConsumePhase.MEMBER
            and state.close is None
            and not state.session.in_flight
            and not state.session.is_new
            and not state.session.closed
            and now_ms >= state.not_before_ms
        )

    def expire_held(self, now_ms: int) -> None:
        """Forget records whose lock has run out; under auto-renewal, tell the
        application side (buffered ones must not be handed out)."""
        gone = self._ctx.held.expire(now_ms)
        if self._schedule is not None and gone:
            why = (
                "their locks ran out: share.auto.renew.max.ms "
                f"({self._schedule.max_ms} ms) after their acquisition had passed, or "
                "renewing them kept failing"
            )
            for span in gone:
                self._report_lost(span, why)

    def _report_lost(self, span: HeldSpan, reason: str) -> None:
        offsets = frozenset(span.held())
        if offsets:
            self._ctx.sink.locks_lost(
                LocksLost(span.partition, span.node_id, span.generation, offsets, reason)
            )

    def plans(
        self, now_ms: int, busy: set[int]
    ) -> list[tuple[int, NodeState, SessionAcknowledgePlan]]:
        """One ShareAcknowledge plan of RENEWs per free node with locks due for
        renewal (the caller sends them)."""
        ctx = self._ctx
        if self._schedule is None or not ctx.held:
            return []
        due = self._schedule.due(
            ctx.held, now_ms,
            lambda n: n not in busy and self._may_renew_on(n, now_ms),
        )
        per_node: dict[int, list[tuple[HeldSpan, list[int]]]] = {}
        for span, offsets in due:
            per_node.setdefault(span.node_id, []).append((span, offsets))
        out: list[tuple[int, NodeState, SessionAcknowledgePlan]] = []
        for node_id, spans in sorted(per_node.items()):
            missing = ctx.missing(node_id, ShareFeature.AUTO_RENEW)
            if missing is not None:
                self._give_up(missing)
                return out
            state = ctx.nodes[node_id]
            plan = self._plan(state, spans, now_ms)
            if plan is None:
                continue
            self._ctx.log.debug(
                "renewing the acquisition locks of %d record(s) on node %s",
                sum(len(a) for a in plan.acknowledgements.values()), node_id,
            )
            out.append((node_id, state, plan))
        return out

    def _plan(
        self, state: NodeState, spans: list[tuple[HeldSpan, list[int]]], now_ms: int,
    ) -> SessionAcknowledgePlan | None:
        """The RENEWs of one node's due spans, planned on its session."""
        ctx = self._ctx
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
            return None
        for span, offsets in chosen:
            ctx.held.renew_sent(span, offsets)
        for a in plan.acknowledgements.values():
            self._in_flight[id(a)] = now_ms
        if ctx.metrics is not None:
            ctx.metrics.record_renewals(
                sum(len(a) for a in plan.acknowledgements.values()), 0, now_ms
            )
        return plan

    def _give_up(self, error: KafkaError) -> None:
        """Auto-renewal cannot work with this broker or group: say so (fatal: the
        consumer was configured to rely on it) and stop renewing."""
        self._schedule = None
        self._ctx.sink.error(error, fatal=True)

    def answered(
        self, tip: TopicIdPartition, acks: Acknowledgements, error: KafkaError | None,
        lock_ms: int | None,
    ) -> None:
        """The answer to an auto-renewal (never reported to the application)."""
        ctx = self._ctx
        sent_ms = self._in_flight.pop(id(acks))
        offsets = acks.offsets()
        if error is None:
            self._renewed_once = True
            ctx.held.renewed(tip, offsets, sent_ms, lock_ms)
            return
        spans = ctx.held.renew_failed(tip, offsets)
        if ctx.metrics is not None:
            ctx.metrics.record_renewals(0, len(offsets), ctx.now_ms)
        ctx.log.debug(
            "renewing the locks of %d record(s) of %s-%s failed: %s",
            len(offsets), tip.topic, tip.partition, error,
        )
        refused = (
            isinstance(error, InvalidRecordStateError)
            and not self._renewed_once
            and self._schedule is not None
            and all(s.lock_expires_ms > sent_ms for s in spans)
        )
        for span in spans:
            self._report_lost(span, f"the broker refused to renew their locks ({error})")
        if refused:
            self._give_up(InvalidRecordStateError(
                "share.auto.renew: the broker refused to renew acquisition locks that had "
                f"not expired ({error}). The group most likely has "
                "share.renew.acknowledge.enable=false: enable it (kafka-share groups config "
                "GROUP --set share.renew.acknowledge.enable=true, or "
                "Admin.alter_group_configs) or set share.auto.renew=false and keep "
                "processing within the lock"
            ))

    def waits_ms(self, now_ms: int) -> list[int]:
        """How long until the next renewal and the next lock expiry (none if neither)."""
        ctx = self._ctx
        if self._schedule is None or not ctx.held:
            return []
        waits: list[int] = []
        renew_at = self._schedule.next_due_ms(
            ctx.held, now_ms, lambda n: self._may_renew_on(n, now_ms)
        )
        if renew_at is not None:
            waits.append(max(0, renew_at - now_ms))
        expiry = ctx.held.next_expiry_ms()
        if expiry is not None:
            waits.append(max(1, expiry - now_ms + 1))
        return waits

    def next_due_for_node_ms(self, node_id: int) -> int | None:
        """When the next renewal to ``node_id`` is due (None: none is)."""
        if self._schedule is None:
            return None
        return self._schedule.next_due_for_node(self._ctx.held, node_id)
