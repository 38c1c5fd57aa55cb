"""The network thread: the only thread that touches sockets.

Theory of operation
-------------------
One loop (:meth:`NetworkThread._run_once`):

1. drain application events (subscribe, poll, fetch, acknowledgements, close);
2. let each sans-IO manager produce its requests for ``now_ms``: metadata,
   coordinator discovery, the ShareGroupHeartbeat membership state machine
   (:class:`~kafka_share.share.membership.MembershipManager`) and the share
   consume manager (sessions, ShareFetch, ShareAcknowledge);
3. hand them to the :class:`~kafka_share._net.client.NetworkClient`;
4. wait in ``select`` until I/O, a wakeup from the application thread, or the
   next timer (heartbeat interval, backoff, request deadline).

Responses run their handlers inside step 4, on this thread, so the managers
need no locks. Results for the application go through the fetch buffer.

Invariants:

* The member id exists before the thread starts and never changes.
* Fetching waits for the first successful heartbeat (the broker must know the
  member before it serves ShareFetch for it).
* Completable events (subscribe, commit_sync, leave, close) are completed by
  their deadline at the latest, so the application thread never hangs.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from typing import Any

from kafka_share._app.events import (
    AcknowledgeAsyncEvent,
    AcknowledgementCompletion,
    AcknowledgeOnCloseEvent,
    AcknowledgeSyncEvent,
    AcksByPartition,
    ApplicationEvent,
    CompletableEvent,
    CompletedShareFetch,
    ErrorEvent,
    FetchEvent,
    LeaveGroupEvent,
    PollEvent,
    StopEvent,
    SubscriptionChangeEvent,
)
from kafka_share._app.fetch_buffer import FetchBuffer
from kafka_share._log import ContextLogger, Logger, consumer_log_prefix
from kafka_share.cluster import BrokerInfo, ClusterMetadata, PartitionLeader, TopicMetadata
from kafka_share.config import AcquireMode, ShareConsumerConfig
from kafka_share.errors import (
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.protocol.api_keys import ApiKey
from kafka_share.protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kafka_share.share import _codes
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.consume_manager import ACK_LINGER_MS, FetchSettings, ShareConsumeManager
from kafka_share.share.membership import (
    MembershipManager,
    MemberState,
    generate_member_id,
    resolve_assignment,
)
from kafka_share.share.unsent import Channel, UnsentRequest, VersionedRequest

from .client import NetworkClient, Purpose, monotonic_ms

__all__ = ["NetworkThread"]

log = logging.getLogger("kafka_share.network")

#: Longest the loop sleeps without a reason to wake (Java: MAX_POLL_TIMEOUT_MS).
_MAX_WAIT_MS = 5000
_INVALID_TOPIC_EXCEPTION = 17
_UNKNOWN_TOPIC_OR_PARTITION = 3
_UNSUPPORTED_SHARE = (
    "The cluster does not support the share group protocol. To use share groups, the "
    "cluster must have the share group protocol enabled: Apache Kafka 4.1+ with the "
    "share.version feature >= 1 (kafka-features.sh --bootstrap-server ... upgrade "
    "--feature share.version=1; on by default for new 4.2+ clusters)."
)


class _Sink:
    """Delivers engine results to the application thread."""

    def __init__(self, buffer: FetchBuffer[CompletedShareFetch]) -> None:
        self._buffer = buffer

    def add_fetches(self, fetches: list[Any]) -> None:
        self._buffer.add_all(fetches)

    def ack_completed(self, completion: Any) -> None:
        assert isinstance(completion, AcknowledgementCompletion)
        self._buffer.add_background(completion)

    def error(self, error: KafkaError, *, fatal: bool = False) -> None:
        self._buffer.add_background(ErrorEvent(error, fatal))


class NetworkThread:
    """Owns the sockets and the share engine of one consumer."""

    def __init__(
        self,
        *,
        config: ShareConsumerConfig,
        client_id: str,
        fetch_buffer: FetchBuffer[CompletedShareFetch],
        metrics: ShareConsumerMetrics | None = None,
    ) -> None:
        self._metrics = metrics
        self._config = config
        self._log: Logger = log
        self._client_id = client_id
        self._buffer = fetch_buffer
        self._sink = _Sink(fetch_buffer)
        self._events: queue.SimpleQueue[ApplicationEvent] = queue.SimpleQueue()
        self.member_id = generate_member_id()
        self._log = ContextLogger(
            log, consumer_log_prefix(client_id, config.group_id, self.member_id)
        )
        self._membership = MembershipManager(
            config.group_id,
            member_id=self.member_id,
            rack_id=config.client_rack,
            max_poll_interval_ms=config.max_poll_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            logger=self._log,
        )
        self._cluster = ClusterMetadata(
            config.bootstrap_servers, metadata_max_age_ms=config.metadata_max_age_ms
        )
        self._client = NetworkClient(
            client_id=client_id,
            address_of=self._cluster.address_of,
            connect_timeout_ms=config.socket_connection_setup_timeout_ms,
            request_timeout_ms=config.request_timeout_ms,
            reconnect_backoff_ms=config.reconnect_backoff_ms,
            reconnect_backoff_max_ms=config.reconnect_backoff_max_ms,
            receive_buffer_bytes=config.receive_buffer_bytes,
            send_buffer_bytes=config.send_buffer_bytes,
            logger=self._log,
        )
        self._client.on_disconnect = self._on_disconnect
        self._consume = ShareConsumeManager(
            settings=FetchSettings(
                group_id=config.group_id,
                max_wait_ms=config.fetch_max_wait_ms,
                min_bytes=config.fetch_min_bytes,
                max_bytes=config.fetch_max_bytes,
                max_records=config.max_poll_records,
                record_limit=config.share_acquire_mode is AcquireMode.RECORD_LIMIT,
                retry_backoff_ms=config.retry_backoff_ms,
                ack_timeout_ms=config.default_api_timeout_ms,
            ),
            cluster=self._cluster,
            sink=self._sink,
            member_id=self.member_id,
            share_fetch_version=self._share_fetch_version,
            metrics=metrics,
            clock=monotonic_ms,
            logger=self._log,
        )
        self._subscription: frozenset[str] = frozenset()
        self._metadata_in_flight = False
        self._coordinator_id: int | None = None
        self._coordinator_in_flight = False
        self._coordinator_retry_at_ms = 0
        self._heartbeat_in_flight = False
        self._assignment_version = -1
        self._pending: list[CompletableEvent] = []
        #: FetchEvent.sent flags to set once this round's requests are written
        self._fetch_waiters: list[threading.Event] = []
        self._leave_futures: list[LeaveGroupEvent] = []
        self._share_v2: bool | None = None
        self._closing = False
        self._reported_topic_errors: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"kafka-share-network-{client_id}", daemon=True
        )

    # -- application-thread API ------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def submit(self, event: ApplicationEvent) -> None:
        self._events.put(event)
        self._client.wakeup()

    def supports_share_v2(self) -> bool:
        """True unless a share connection negotiated only v1 (Kafka 4.1)."""
        return self._share_v2 is not False

    def stop(self, timeout_ms: int) -> None:
        """Stop the loop and wait up to ``timeout_ms`` for the thread to end."""
        self.submit(StopEvent())
        self._thread.join(max(0.05, timeout_ms / 1000.0))
        if self._thread.is_alive():
            self._stop.set()
            self._client.wakeup()
            self._thread.join(1.0)

    def stop_now(self) -> None:
        self._stop.set()
        self._client.wakeup()

    # -- the loop ------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._run_once()
        except BaseException as exc:  # the app must learn the engine died, not hang
            self._log.exception("the network thread of %s failed", self._client_id)
            err = exc if isinstance(exc, KafkaError) else KafkaError(
                f"the consumer's network thread failed: {type(exc).__name__}: {exc}"
            )
            self._sink.error(err, fatal=True)
            self._fail_pending(err)
        finally:
            self._fail_pending(KafkaError("the consumer is closed"))
            self._client.close()

    def _run_once(self) -> None:
        now = monotonic_ms()
        self._drain_events(now)
        if self._stop.is_set():
            return
        requests = self._poll_managers(now)
        for req in requests:
            self._send(req, now)
        if self._fetch_waiters:
            # The fetches these events asked for are written (or could not be
            # sent this round); the waiting application thread may go on.
            for sent in self._fetch_waiters:
                sent.set()
            self._fetch_waiters.clear()
        self._expire_pending(now)
        wait = min(_MAX_WAIT_MS, self._time_to_next_ms(now))
        self._client.poll(max(0, wait))
        if self._share_v2 is None:
            self._learn_share_version()

    def _send(self, req: UnsentRequest, now_ms: int) -> None:
        purpose = Purpose.SHARE if req.channel is Channel.SHARE else Purpose.CONTROL
        if not self._client.send(req.node_id, purpose, req.request, req.handler, now_ms):
            req.handler(None, NetworkError(f"node {req.node_id} cannot be reached right now"))

    def _time_to_next_ms(self, now_ms: int) -> int:
        waits = [
            self._membership.time_until_next_heartbeat_ms(now_ms, self._coordinator_id is not None),
            self._consume.time_until_next_ms(now_ms),
            self._cluster.time_to_next_update_ms(now_ms) if self._subscription else _MAX_WAIT_MS,
        ]
        if self._coordinator_id is None and self._subscription:
            waits.append(max(0, self._coordinator_retry_at_ms - now_ms))
        for event in self._pending:
            waits.append(max(0, event.deadline_ms - now_ms))
        return max(0, min(waits))

    # -- application events --------------------------------------------------------------

    def _drain_events(self, now_ms: int) -> None:
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            self._apply(event, now_ms)

    def _apply(self, event: ApplicationEvent, now_ms: int) -> None:
        if isinstance(event, PollEvent):
            self._membership.on_poll(event.now_ms)
        elif isinstance(event, FetchEvent):
            if event.ahead and not self._buffer.is_empty():
                # A response arrived after the application asked: fetching more
                # now would put a third response's records under lock.
                if event.acks:
                    self._consume.on_async(
                        _node_acks(event.acks), event.ack_deadline_ms,
                        linger_until_ms=now_ms + ACK_LINGER_MS,
                    )
            else:
                self._consume.on_fetch(_node_acks(event.acks), ahead=event.ahead)
            if event.sent is not None:
                self._fetch_waiters.append(event.sent)
        elif isinstance(event, AcknowledgeAsyncEvent):
            self._consume.on_async(
                _node_acks(event.acks), event.deadline_ms,
                linger_until_ms=now_ms + event.linger_ms if event.linger_ms else 0,
            )
        elif isinstance(event, AcknowledgeSyncEvent):
            self._consume.on_sync(_node_acks(event.acks), event.deadline_ms, event.future)
            self._pending.append(event)
        elif isinstance(event, AcknowledgeOnCloseEvent):
            self._closing = True
            self._consume.on_close(_node_acks(event.acks), event.deadline_ms, event.future)
            self._pending.append(event)
        elif isinstance(event, SubscriptionChangeEvent):
            self._subscription = event.topics
            self._membership.subscribe(event.topics)
            self._cluster.request_update()
            event.future.set_result(None)
        elif isinstance(event, LeaveGroupEvent):
            self._subscription = frozenset()
            was_in_group = self._membership.in_group
            self._membership.leave()
            self._consume.assigned = []
            if was_in_group and self._coordinator_id is not None:
                self._leave_futures.append(event)
                self._pending.append(event)
            else:
                event.future.set_result(None)
        elif isinstance(event, StopEvent):
            self._stop.set()

    # -- managers ------------------------------------------------------------------------

    def _poll_managers(self, now_ms: int) -> list[UnsentRequest]:
        out: list[UnsentRequest] = []
        if (
            self._subscription
            and self._cluster.needs_update(now_ms)
            and not self._metadata_in_flight
        ):
            out.append(self._metadata_request())
        if (
            self._coordinator_id is None
            and not self._coordinator_in_flight
            and now_ms >= self._coordinator_retry_at_ms
            and (self._subscription or self._membership.state is MemberState.LEAVING)
        ):
            out.append(self._find_coordinator_request())
        plan = self._membership.poll(now_ms, self._coordinator_id is not None)
        if plan is not None:
            out.append(self._heartbeat_request(plan))
            if plan.is_leave and not self._closing:
                # Leaving (poll timeout or unsubscribe): close the share sessions so
                # the broker releases our records now, not when their locks expire.
                self._consume.close_sessions()
        self._maybe_update_assignment()
        out.extend(self._consume.poll(now_ms))
        return out

    # metadata

    def _metadata_request(self) -> UnsentRequest:
        self._metadata_in_flight = True
        node = self._cluster.any_node()
        topics = sorted(self._subscription)
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=self._config.allow_auto_create_topics,
        )

        def handle(response: Any, error: KafkaError | None) -> None:
            self._metadata_in_flight = False
            now = monotonic_ms()
            if error is not None:
                self._log.debug("metadata request to node %s failed: %s", node, error)
                self._cluster.rotate_node()
                self._check_unsupported(error)
                return
            assert isinstance(response, MetadataResponse)
            self._on_metadata(now, response)

        return UnsentRequest(node, Channel.CONTROL, request, handle)

    def _on_metadata(self, now_ms: int, response: MetadataResponse) -> None:
        brokers = [BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers]
        topics = []
        for t in response.topics:
            name = t.name or ""
            if t.error_code in (_INVALID_TOPIC_EXCEPTION, _codes.TOPIC_AUTHORIZATION_FAILED):
                key = (name, t.error_code)
                if key not in self._reported_topic_errors:
                    self._reported_topic_errors.add(key)
                    err_cls = (InvalidTopicError if t.error_code == _INVALID_TOPIC_EXCEPTION
                               else TopicAuthorizationFailedError)
                    self._sink.error(err_cls(f"{err_cls.name}: topic {name!r}"))
            partitions = {
                p.partition_index: PartitionLeader(p.leader_id, p.leader_epoch)
                for p in t.partitions
            }
            topics.append(TopicMetadata(name, t.topic_id, t.error_code, partitions))
        self._cluster.update(now_ms, brokers, topics, response.controller_id)
        self._assignment_version = -1  # names may now resolve

    # coordinator

    def _find_coordinator_request(self) -> UnsentRequest:
        self._coordinator_in_flight = True
        node = self._cluster.any_node()
        group_id = self._config.group_id

        def build(version: int) -> FindCoordinatorRequest:
            # Key type 0 is GROUP: share groups heartbeat to the group coordinator.
            if version >= 4:
                return FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id])
            return FindCoordinatorRequest(key=group_id, key_type=0)

        request = VersionedRequest(ApiKey.FIND_COORDINATOR, build)

        def handle(response: Any, error: KafkaError | None) -> None:
            self._coordinator_in_flight = False
            now = monotonic_ms()
            if error is not None:
                self._cluster.rotate_node()
                self._coordinator_retry_at_ms = now + self._config.retry_backoff_ms
                return
            assert isinstance(response, FindCoordinatorResponse)
            if response.coordinators:
                c = response.coordinators[0]
                code, node_id, host, port = c.error_code, c.node_id, c.host, c.port
                message = c.error_message
            else:
                code, node_id, host, port = (
                    response.error_code, response.node_id, response.host, response.port
                )
                message = response.error_message
            if code != 0:
                if code == _codes.GROUP_AUTHORIZATION_FAILED:
                    self._sink.error(error_for_code(code, message))
                self._coordinator_retry_at_ms = now + self._config.retry_backoff_ms
                return
            self._cluster.brokers.setdefault(node_id, BrokerInfo(node_id, host, port))
            self._coordinator_id = node_id
            self._log.debug("group coordinator for %s is node %s", self._config.group_id, node_id)

        return UnsentRequest(node, Channel.CONTROL, request, handle)

    def _mark_coordinator_unknown(self, now_ms: int) -> None:
        self._coordinator_id = None
        self._coordinator_retry_at_ms = now_ms

    # heartbeat

    def _heartbeat_request(self, plan: Any) -> UnsentRequest:
        assert self._coordinator_id is not None
        node = self._coordinator_id
        request = ShareGroupHeartbeatRequest(
            group_id=plan.group_id,
            member_id=plan.member_id,
            member_epoch=plan.member_epoch,
            rack_id=plan.rack_id,
            subscribed_topic_names=(
                list(plan.subscribed_topic_names) if plan.subscribed_topic_names is not None
                else None
            ),
        )
        leaving = plan.is_leave
        sent_ms = monotonic_ms()

        def handle(response: Any, error: KafkaError | None) -> None:
            now = monotonic_ms()
            if leaving:
                self._complete_leaves()
                return
            if error is not None:
                self._membership.on_heartbeat_failure(now)
                if self._check_unsupported(error):
                    return
                self._mark_coordinator_unknown(now + self._config.retry_backoff_ms)
                return
            assert isinstance(response, ShareGroupHeartbeatResponse)
            assignment = None
            if response.assignment is not None:
                assignment = [
                    (tp.topic_id, list(tp.partitions))
                    for tp in response.assignment.topic_partitions
                ]
            message = response.error_message
            if response.error_code == _codes.UNSUPPORTED_VERSION:
                message = _UNSUPPORTED_SHARE
            outcome = self._membership.on_heartbeat_response(
                now, response.error_code, message, response.member_epoch,
                response.heartbeat_interval_ms, assignment,
            )
            if self._metrics is not None:
                self._metrics.record_heartbeat(now, now - sent_ms)
                if outcome.assignment_changed:
                    self._metrics.record_rebalance(now)
            if outcome.coordinator_unknown:
                self._mark_coordinator_unknown(now)
            if outcome.error is not None:
                self._sink.error(
                    self._membership_error(outcome.error), fatal=outcome.error.fatal
                )
            if response.error_code == 0:
                self._consume.member_ready = True
            self._assignment_version = -1

        return UnsentRequest(node, Channel.CONTROL, request, handle)

    def _membership_error(self, err: Any) -> KafkaError:
        if err.error_code == _codes.UNSUPPORTED_VERSION:
            return UnsupportedVersionError(_UNSUPPORTED_SHARE)
        return error_for_code(err.error_code, err.message)

    def _check_unsupported(self, error: KafkaError) -> bool:
        """A request that cannot be encoded for this broker (no common version)."""
        if isinstance(error, UnsupportedVersionError):
            self._sink.error(error, fatal=True)
            self._membership.fail(_codes.UNSUPPORTED_VERSION, str(error))
            return True
        return False

    def _complete_leaves(self) -> None:
        leaves, self._leave_futures = self._leave_futures, []
        for event in leaves:
            if not event.future.done():
                event.future.set_result(None)

    def _maybe_update_assignment(self) -> None:
        version = self._cluster.version
        if self._assignment_version == version:
            return
        self._assignment_version = version
        resolved = resolve_assignment(self._membership.assigned, self._cluster.topic_names)
        if resolved.unresolved:
            self._cluster.request_update()
        self._consume.assigned = sorted(
            resolved.partitions, key=lambda t: (t.topic, t.partition)
        )
        if self._membership.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL,
                                      MemberState.STALE):
            self._consume.assigned = []

    # -- connections -------------------------------------------------------------------

    def _learn_share_version(self) -> None:
        """Find out from the first negotiated connection whether the cluster speaks
        the v2 share protocol (Kafka 4.2+), so v2-only features fail up front."""
        table = self._client.any_api_versions()
        if table is None:
            return
        version = table.max_version(ApiKey.SHARE_FETCH)
        if version is None:
            return  # no share APIs at all: the heartbeat reports that
        self._share_v2 = version >= 2
        if not self._share_v2 and self._config.share_acquire_mode is AcquireMode.RECORD_LIMIT:
            self._consume.block_fetching()
            self._sink.error(UnsupportedVersionError(
                "share.acquire.mode=record_limit needs ShareFetch v2 (Apache Kafka 4.2+); "
                "the broker only supports v1. Use batch_optimized or upgrade the cluster."
            ), fatal=True)

    def _share_fetch_version(self, node_id: int) -> int | None:
        # _share_v2 is set by _learn_share_version alone, from the first connection.
        table = self._client.api_versions(node_id, Purpose.SHARE)
        return None if table is None else table.max_version(ApiKey.SHARE_FETCH)

    def _on_disconnect(self, node_id: int, purpose: Purpose, reason: KafkaError) -> None:
        if purpose is Purpose.SHARE:
            self._consume.on_disconnect(node_id)
        elif node_id == self._coordinator_id:
            self._mark_coordinator_unknown(monotonic_ms() + self._config.retry_backoff_ms)
        if isinstance(reason, UnsupportedVersionError):
            self._sink.error(reason)

    # -- deadlines -------------------------------------------------------------------------

    def _expire_pending(self, now_ms: int) -> None:
        still: list[CompletableEvent] = []
        for event in self._pending:
            if event.future.done():
                continue
            if isinstance(event, AcknowledgeOnCloseEvent) and self._consume.close_done:
                if not event.future.done():
                    event.future.set_result({})
                continue
            if now_ms >= event.deadline_ms:
                if isinstance(event, LeaveGroupEvent):
                    event.future.set_result(None)  # a leave that cannot be confirmed is done
                elif isinstance(event, AcknowledgeSyncEvent | AcknowledgeOnCloseEvent):
                    self._consume.poll(now_ms)  # completes expired commits with timeouts
                    if not event.future.done():
                        event.future.set_exception(KafkaTimeoutError(
                            f"{type(event).__name__} did not complete before its deadline"
                        ))
                else:
                    event.future.set_exception(KafkaTimeoutError(
                        f"{type(event).__name__} did not complete before its deadline"
                    ))
                continue
            still.append(event)
        self._pending = still

    def _fail_pending(self, error: KafkaError) -> None:
        for event in self._pending:
            if not event.future.done():
                event.future.set_exception(error)
        self._pending = []
        while True:
            try:
                ev = self._events.get_nowait()
            except queue.Empty:
                break
            fut: Future[object] | None = getattr(ev, "future", None)
            if fut is not None and not fut.done():
                fut.set_exception(error)


def _node_acks(acks: AcksByPartition) -> dict[Any, tuple[int, Acknowledgements]]:
    return {tip: (na.node_id, na.acknowledgements) for tip, na in acks.items()}

