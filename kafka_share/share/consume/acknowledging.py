"""The three acknowledgement flows of the consume manager, and their deadlines.

- Asynchronous (``commit_async``, and acks that could not ride on a fetch):
  merged per node, sent as a ShareAcknowledge when the node is free, after a
  short linger during which a ShareFetch to that node may carry them instead.
- Synchronous (``commit_sync``): one :class:`~.nodes.SyncCommit` spanning the
  nodes, sent in FIFO order per node, retriable partition errors sent again
  after the backoff, resolved when every node answered or the deadline passed.
- Close (the consumer's, or a leave's session close): a ShareAcknowledge at
  epoch -1 carrying the last acks.

A session at epoch 0 cannot carry acknowledgements, so acks that meet a new
session (the connection dropped, the broker restarted) fail locally with a
NetworkError: their records are redelivered after the lock expires.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

from kafka_share.errors import KafkaError, NetworkError, RequestTimedOutError
from kafka_share.models import TopicIdPartition
from kafka_share.protocol.messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.capabilities import ShareFeature
from kafka_share.share.consume.completion import Completion, unanswered
from kafka_share.share.consume.context import ACK_LINGER_MS, ConsumeContext, ConsumePhase
from kafka_share.share.consume.errors import (
    apply_leader_hints,
    retriable,
    session_lost,
    transport_failure,
)
from kafka_share.share.consume.nodes import NodeState, SyncCommit, merge_into, queue_async
from kafka_share.share.consume.renewing import AutoRenewal
from kafka_share.share.consume.responses import AckAnswer, read_acknowledge
from kafka_share.share.consume.wire import ack_topics, guard_v2_features
from kafka_share.share.session import SessionAcknowledgePlan, ShareSession
from kafka_share.share.unsent import Channel, UnsentRequest

__all__ = ["AckFlows"]

AcksByPartition = Mapping[TopicIdPartition, tuple[int, Acknowledgements]]
AckRequest = UnsentRequest[ShareAcknowledgeResponse]


class AckFlows:
    """Queues, sends and times out acknowledgements. Network thread only."""

    def __init__(self, ctx: ConsumeContext, completion: Completion, renewal: AutoRenewal) -> None:
        self._ctx = ctx
        self._done = completion
        self._renewal = renewal

    # -- inputs from the application ------------------------------------------------

    def on_async(self, acks: AcksByPartition, deadline_ms: int, linger_until_ms: int) -> None:
        for tip, (node_id, a) in self.current(acks, None).items():
            queue_async(self._ctx.node(node_id), {tip: a}, deadline_ms, linger_until_ms)

    def on_sync(self, acks: AcksByPartition, deadline_ms: int, token: object) -> None:
        # A commit sends everything still waiting: acknowledgements queued to ride
        # on a fetch or lingering for one go with it (and are reported with it).
        ctx = self._ctx
        per_node: dict[int, dict[TopicIdPartition, Acknowledgements]] = {}
        for node_id, state in ctx.nodes.items():
            for source in (state.async_acks, state.piggyback):
                for tip, a in source.items():
                    merge_into(per_node.setdefault(node_id, {}), tip, a)
            state.async_acks = {}
            state.piggyback = {}
        commit = SyncCommit(deadline_ms, token, per_node)
        for tip, (node_id, a) in self.current(acks, commit).items():
            merge_into(per_node.setdefault(node_id, {}), tip, a)
        for node_id in per_node:
            ctx.node(node_id).sync_queue.append(commit)
        if commit.done():
            self._done.resolve(commit)

    def on_close(self, acks: AcksByPartition, deadline_ms: int, token: object) -> None:
        """Final acks and a closing ShareAcknowledge (epoch -1) to every node with a session."""
        ctx = self._ctx
        ctx.fetch_more = False
        per_node: dict[int, dict[TopicIdPartition, Acknowledgements]] = {}
        commit = SyncCommit(deadline_ms, token, per_node)
        for tip, (node_id, a) in self.current(acks, commit).items():
            per_node.setdefault(node_id, {})[tip] = a
        for node_id, state in ctx.nodes.items():
            pending = per_node.setdefault(node_id, {})
            for source in (state.piggyback, state.async_acks):
                for tip, a in source.items():
                    merge_into(pending, tip, a)
            state.piggyback = {}
            state.async_acks = {}
            if not pending and state.session.is_new:
                del per_node[node_id]  # no session was ever opened there
        for node_id in per_node:
            ctx.node(node_id).close = commit
        ctx.move_to(ConsumePhase.CLOSING)
        ctx.closing = commit
        if commit.done():
            self._done.resolve(commit)

    def current(self, acks: AcksByPartition, commit: SyncCommit | None) -> AcksByPartition:
        """``acks`` less those of records acquired by a share session with their node
        that has since been replaced: a new session holds none of the old one's
        locks, so sending them would fail on the broker (INVALID_RECORD_STATE) or,
        worse, settle the same offsets re-acquired in the new session. They fail
        here as session lost; the broker redelivers those records."""
        ctx = self._ctx
        stale = [
            tip for tip, (node_id, a) in acks.items()
            if a.session_generation is not None
            and a.session_generation != ctx.node(node_id).generation
        ]
        self._renewal.acks_sent(acks)
        if not stale:
            return acks
        for tip in stale:
            node_id, a = acks[tip]
            self._done.complete_error(tip, a, session_lost(node_id), commit)
        return {tip: na for tip, na in acks.items() if tip not in stale}

    def close_sessions(self) -> None:
        """Close every established share session with a ShareAcknowledge at epoch
        -1, carrying the acknowledgements still waiting for that node."""
        ctx = self._ctx
        for node_id, state in ctx.nodes.items():
            if state.session.is_new or state.session.closed or state.close is not None:
                continue
            pending: dict[TopicIdPartition, Acknowledgements] = {}
            for source in (state.piggyback, state.async_acks):
                for tip, a in source.items():
                    merge_into(pending, tip, a)
            state.piggyback = {}
            state.async_acks = {}
            state.close = SyncCommit(
                ctx.now_ms + ctx.settings.close_timeout_ms, None, {node_id: pending}
            )
            state.reopen_after_close = True

    # -- the round ------------------------------------------------------------------

    def next_request(self, node_id: int, state: NodeState, now_ms: int) -> AckRequest | None:
        """The next ShareAcknowledge to a free node: its asynchronous acks, then
        its ``commit_sync`` calls (FIFO), then its close."""
        if (
            state.async_acks
            and now_ms >= state.async_linger_until_ms
            # held-back acks whose window ended ride on the fetch this round builds
            and not (state.acks_held and self._fetch_takes_held(state, now_ms))
        ):
            acks, state.async_acks = state.async_acks, {}
            state.acks_held = False
            return self._ack_request(node_id, state, acks, None)
        while state.sync_queue:
            commit = state.sync_queue[0]
            acks_for_node = commit.per_node.pop(node_id, None)
            if acks_for_node is None:
                state.sync_queue.popleft()
                continue
            req = self._ack_request(node_id, state, acks_for_node, commit)
            if req is not None:
                return req
            state.sync_queue.popleft()
        if state.close is not None:
            return self._close_request(node_id, state)
        return None

    def _close_request(self, node_id: int, state: NodeState) -> AckRequest | None:
        assert state.close is not None
        commit, state.close = state.close, None
        acks_for_node = commit.per_node.pop(node_id, {})
        if state.reopen_after_close and (state.session.closed or state.session.is_new):
            state.reopen_after_close = False
            state.session = ShareSession(node_id, self._ctx.log)
        if state.session.closed:
            self._done.fail(acks_for_node, NetworkError("the share session is closed"), commit)
            self._done.maybe_resolve(commit)
            return None
        if state.session.is_new:
            # Never established (or lost): there is nothing to close, and acks
            # cannot open a session.
            self._done.fail(acks_for_node, session_lost(node_id), commit)
            self._done.maybe_resolve(commit)
            return None
        plan = state.session.build_close(acks_for_node)
        return self.share_acknowledge(node_id, state, plan, commit, close=True)

    def _fetch_takes_held(self, state: NodeState, now_ms: int) -> bool:
        """Whether acks held back from a fetch (whose window has ended) may wait
        for the fetch this round builds instead of going as a ShareAcknowledge
        that the fetch would queue behind. Bounded: past ``ACK_LINGER_MS`` after
        the window they go on their own whatever happens."""
        ctx = self._ctx
        return (
            ctx.fetch_more
            and ctx.phase is not ConsumePhase.CLOSING
            and not ctx.fetch_blocked
            and now_ms < state.async_linger_until_ms + ACK_LINGER_MS
        )

    def share_acknowledge(
        self,
        node_id: int,
        state: NodeState,
        plan: SessionAcknowledgePlan,
        commit: SyncCommit | None,
        *,
        close: bool,
    ) -> AckRequest:
        """The ShareAcknowledge for a session plan, with its response handler."""
        if commit is not None:
            commit.in_flight[node_id] = plan.acknowledgements
        self._done.count_sent(plan.acknowledgements)
        request = ShareAcknowledgeRequest(
            group_id=self._ctx.settings.group_id,
            member_id=self._ctx.member_id,
            share_session_epoch=plan.epoch,
            is_renew_ack=plan.is_renew_ack,
            topics=ack_topics(plan.topics),
        )
        answered, failed = self._ack_handlers(
            node_id, state, plan.acknowledgements, commit, close=close
        )
        return UnsentRequest(
            node_id, Channel.SHARE, guard_v2_features(request), ShareAcknowledgeResponse,
            answered, failed,
        )

    def _ack_request(
        self,
        node_id: int,
        state: NodeState,
        acks: dict[TopicIdPartition, Acknowledgements],
        commit: SyncCommit | None,
    ) -> AckRequest | None:
        missing = self._ctx.missing(node_id, ShareFeature.RENEW)
        if missing is not None and any(a.has_renew for a in acks.values()):
            self._done.fail(acks, missing, commit)
            self._done.maybe_resolve(commit)
            return None
        plan = state.session.build_acknowledge(acks)
        if plan is None:
            self._done.fail(acks, session_lost(node_id), commit)
            self._done.maybe_resolve(commit)
            return None
        return self.share_acknowledge(node_id, state, plan, commit, close=False)

    # -- the answer -------------------------------------------------------------------

    def _ack_handlers(
        self,
        node_id: int,
        state: NodeState,
        acks: dict[TopicIdPartition, Acknowledgements],
        commit: SyncCommit | None,
        *,
        close: bool,
    ) -> tuple[Callable[[ShareAcknowledgeResponse, int], None], Callable[[KafkaError, int], None]]:
        """The handlers of a ShareAcknowledge's answer and of its failure."""
        # The session this request was built on: the answer updates that one, even
        # if the node's session has been replaced meanwhile.
        session = state.session
        ctx = self._ctx

        def answered(response: ShareAcknowledgeResponse, now_ms: int) -> None:
            ctx.now_ms = max(ctx.now_ms, now_ms)
            if commit is not None:
                commit.in_flight.pop(node_id, None)
            session.handle_response(response.error_code)
            self._after_session_answer(node_id, state, session, close)
            self._take_response(node_id, state, acks, commit, response, close, now_ms)
            self._done.maybe_resolve(commit)

        def failed(error: KafkaError, now_ms: int) -> None:
            ctx.now_ms = max(ctx.now_ms, now_ms)
            if commit is not None:
                commit.in_flight.pop(node_id, None)
            session.handle_error()
            self._after_session_answer(node_id, state, session, close)
            self._done.fail(acks, transport_failure(node_id, error), commit)
            self._done.maybe_resolve(commit)

        return answered, failed

    def _after_session_answer(
        self, node_id: int, state: NodeState, session: ShareSession, close: bool,
    ) -> None:
        if close and state.reopen_after_close and state.session is session:
            # The member left and will rejoin: the next request opens a new session.
            state.reopen_after_close = False
            state.session = ShareSession(node_id, self._ctx.log)

    def _take_response(
        self,
        node_id: int,
        state: NodeState,
        acks: dict[TopicIdPartition, Acknowledgements],
        commit: SyncCommit | None,
        response: ShareAcknowledgeResponse,
        close: bool,
        now_ms: int,
    ) -> None:
        if response.error_code != 0:
            err = self._done.top_level_error(node_id, response.error_code, response.error_message)
            self._done.fail(acks, err, commit)
            return
        apply_leader_hints(self._ctx.cluster, response.responses, response.node_endpoints)
        self._take_ack_answer(
            node_id, state, acks, commit, read_acknowledge(response, acks),
            response.acquisition_lock_timeout_ms or None, close=close, now_ms=now_ms,
        )

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
        settings = self._ctx.settings
        retry: dict[TopicIdPartition, Acknowledgements] = {}
        for tip, code, message in answer.answered:
            a = acks[tip]
            if code != 0 and commit is not None and not close and retriable(code):
                retry[tip] = a
                continue
            self._done.complete(tip, a, code, message, commit, lock_ms)
        for tip in answer.unanswered:
            self._done.complete_error(tip, acks[tip], unanswered(), commit)
        if retry and commit is not None and commit.resolved:
            # The commit already timed out: retry these on their own.
            queue_async(state, retry, now_ms + settings.ack_timeout_ms, 0)
            state.not_before_ms = now_ms + settings.retry_backoff_ms
        elif retry and commit is not None:
            commit.per_node.setdefault(node_id, {}).update(retry)
            state.sync_queue.appendleft(commit)
            state.not_before_ms = now_ms + settings.retry_backoff_ms

    # -- deadlines ----------------------------------------------------------------------

    def waits_ms(self, now_ms: int) -> list[int]:
        """How long until each node's asynchronous acks are due."""
        waits: list[int] = []
        for s in self._ctx.nodes.values():
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
        return waits

    def expire(self, now_ms: int) -> None:
        """Complete every operation whose deadline has passed."""
        ctx = self._ctx
        for state in ctx.nodes.values():
            if state.async_acks and now_ms >= state.async_deadline_ms:
                acks, state.async_acks = state.async_acks, {}
                self._done.fail(
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
        if ctx.closing is not None and now_ms >= ctx.closing.deadline_ms:
            self._expire_close(ctx.closing)

    def _expire_commit(self, commit: SyncCommit, now_ms: int) -> None:
        """A ``commit_sync`` ran out of time: the caller gets a timeout, but no
        acknowledgement is thrown away. Those not sent yet stay pending (they ride on
        the next ShareFetch to their node or go with the next commit, as Java's
        do); those sent keep waiting for their answer, which reaches the commit
        callback when it comes. Throwing them away would redeliver records the
        application has processed."""
        ctx = self._ctx
        for node_id, acks in list(commit.per_node.items()):
            queue_async(
                ctx.node(node_id), acks, now_ms + ctx.settings.ack_timeout_ms,
                now_ms + ACK_LINGER_MS,
            )
        commit.per_node.clear()
        self._done.resolve(commit, timed_out=True)

    def _expire_close(self, commit: SyncCommit) -> None:
        """A close (or a leave's session close) ran out of time: the consumer is
        going away, so what was not answered fails; the broker releases those
        records when the session or the lock ends."""
        for _node_id, acks in list(commit.per_node.items()):
            self._done.fail(
                acks,
                RequestTimedOutError("acknowledgements could not be sent before the deadline"),
                commit,
            )
        commit.per_node.clear()
        for _node_id, acks in list(commit.in_flight.items()):
            # Sent but unanswered: the answer, if it ever comes, is ignored
            # (Acknowledgements.complete keeps the first outcome).
            self._done.fail(acks, RequestTimedOutError(
                "no answer to the acknowledgements before the deadline"), commit)
        commit.in_flight.clear()
        self._done.resolve(commit, timed_out=True)
