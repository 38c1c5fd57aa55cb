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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_share._log import Logger
from kafka_share.cluster import ClusterMetadata
from kafka_share.models import TopicIdPartition
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.capabilities import ShareCapabilities
from kafka_share.share.consume.acknowledging import AckFlows
from kafka_share.share.consume.completion import Completion
from kafka_share.share.consume.context import (
    ACK_LINGER_MS,
    ConsumeContext,
    ConsumePhase,
    FetchSettings,
)
from kafka_share.share.consume.fetching import Fetcher
from kafka_share.share.consume.nodes import merge_into
from kafka_share.share.consume.renewing import AutoRenewal
from kafka_share.share.held import HeldRecords
from kafka_share.share.unsent import Sink, UnsentRequest

if TYPE_CHECKING:
    from kafka_share.metrics import ShareConsumerMetrics

__all__ = ["ACK_LINGER_MS", "FetchSettings", "ShareConsumeManager"]

log = logging.getLogger("kafka_share.fetch")

AcksByPartition = Mapping[TopicIdPartition, tuple[int, Acknowledgements]]


class ShareConsumeManager:
    """Share sessions, fetching and acknowledging, for one consumer. Network thread only.

    A coordinator: the acknowledgement flows (:class:`~.acknowledging.AckFlows`),
    the fetch rounds (:class:`~.fetching.Fetcher`) and auto-renewal
    (:class:`~.renewing.AutoRenewal`) share one :class:`~.context.ConsumeContext`;
    :meth:`poll` orders their requests.
    """

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
        self._ctx = ConsumeContext(
            settings=settings, cluster=cluster, sink=sink, member_id=member_id,
            capabilities=capabilities, metrics=metrics, log=logger or log,
            held=HeldRecords(track_acks=settings.auto_renew),
        )
        self._renewal = AutoRenewal(self._ctx)
        done = Completion(self._ctx, self._renewal)
        self._acks = AckFlows(self._ctx, done, self._renewal)
        self._fetcher = Fetcher(self._ctx, done, self._renewal, random_source)

    # -- state the engine sets and reads ------------------------------------------------

    @property
    def held(self) -> HeldRecords:
        """Every record this consumer holds, from acquisition until its ack completes."""
        return self._ctx.held

    @property
    def assigned(self) -> list[TopicIdPartition]:
        """The partitions assigned to the member (the engine keeps it current)."""
        return self._ctx.assigned

    @assigned.setter
    def assigned(self, partitions: list[TopicIdPartition]) -> None:
        self._ctx.assigned = partitions

    @property
    def member_ready(self) -> bool:
        """The member has joined the group: fetches and renewals may go out."""
        return self._ctx.phase is ConsumePhase.MEMBER

    @member_ready.setter
    def member_ready(self, ready: bool) -> None:
        if self._ctx.phase is not ConsumePhase.CLOSING:  # a closing consumer stays closing
            self._ctx.move_to(ConsumePhase.MEMBER if ready else ConsumePhase.WAITING_FOR_MEMBER)

    @property
    def fetch_more(self) -> bool:
        """The application wants records: a fetch round is on."""
        return self._ctx.fetch_more

    @fetch_more.setter
    def fetch_more(self, wanted: bool) -> None:
        self._ctx.fetch_more = wanted

    @property
    def close_done(self) -> bool:
        closing = self._ctx.closing
        return closing is None or closing.resolved or closing.token is None

    # -- inputs from the application ------------------------------------------------

    def on_fetch(
        self,
        acks: AcksByPartition,
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
        self._fetcher.ask(ahead=ahead, max_records=max_records, until_ms=until_ms)
        for tip, (node_id, a) in self._acks.current(acks, None).items():
            merge_into(self._ctx.node(node_id).piggyback, tip, a)

    def on_async(
        self, acks: AcksByPartition, deadline_ms: int, *, linger_until_ms: int = 0,
    ) -> None:
        """Acknowledgements to send as a ShareAcknowledge; with ``linger_until_ms``
        they may wait until then for a ShareFetch to the same node to carry them."""
        self._acks.on_async(acks, deadline_ms, linger_until_ms)

    def on_sync(self, acks: AcksByPartition, deadline_ms: int, token: object) -> None:
        """A ``commit_sync``: these acks and every one still waiting, answered
        through the sink's ``commit_completed(token, ...)``."""
        self._acks.on_sync(acks, deadline_ms, token)

    def on_close(self, acks: AcksByPartition, deadline_ms: int, token: object) -> None:
        """Final acks and a closing ShareAcknowledge (epoch -1) to every node with a session."""
        self._acks.on_close(acks, deadline_ms, token)

    def block_fetching(self) -> None:
        """Never fetch again (the consumer's configuration cannot work with this cluster)."""
        self._ctx.fetch_blocked = True
        self._ctx.fetch_more = False

    def close_sessions(self) -> None:
        """The member left the group (poll timeout or unsubscribe): close every
        established share session with a ShareAcknowledge at epoch -1, carrying the
        acknowledgements still waiting for that node. The broker releases the
        records the member still holds at once, instead of after the lock expires.
        Sessions reopen (epoch 0) when the member fetches again.
        """
        self._ctx.fetch_more = False
        self.member_ready = False
        self._acks.close_sessions()

    def on_disconnect(self, node_id: int) -> None:
        """The share connection to ``node_id`` dropped: its session is gone."""
        state = self._ctx.nodes.get(node_id)
        if state is not None and not state.session.in_flight:
            state.session.handle_error()

    # -- the round ------------------------------------------------------------------

    def poll(self, now_ms: int) -> list[UnsentRequest[Any]]:
        """The requests of this round: acknowledgements first, then renewals,
        then, if the application wants records, the fetches."""
        ctx = self._ctx
        out: list[UnsentRequest[Any]] = []
        # Handlers run between rounds; they time their backoffs from this.
        ctx.now_ms = now_ms
        self._acks.expire(now_ms)
        self._renewal.expire_held(now_ms)
        if ctx.phase is ConsumePhase.WAITING_FOR_MEMBER and not any(
            s.close for s in ctx.nodes.values()
        ):
            return out
        busy: set[int] = set()
        for node_id, state in ctx.nodes.items():
            if state.session.in_flight or now_ms < state.not_before_ms:
                continue
            req = self._acks.next_request(node_id, state, now_ms)
            if req is not None:
                out.append(req)
                busy.add(node_id)
        for node_id, state, plan in self._renewal.plans(now_ms, busy):
            out.append(self._acks.share_acknowledge(node_id, state, plan, None, close=False))
        self._fetcher.end_if_given_up(now_ms)
        if ctx.fetch_more and ctx.phase is not ConsumePhase.CLOSING and not ctx.fetch_blocked:
            out.extend(self._fetcher.requests(now_ms))
        return out

    def time_until_next_ms(self, now_ms: int) -> int:
        """How long the driver may sleep before the next round is due."""
        waits = [
            max(0, s.not_before_ms - now_ms)
            for s in self._ctx.nodes.values()
            if s.not_before_ms > now_ms
        ]
        waits.extend(self._renewal.waits_ms(now_ms))
        waits.extend(self._acks.waits_ms(now_ms))
        return min(waits) if waits else 5000
