"""The consumer engine: everything a share consumer decides, with no I/O.

Theory of operation
-------------------
:class:`ConsumerEngine` owns the consumer's protocol state: the metadata cache
and its refresh policy, group coordinator discovery, the ShareGroupHeartbeat
membership state machine, and the share consume manager (one share session per
broker, ShareFetch, ShareAcknowledge, commit and close flows). It is driven by
plain calls:

* inputs from the application (``subscribe``, ``fetch``, ``commit_sync``, ...)
  and from the transport (``on_disconnect``, negotiated versions);
* ``poll(now_ms)`` returns the requests to send now, each with the handler to
  call with its answer and the time it arrived;
* ``time_until_next_ms(now_ms)`` says how long the driver may sleep: every
  backoff (metadata, coordinator, heartbeat, per-node share requests,
  acknowledgement linger) is in it, so a driver that sleeps that long never
  spins, whatever is down;
* results leave through the :class:`~kafka_share.share.unsent.Sink` as plain
  values (fetched data, acknowledgement outcomes, commit results, errors).

It never touches sockets, threads, futures, queues or the clock: time comes in
as ``now_ms``. The network thread (``kafka_share._net.thread``) is the driver
for the synchronous consumer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_share._log import Logger
from kafka_share.cluster import BrokerInfo, ClusterMetadata, PartitionLeader, TopicMetadata
from kafka_share.config import AcquireMode, ShareConsumerConfig
from kafka_share.errors import (
    AuthenticationError,
    InvalidTopicError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_share.metrics import METRIC_GROUPS
from kafka_share.models import TopicIdPartition
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import (
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.capabilities import ShareCapabilities, ShareFeature
from kafka_share.share.consume import FetchSettings, ShareConsumeManager
from kafka_share.share.coordinator import (
    CoordinatorManager,
    coordinator_answer,
    find_coordinator_request,
)
from kafka_share.share.membership import (
    HeartbeatPlan,
    MembershipError,
    MembershipManager,
    MemberState,
    resolve_assignment,
)
from kafka_share.share.metadata_refresh import MetadataRefresh
from kafka_share.share.topic_pattern import TopicListing, match_topics
from kafka_share.share.unsent import Channel, Sink, UnsentRequest
from kafka_share.telemetry.collector import TelemetryCollector
from kafka_share.telemetry.sender import TelemetrySender

if TYPE_CHECKING:
    from kafka_share.metrics import ShareConsumerMetrics

__all__ = ["ConsumerEngine", "NodeAcks"]

log = logging.getLogger("kafka_share.engine")

#: Acknowledgements of one partition and the node that must receive them.
NodeAcks = Mapping[TopicIdPartition, tuple[int, Acknowledgements]]

#: Longest the driver sleeps without a reason to wake (Java: MAX_POLL_TIMEOUT_MS).
MAX_WAIT_MS = 5000
#: Topic errors of a Metadata response the application hears about (once per topic)
_TOPIC_ERRORS = frozenset({ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.TOPIC_AUTHORIZATION_FAILED})
_UNSUPPORTED_SHARE = (
    "The cluster does not support the share group protocol. To use share groups, the "
    "cluster must have the share group protocol enabled: Apache Kafka 4.1+ with the "
    "share.version feature >= 1 (kafka-features.sh --bootstrap-server ... upgrade "
    "--feature share.version=1; on by default for new 4.2+ clusters)."
)


class ConsumerEngine:
    """The sans-IO engine of one share consumer (see the module docstring).

    Args:
        config: the consumer's parsed configuration.
        member_id: the member id (generated once by the caller).
        sink: where results go (plain values).
        share_fetch_version: node id -> the ShareFetch version negotiated with it,
            None while unknown (a read-only query into the transport).
        metrics: the consumer's metric registry, if any (telemetry pushes it
            when ``enable.metrics.push`` is on).
        logger: a logger carrying the consumer's identity.
        random_source: jitter source for every backoff (tests inject one).
        unix_offset_ms: add to a ``now_ms`` for Unix time in ms (telemetry's
            timestamps; the engine's clock is monotonic).
    """

    def __init__(
        self,
        config: ShareConsumerConfig,
        *,
        member_id: str,
        sink: Sink,
        share_fetch_version: Callable[[int], int | None],
        metrics: ShareConsumerMetrics | None = None,
        logger: Logger | None = None,
        random_source: Callable[[], float] | None = None,
        unix_offset_ms: int = 0,
    ) -> None:
        self._config = config
        self._sink = sink
        self._metrics = metrics
        self._log: Logger = logger or log
        self.member_id = member_id
        self.cluster = ClusterMetadata(
            config.bootstrap_servers, metadata_max_age_ms=config.metadata_max_age_ms
        )
        self._refresh = MetadataRefresh(
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            random_source=random_source,
        )
        self.coordinator = CoordinatorManager(
            config.group_id,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            random_source=random_source,
            logger=self._log,
        )
        self.membership = MembershipManager(
            config.group_id,
            member_id=member_id,
            rack_id=config.client_rack,
            max_poll_interval_ms=config.max_poll_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            random_source=random_source,
            logger=self._log,
        )
        self.consume = ShareConsumeManager(
            settings=FetchSettings(
                group_id=config.group_id,
                max_wait_ms=config.fetch_max_wait_ms,
                min_bytes=config.fetch_min_bytes,
                max_bytes=config.fetch_max_bytes,
                max_records=config.max_poll_records,
                record_limit=config.share_acquire_mode is AcquireMode.RECORD_LIMIT,
                retry_backoff_ms=config.retry_backoff_ms,
                retry_backoff_max_ms=config.retry_backoff_max_ms,
                ack_timeout_ms=config.default_api_timeout_ms,
                auto_renew=config.share_auto_renew,
                auto_renew_max_ms=config.share_auto_renew_max_ms,
            ),
            cluster=self.cluster,
            sink=sink,
            member_id=member_id,
            capabilities=self._node_capabilities,
            metrics=metrics,
            logger=self._log,
            random_source=random_source,
        )
        #: client telemetry (KIP-714); None when enable.metrics.push is off
        self.telemetry = (
            _telemetry_sender(config, member_id, metrics, unix_offset_ms, random_source,
                              self._log)
            if config.enable_metrics_push and metrics is not None else None
        )
        self._subscription: frozenset[str] = frozenset()
        #: the group coordinator is looked up once from the first round, before any
        #: subscription (as Java's network thread and librdkafka do), so that the
        #: first heartbeat after ``subscribe`` goes out at once instead of behind a
        #: FindCoordinator round trip; later lookups only while subscribed or leaving
        self._early_lookup = True
        #: a pattern subscription (None: by names); ``_subscription`` is then
        #: what it matched, resolved from full Metadata answers
        self._pattern: re.Pattern[str] | None = None
        #: what the pattern matched at the last full answer (None: none yet)
        self._matched: frozenset[str] | None = None
        self._assignment_version = -1
        #: the member left (unsubscribe, poll timeout) and waits for that answer
        self._leave_waiting = False
        self._closing = False
        self._share_fetch_version = share_fetch_version
        #: the cluster's share protocol, from the first negotiated connection
        self.capabilities: ShareCapabilities | None = None
        self._reported_topic_errors: set[tuple[str, int]] = set()
        #: when the current run of failed Metadata requests began (None: healthy)
        self._metadata_failing_since_ms: int | None = None

    # -- inputs from the application ------------------------------------------------

    def _node_capabilities(self, node_id: int) -> ShareCapabilities | None:
        version = self._share_fetch_version(node_id)
        return None if version is None else ShareCapabilities(version)

    @property
    def close_done(self) -> bool:
        return self.consume.close_done

    @property
    def telemetry_closed(self) -> bool:
        """The terminating telemetry push (if any) was answered or given up."""
        return self.telemetry is None or self.telemetry.close_done

    def subscribe(self, topics: frozenset[str]) -> None:
        self._pattern = None
        self._matched = None
        self._subscription = topics
        self.membership.subscribe(topics)
        self.cluster.request_update()

    def subscribe_pattern(self, pattern: re.Pattern[str]) -> None:
        """Subscribe to the topics ``pattern`` matches (see ``share/topic_pattern.py``).

        The match is resolved from the next Metadata answer for all topics (asked
        for now) and again at every refresh (``metadata.max.age.ms``); each change
        re-subscribes the member by name. Until the first answer the member keeps
        its current subscription (a switch from names to a pattern that still
        matches them does not leave the group). While nothing matches, the member
        is out of the group: the broker refuses a join with no topic names."""
        self._pattern = pattern
        self._matched = None
        self._sink.subscription_changed(frozenset())
        self.cluster.request_update()

    def unsubscribe(self) -> bool:
        """Leave the group. True if a leave heartbeat will go out, whose answer
        (or failure) is reported through ``Sink.leave_completed``; False if the
        member was not in a group it could leave (nothing to wait for)."""
        self._subscription = frozenset()
        self._pattern = None
        self._matched = None
        was_in_group = self.membership.in_group
        self.membership.leave()
        self.consume.assigned = []
        if was_in_group and self.coordinator.known:
            self._leave_waiting = True
            return True
        return False

    def on_app_poll(self, now_ms: int) -> None:
        """The application polled: resets the poll timer, (re)joins if needed."""
        self.membership.on_poll(now_ms)

    def fetch(
        self,
        acks: NodeAcks,
        *,
        ahead: bool = False,
        max_records: int | None = None,
        until_ms: int | None = None,
    ) -> None:
        """The application wants records; ``acks`` ride on the next ShareFetch.
        ``max_records`` caps how many it asks for (the application's pace, see
        ``FetchAheadPolicy.max_records``, or its poll's own cap; None:
        ``max.poll.records``); ``until_ms`` ends the round (see
        ``ShareConsumeManager.on_fetch``)."""
        self.consume.on_fetch(acks, ahead=ahead, max_records=max_records, until_ms=until_ms)

    def acknowledge_async(self, acks: NodeAcks, deadline_ms: int, linger_until_ms: int) -> None:
        self.consume.on_async(acks, deadline_ms, linger_until_ms=linger_until_ms)

    def commit_sync(self, acks: NodeAcks, deadline_ms: int, token: object) -> None:
        self.consume.on_sync(acks, deadline_ms, token)

    def close(self, acks: NodeAcks, deadline_ms: int, token: object) -> None:
        self._closing = True
        self.consume.on_close(acks, deadline_ms, token)
        if self.telemetry is not None:
            self.telemetry.initiate_close()

    # -- inputs from the transport ----------------------------------------------------

    def on_disconnect(self, node_id: int, channel: Channel, reason: KafkaError) -> None:
        if channel is Channel.SHARE:
            self.consume.on_disconnect(node_id)
        else:
            coordinator = self.coordinator.coordinator
            if coordinator is not None and coordinator.node_id == node_id:
                self.coordinator.mark_unknown()
        if isinstance(reason, UnsupportedVersionError):
            # No ApiVersions version in common with this broker: nothing this
            # consumer sends can be understood, so it cannot go on.
            self._sink.error(reason, fatal=True)
        elif isinstance(reason, AuthenticationError):
            # Not retriable by waiting: the application hears of it at once
            # (reconnects still go on, backing off).
            self._sink.error(reason)

    def on_share_fetch_versions(self, max_version: int | None) -> None:
        """The first negotiated connection said which ShareFetch versions the
        cluster speaks (None: no share APIs at all; the heartbeat reports that).
        A configuration that needs more fails the consumer now, not at its first
        fetch."""
        if self.capabilities is not None or max_version is None:
            return
        self.capabilities = ShareCapabilities(max_version)
        needed = []
        if self._config.share_acquire_mode is AcquireMode.RECORD_LIMIT:
            needed.append(ShareFeature.RECORD_LIMIT)
        if self._config.share_auto_renew:
            needed.append(ShareFeature.AUTO_RENEW)
        for feature in needed:
            try:
                self.capabilities.require(feature)
            except UnsupportedVersionError as exc:
                self.consume.block_fetching()
                self._sink.error(exc, fatal=True)
                return

    # -- the round --------------------------------------------------------------------

    def poll(self, now_ms: int) -> list[UnsentRequest[Any]]:
        """The requests to send now."""
        out: list[UnsentRequest[Any]] = []
        if (
            self._wants_metadata
            and self.cluster.needs_update(now_ms)
            and self._refresh.may_send(now_ms)
        ):
            out.append(self._metadata_request(now_ms))
        wants_coordinator = self._early_lookup or bool(self._subscription) or (
            self.membership.state is MemberState.LEAVING
        )
        if wants_coordinator and self.coordinator.poll(now_ms):
            self._early_lookup = False
            out.append(self._find_coordinator_request())
        plan = self.membership.poll(now_ms, self.coordinator.known)
        if plan is not None:
            out.append(self._heartbeat_request(plan, now_ms))
            if plan.is_leave and not self._closing:
                # Leaving (poll timeout or unsubscribe): close the share sessions so
                # the broker releases our records now, not when their locks expire.
                self.consume.close_sessions()
        self._maybe_update_assignment()
        out.extend(self.consume.poll(now_ms))
        if self.telemetry is not None:
            push = self.telemetry.poll(now_ms, self.cluster.any_node)
            if push is not None:
                out.append(push)
        return out

    def time_until_next_ms(self, now_ms: int) -> int:
        """How long the driver may sleep before :meth:`poll` has something to do."""
        waits = [
            MAX_WAIT_MS,
            self.membership.time_until_next_heartbeat_ms(now_ms, self.coordinator.known),
            self.consume.time_until_next_ms(now_ms),
        ]
        if self._wants_metadata:
            if self.cluster.needs_update(now_ms):
                allowed = self._refresh.time_until_allowed_ms(now_ms)
                if allowed is not None:
                    waits.append(allowed)
            else:
                waits.append(self.cluster.time_to_next_update_ms(now_ms))
        if self._subscription or self._early_lookup:
            waits.append(self.coordinator.time_until_next_lookup_ms(now_ms))
        if self.telemetry is not None:
            telemetry_wait = self.telemetry.time_until_next_ms(now_ms)
            if telemetry_wait is not None:
                waits.append(telemetry_wait)
        return max(0, min(waits))

    # -- metadata -----------------------------------------------------------------------

    @property
    def _wants_metadata(self) -> bool:
        """Subscribed by names, or by a pattern (which may match nothing yet)."""
        return bool(self._subscription) or self._pattern is not None

    def _metadata_request(self, now_ms: int) -> UnsentRequest[MetadataResponse]:
        self._refresh.on_send(now_ms)
        node = self.cluster.any_node()
        pattern = self._pattern
        if pattern is not None:
            # A pattern is matched against every topic (Java's classic consumer asks
            # the same); a topic we may not DESCRIBE is left out of the answer.
            request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        else:
            request = MetadataRequest(
                topics=[
                    MetadataRequest.MetadataRequestTopic(name=t)
                    for t in sorted(self._subscription)
                ],
                allow_auto_topic_creation=self._config.allow_auto_create_topics,
            )

        def failed(error: KafkaError, now_ms: int) -> None:
            self._refresh.on_failure(now_ms)
            self._log.debug("metadata request to node %s failed: %s", node, error)
            self.cluster.rotate_node()
            self._check_unsupported(error)
            self._maybe_rebootstrap(now_ms)

        def answered(response: MetadataResponse, now_ms: int) -> None:
            self._refresh.on_success(now_ms)
            self._metadata_failing_since_ms = None
            self._on_metadata(now_ms, response)
            self._match_pattern(pattern, response)

        return UnsentRequest(node, Channel.CONTROL, request, MetadataResponse, answered, failed)

    def _maybe_rebootstrap(self, now_ms: int) -> None:
        """``metadata.recovery.strategy=rebootstrap``: when no broker has answered a
        Metadata request for ``metadata.recovery.rebootstrap.trigger.ms``, start
        again from the bootstrap servers (Java 4.x does the same); with ``none``
        the consumer keeps trying the brokers it knows."""
        if self._metadata_failing_since_ms is None:
            self._metadata_failing_since_ms = now_ms
            return
        if (
            self._config.metadata_recovery_strategy == "rebootstrap"
            and self.cluster.brokers
            and now_ms - self._metadata_failing_since_ms
            >= self._config.metadata_recovery_rebootstrap_trigger_ms
        ):
            self._log.warning(
                "no broker answered a metadata request for %d ms: rebootstrapping from %s",
                now_ms - self._metadata_failing_since_ms,
                ",".join(f"{h}:{p}" for h, p in self._config.bootstrap_servers),
            )
            self.cluster.rebootstrap()
            self._refresh.allow_now()  # ask a bootstrap server before anything else
            self._metadata_failing_since_ms = now_ms

    def _on_metadata(self, now_ms: int, response: MetadataResponse) -> None:
        brokers = [BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers]
        topics = []
        for t in response.topics:
            name = t.name or ""
            if t.error_code in _TOPIC_ERRORS:
                key = (name, t.error_code)
                if key not in self._reported_topic_errors:
                    self._reported_topic_errors.add(key)
                    err_cls = (InvalidTopicError
                               if t.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
                               else TopicAuthorizationFailedError)
                    self._sink.error(err_cls(f"{err_cls.name}: topic {name!r}"))
            partitions = {
                p.partition_index: PartitionLeader(p.leader_id, p.leader_epoch)
                for p in t.partitions
            }
            topics.append(TopicMetadata(name, t.topic_id, t.error_code, partitions))
        self.cluster.update(now_ms, brokers, topics, response.controller_id)
        self._assignment_version = -1  # names may now resolve

    def _match_pattern(self, asked: re.Pattern[str] | None, response: MetadataResponse) -> None:
        """After a Metadata answer: re-subscribe by the names the pattern matches now.

        ``asked`` is the pattern the request was sent for (None: a request by
        names). Only an answer for all topics, sent for the current pattern, says
        what the pattern matches: a partial one would drop topics only to join
        them again at the next refresh, so the full answer is asked for at once."""
        pattern = self._pattern
        if pattern is None:
            return
        if asked is not pattern:
            self.cluster.request_update()
            return
        matched = match_topics(pattern, (
            TopicListing(t.name or "", t.is_internal, t.error_code) for t in response.topics
        ))
        if matched == self._matched:
            return
        # Until the first full answer the application was told "nothing yet".
        previous = self._matched or frozenset()
        self._matched = matched
        if matched != previous:
            self._log.info(
                "topic pattern %r matches %d topic(s) (joined: %s; left: %s)",
                pattern.pattern, len(matched), sorted(matched - previous) or "none",
                sorted(previous - matched) or "none",
            )
            self._sink.subscription_changed(matched)
        if matched != self._subscription:
            self._subscription = matched
            # Empty: the member leaves (the broker refuses a join without topic
            # names) and joins again at the poll after a topic matches.
            self.membership.subscribe(matched)
            self._assignment_version = -1

    # -- coordinator --------------------------------------------------------------------

    def _find_coordinator_request(self) -> UnsentRequest[FindCoordinatorResponse]:
        node = self.cluster.any_node()
        # Key type GROUP: share groups heartbeat to the group coordinator.
        request = find_coordinator_request(self._config.group_id)

        def failed(error: KafkaError, now_ms: int) -> None:
            self.coordinator.on_failure(now_ms)
            self.cluster.rotate_node()
            self._check_unsupported(error)

        def answered(response: FindCoordinatorResponse, now_ms: int) -> None:
            answer = coordinator_answer(response)
            code, node_id, host, port = answer.error_code, answer.node_id, answer.host, answer.port
            message = answer.message
            fatal_code = self.coordinator.on_response(now_ms, code, node_id, host, port)
            if fatal_code is not None:
                named = self._name_resource(fatal_code, message)
                self._sink.error(error_for_code(fatal_code, named))
                return
            if self.coordinator.known:
                self.cluster.brokers.setdefault(node_id, BrokerInfo(node_id, host, port))
                self._log.debug("group coordinator for %s is node %s",
                                self._config.group_id, node_id)

        return UnsentRequest(
            node, Channel.CONTROL, request, FindCoordinatorResponse, answered, failed
        )

    # -- heartbeat ----------------------------------------------------------------------

    def _heartbeat_request(
        self, plan: HeartbeatPlan, sent_ms: int
    ) -> UnsentRequest[ShareGroupHeartbeatResponse]:
        coordinator = self.coordinator.coordinator
        assert coordinator is not None
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

        def left() -> bool:
            # The leave heartbeat's answer, whatever it is, ends the leave.
            if leaving and self._leave_waiting:
                self._leave_waiting = False
                self._sink.leave_completed()
            return leaving

        def failed(error: KafkaError, now_ms: int) -> None:
            if left():
                return
            self.membership.on_heartbeat_failure(now_ms)
            if self._check_unsupported(error):
                return
            self.coordinator.mark_unknown()

        def answered(response: ShareGroupHeartbeatResponse, now_ms: int) -> None:
            if left():
                return
            assignment = None
            if response.assignment is not None:
                assignment = [
                    (tp.topic_id, list(tp.partitions))
                    for tp in response.assignment.topic_partitions
                ]
            message = response.error_message
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
                message = _UNSUPPORTED_SHARE
            outcome = self.membership.on_heartbeat_response(
                now_ms, response.error_code, message, response.member_epoch,
                response.heartbeat_interval_ms, assignment,
            )
            if self._metrics is not None:
                self._metrics.record_heartbeat(now_ms, now_ms - sent_ms)
                if outcome.assignment_changed:
                    self._metrics.record_rebalance(now_ms)
            if outcome.coordinator_unknown:
                self.coordinator.mark_unknown()
            if outcome.error is not None:
                self._sink.error(
                    self._membership_error(outcome.error), fatal=outcome.error.fatal
                )
            if response.error_code == 0:
                self.consume.member_ready = True
            self._assignment_version = -1

        return UnsentRequest(
            coordinator.node_id, Channel.CONTROL, request, ShareGroupHeartbeatResponse,
            answered, failed,
        )

    def _membership_error(self, err: MembershipError) -> KafkaError:
        if err.error_code == ErrorCode.UNSUPPORTED_VERSION:
            return UnsupportedVersionError(_UNSUPPORTED_SHARE)
        return error_for_code(err.error_code, self._name_resource(err.error_code, err.message))

    def _name_resource(self, code: int, message: str | None) -> str | None:
        """Authorization errors name the group or topics they are about (the broker's
        message often does not), as Java's GroupAuthorizationException does."""
        if code == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            group = self._config.group_id
            if not message or group not in message:
                return f"not authorized to access group {group!r}" + (
                    f": {message}" if message else "")
        elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            topics = sorted(self._subscription)
            if topics and (not message or not any(t in message for t in topics)):
                return f"not authorized to access topic(s) {', '.join(topics)}" + (
                    f": {message}" if message else "")
        return message

    def _check_unsupported(self, error: KafkaError) -> bool:
        """A request that cannot be encoded for this broker (no common version)."""
        if isinstance(error, UnsupportedVersionError):
            self._sink.error(error, fatal=True)
            self.membership.fail(ErrorCode.UNSUPPORTED_VERSION, str(error))
            return True
        return False

    def _maybe_update_assignment(self) -> None:
        version = self.cluster.version
        if self._assignment_version == version:
            return
        self._assignment_version = version
        resolved = resolve_assignment(self.membership.assigned, self.cluster.topic_names)
        if resolved.unresolved:
            self.cluster.request_update()
        self.consume.assigned = sorted(
            resolved.partitions, key=lambda t: (t.topic, t.partition)
        )
        if self.membership.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL,
                                     MemberState.STALE):
            self.consume.assigned = []


def _telemetry_sender(
    config: ShareConsumerConfig,
    member_id: str,
    metrics: ShareConsumerMetrics,
    unix_offset_ms: int,
    random_source: Callable[[], float] | None,
    logger: Logger,
) -> TelemetrySender:
    """The telemetry of a share consumer: its metrics under Java's names, and the
    resource attributes Java's share consumer sends (KIP-714, KIP-1082)."""
    resource = {"group_id": config.group_id, "group_member_id": member_id}
    if config.client_rack:
        resource["client_rack"] = config.client_rack
    collector = TelemetryCollector(
        metrics.snapshot, METRIC_GROUPS, unix_offset_ms=unix_offset_ms,
        created_ms=metrics.created_ms,
    )
    return TelemetrySender(
        collector, resource=resource, random_source=random_source, logger=logger
    )
