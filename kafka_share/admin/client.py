"""The blocking admin client: :class:`Admin`.

Each method builds sans-IO calls (:mod:`kafka_share.admin.calls`), drives them
over one :class:`~kafka_share._net.client.NetworkClient` on the caller's thread
until they finish or their deadline passes, and returns plain values
(:mod:`kafka_share.admin.types`). Requests and responses are the generated
wire messages; the request/response mapping lives in
:mod:`kafka_share.admin.requests`.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from kafka_share._net.client import NetworkClient, Purpose, monotonic_ms
from kafka_share._net.security_checks import validate_supported
from kafka_share.admin import dead_letter as dlq
from kafka_share.admin import requests as rq
from kafka_share.admin.calls import AdminRpc, Call, Route, Routing
from kafka_share.admin.types import (
    ClusterDescription,
    ConfigEntry,
    DeadLetterQueueSettings,
    ListOffsetsResultInfo,
    LogSlice,
    NewTopic,
    OffsetSpec,
    ShareGroupDescription,
    ShareGroupListing,
    SharePartitionOffsetInfo,
    TopicDescription,
    TopicListing,
)
from kafka_share.cluster import ClusterMetadata
from kafka_share.config import ShareConsumerConfig, parse_admin_config
from kafka_share.errors import (
    ClusterAuthorizationFailedError,
    GroupIdNotFoundError,
    IllegalStateError,
    InvalidConfigError,
    KafkaError,
    KafkaTimeoutError,
    NonEmptyGroupError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafka_share.models import TopicPartition
from kafka_share.share.backoff import ExponentialBackoff

__all__ = ["Admin"]

T = TypeVar("T")
R = TypeVar("R")
V = TypeVar("V")

#: One call of a batch: (what it does, where it goes, the request, the ACLs it needs).
_Spec = tuple[str, Route, Call[Any, T], str]

_admin_numbers = itertools.count(1)


def _timeout_ms(timeout: float | None, default_ms: int) -> int:
    if timeout is None:
        return default_ms
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds, got {timeout!r}")
    if timeout < 0:
        raise ValueError(f"timeout must not be negative, got {timeout!r}")
    return int(timeout * 1000)


class Admin:
    """A synchronous admin client for share groups, their configs, and topics.

    ``Admin(config)`` takes the same configuration as
    :class:`~kafka_share.ShareConsumer` (dotted keys and/or keywords; security
    settings included; ``group.id`` is not needed)::

        from kafka_share.admin import Admin

        with Admin(bootstrap_servers="localhost:9092") as admin:
            for listing in admin.list_share_groups():
                print(listing.group_id, listing.state)

    Every method waits for the answer, at most ``timeout`` seconds (default:
    ``default.api.timeout.ms``), retrying retriable errors (a coordinator
    moving or loading, a broker restarting) with backoff
    (``retry.backoff.ms`` up to ``retry.backoff.max.ms``) until then, and
    raises :class:`~kafka_share.errors.KafkaTimeoutError` naming the last
    error when time runs out. Other failures raise Kafka's error classes from
    :mod:`kafka_share.errors` (e.g. :class:`~kafka_share.errors.GroupIdNotFoundError`)
    with a message naming the group, topic or config concerned.

    Not thread-safe for concurrent calls: calls from several threads are
    serialised.
    """

    def __init__(self, config: Mapping[str, object] | None = None, /, **kwargs: object) -> None:
        cfg = parse_admin_config(config, **kwargs)
        validate_supported(cfg)
        self._config = cfg
        self._client_id = cfg.client_id or f"kafka-share-admin-{next(_admin_numbers)}"
        self._cluster = ClusterMetadata(
            cfg.bootstrap_servers, metadata_max_age_ms=cfg.metadata_max_age_ms
        )
        self._routing = Routing(self._cluster)
        self._backoff = ExponentialBackoff(cfg.retry_backoff_ms, cfg.retry_backoff_max_ms)
        # The same transport as the consumer's, security (TLS, SASL) included.
        self._net = NetworkClient.from_config(
            cfg, client_id=self._client_id, address_of=self._cluster.address_of
        )
        self._lock = threading.Lock()
        self._closed = False

    @property
    def config(self) -> ShareConsumerConfig:
        """The parsed configuration."""
        return self._config

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._net.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        servers = ",".join(f"{h}:{p}" for h, p in self._config.bootstrap_servers)
        return f"Admin(client_id={self._client_id!r}, bootstrap_servers={servers!r})"

    # -- the driver -------------------------------------------------------------------------

    def _deadline(self, timeout: float | None) -> int:
        return monotonic_ms() + _timeout_ms(timeout, self._config.default_api_timeout_ms)

    def _rpc(
        self, name: str, route: Route, call: Call[Any, T], deadline_ms: int, needs: str = ""
    ) -> AdminRpc[T]:
        now = monotonic_ms()
        return AdminRpc(
            name,
            route,
            call,
            routing=self._routing,
            now_ms=now,
            timeout_ms=max(0, deadline_ms - now),
            request_timeout_ms=self._config.request_timeout_ms,
            backoff=self._backoff,
            needs=needs,
        )

    def _run(self, rpcs: Sequence[AdminRpc[Any]]) -> None:
        """Drive ``rpcs`` concurrently until each has a result or an error."""
        with self._lock:
            if self._closed:
                raise IllegalStateError("this admin client is closed")
            while True:
                now = monotonic_ms()
                waits: list[int] = []
                for rpc in rpcs:
                    for out in rpc.poll(now):
                        self._net.send(
                            out.node_id,
                            Purpose.CONTROL,
                            out.request,
                            _with_time(out.handler),
                            now,
                            timeout_ms=out.timeout_ms,
                        )
                    wait = rpc.time_until_next_ms(now)
                    if wait is not None:
                        waits.append(wait)
                if not waits:
                    return
                # Sends above may have completed synchronously (address unknown).
                self._net.poll(min(waits))

    def _call(
        self, name: str, route: Route, call: Call[Any, T], deadline_ms: int, needs: str = ""
    ) -> T:
        rpc = self._rpc(name, route, call, deadline_ms, needs)
        self._run([rpc])
        return rpc.result()

    def _call_all(self, calls: Sequence[_Spec[T]], deadline_ms: int) -> list[T]:
        rpcs = [self._rpc(*spec[:3], deadline_ms, spec[3]) for spec in calls]
        self._run(rpcs)
        return [rpc.result() for rpc in rpcs]

    def _metadata(self, topics: Sequence[str] | None, deadline_ms: int) -> rq.MetadataView:
        what = "the cluster" if topics is None else ", ".join(repr(t) for t in topics) or "brokers"
        view = self._call(
            f"fetch metadata of {what}", Route.any(), rq.metadata(topics), deadline_ms,
            "DESCRIBE on the topics" if topics else "",
        )
        self._cluster.update(monotonic_ms(), view.brokers, view.topics, view.controller_id)
        return view

    # -- share groups -----------------------------------------------------------------------

    def list_share_groups(self, *, timeout: float | None = None) -> list[ShareGroupListing]:
        """Every share group of the cluster, sorted by group id.

        Asks every broker (ListGroups with the ``share`` type filter), as each
        one lists only the groups it coordinates.
        """
        deadline = self._deadline(timeout)
        view = self._metadata([], deadline)
        calls = [
            (f"list share groups on broker {b.node_id}", Route.node(b.node_id), rq.list_groups(),
             "")
            for b in view.brokers
        ]
        listings = [item for part in self._call_all(calls, deadline) for item in part]
        return sorted(set(listings), key=lambda listing: listing.group_id)

    def describe_share_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, ShareGroupDescription]:
        """Describe share groups (ShareGroupDescribe to each group's coordinator).

        Raises:
            GroupIdNotFoundError: a group does not exist (or is not a share group).
        """
        ids = _group_ids(group_ids)
        deadline = self._deadline(timeout)
        calls = [
            (f"describe share group {g!r}", Route.coordinator(g),
             rq.describe_share_group(g, self._routing), f"DESCRIBE on GROUP {g!r}")
            for g in ids
        ]
        return dict(zip(ids, self._call_all(calls, deadline), strict=True))

    def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, SharePartitionOffsetInfo]:
        """The group's start offset, leader epoch and lag per share-partition.

        ``partitions`` limits the answer (default: every share-partition the
        group has state for). ``lag`` is ``None`` where the broker cannot
        compute it, and always on brokers before Kafka 4.2 (which have no
        DescribeShareGroupOffsets v1, KIP-1226): lag is then unavailable,
        not guessed.

        Raises:
            GroupIdNotFoundError: the group does not exist.
        """
        (group,) = _group_ids([group_id])
        wanted = None if partitions is None else sorted(set(partitions))
        deadline = self._deadline(timeout)
        found = self._call(
            f"list offsets of share group {group!r}",
            Route.coordinator(group),
            rq.describe_share_group_offsets(group, wanted),
            deadline,
            f"DESCRIBE on GROUP {group!r} (and DESCRIBE on the topics to see their offsets)",
        )
        if not found:
            # The broker answers an unknown group with no offsets; tell the two apart
            # (raises GroupIdNotFoundError for a group that does not exist).
            self.describe_share_groups([group], timeout=_left_s(deadline))
        return found

    def list_consumer_group_offsets(
        self,
        group_id: str,
        topics: Iterable[str] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        """A consumer group's committed offsets (OffsetFetch to its coordinator).

        ``group_id`` names a consumer group (classic or KIP-848), not a share
        group; ``topics`` limits the answer (default: every topic). Only the
        partitions with a committed offset are in the answer, sorted; an
        existing group that committed nothing (on ``topics``) answers ``{}``.
        Offsets of pending transactional commits are waited for, not returned.
        Use it with :meth:`alter_share_group_offsets` to move a consumer group's
        workload to a share group (``kafka-share groups reset-offsets
        --from-consumer-group``).

        Raises:
            GroupIdNotFoundError: no group ``group_id`` exists, or it is a share
                group.
            GroupAuthorizationFailedError: the principal lacks DESCRIBE on the group.
            TopicAuthorizationFailedError: the principal lacks DESCRIBE on a topic
                the group committed to.
        """
        (group,) = _group_ids([group_id])
        if isinstance(topics, str):
            raise TypeError(f"pass a list of topics, not the string {topics!r} (e.g. [{topics!r}])")
        names = None if topics is None else sorted(set(topics))
        deadline = self._deadline(timeout)
        try:
            found = self._call(
                f"fetch the committed offsets of consumer group {group!r}",
                Route.coordinator(group),
                rq.consumer_group_offsets(group, names),
                deadline,
                f"DESCRIBE on GROUP {group!r} and DESCRIBE on the topics",
            )
        except GroupIdNotFoundError:
            # A share group of that name is refused by the broker; say what it is.
            self._require_consumer_group(group, deadline)
            raise
        if not found:
            # The broker answers an unknown group with no offsets, as it does a group
            # that committed none: tell the two apart.
            self._require_consumer_group(group, deadline)
        return found

    def _require_consumer_group(self, group: str, deadline_ms: int) -> None:
        types = self._call(
            f"list the groups of the coordinator of {group!r}",
            Route.coordinator(group),
            rq.list_group_types(),
            deadline_ms,
            f"DESCRIBE on GROUP {group!r}",
        )
        if group not in types:
            raise GroupIdNotFoundError(
                f"GROUP_ID_NOT_FOUND (error code 69): consumer group {group!r} does not exist"
            )
        if types[group] == "share":
            raise GroupIdNotFoundError(
                f"GROUP_ID_NOT_FOUND (error code 69): group {group!r} is a share group, "
                "not a consumer group: it has no committed offsets"
            )

    def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout: float | None = None,
    ) -> None:
        """Set the group's start offset on share-partitions (AlterShareGroupOffsets).

        The group must have no members: the broker refuses to move a group
        under active consumers. Records before the new start offset count as
        done; from it on they are delivered again.

        Raises:
            NonEmptyGroupError: the group has members; the message names them.
            ValueError: an offset is negative.
        """
        (group,) = _group_ids([group_id])
        if not offsets:
            raise ValueError("no offsets given: pass {TopicPartition(topic, partition): offset}")
        for tp, offset in offsets.items():
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"offsets must be keyed by TopicPartition, got {tp!r}")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(f"the offset for {tp} must be an int >= 0, got {offset!r}")
        deadline = self._deadline(timeout)
        self._require_empty(group, "alter its offsets", deadline)
        self._call(
            f"alter offsets of share group {group!r}",
            Route.coordinator(group),
            rq.alter_share_group_offsets(group, dict(offsets)),
            deadline,
            f"READ on GROUP {group!r} and READ on the topics",
        )

    def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, timeout: float | None = None
    ) -> None:
        """Forget the group's state for whole topics (DeleteShareGroupOffsets).

        The group must have no members. The next member to fetch a deleted
        topic starts where ``share.auto.offset.reset`` says.

        Raises:
            NonEmptyGroupError: the group has members; the message names them.
        """
        (group,) = _group_ids([group_id])
        names = sorted(set(topics))
        if not names:
            raise ValueError("no topics given")
        deadline = self._deadline(timeout)
        self._require_empty(group, "delete its offsets", deadline)
        self._call(
            f"delete offsets of share group {group!r}",
            Route.coordinator(group),
            rq.delete_share_group_offsets(group, names),
            deadline,
            f"DELETE on GROUP {group!r} and READ on the topics",
        )

    def delete_share_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> None:
        """Delete share groups with their state (DeleteGroups).

        Raises:
            GroupIdNotFoundError: a group does not exist.
            NonEmptyGroupError: a group has members; the message names them.
        """
        ids = _group_ids(group_ids)
        deadline = self._deadline(timeout)
        calls = [
            (f"delete share group {g!r}", Route.coordinator(g), rq.delete_group(g),
             f"DELETE on GROUP {g!r}")
            for g in ids
        ]
        rpcs = [self._rpc(*spec[:3], deadline, spec[3]) for spec in calls]
        self._run(rpcs)
        for group, rpc in zip(ids, rpcs, strict=True):
            if isinstance(rpc.error, NonEmptyGroupError):
                self._raise_non_empty(group, "delete it", deadline, rpc.error)
            rpc.result()

    def _require_empty(self, group: str, action: str, deadline_ms: int) -> None:
        try:
            description = self.describe_share_groups([group], timeout=_left_s(deadline_ms))[group]
        except GroupIdNotFoundError:
            return  # nothing to protect; the broker decides what a missing group means
        if description.members:
            raise NonEmptyGroupError(_non_empty_message(description, action))

    def _raise_non_empty(
        self, group: str, action: str, deadline_ms: int, error: NonEmptyGroupError
    ) -> None:
        try:
            description = self.describe_share_groups([group], timeout=_left_s(deadline_ms))[group]
        except KafkaError:
            raise error from None
        raise NonEmptyGroupError(_non_empty_message(description, action)) from None

    # -- group configs ----------------------------------------------------------------------

    def describe_group_configs(
        self, group_id: str, *, timeout: float | None = None
    ) -> dict[str, ConfigEntry]:
        """The group's configs (DescribeConfigs on the GROUP resource), by name.

        Every group config is listed, with its ``source``: ``GROUP_CONFIG``
        where the group overrides it, else where the default comes from.
        """
        (group,) = _group_ids([group_id])
        return self._call(
            f"describe configs of group {group!r}",
            Route.any(),
            rq.describe_configs(rq.RESOURCE_GROUP, group),
            self._deadline(timeout),
            f"DESCRIBE_CONFIGS on GROUP {group!r}",
        )

    def alter_group_configs(
        self,
        group_id: str,
        changes: Mapping[str, object | None],
        *,
        timeout: float | None = None,
    ) -> None:
        """Change group configs incrementally (IncrementalAlterConfigs, GROUP resource).

        ``changes`` maps config names to new values; ``None`` resets a key to
        its default. Keys not named keep their values. E.g.
        ``alter_group_configs("g", {"share.record.lock.duration.ms": 15000,
        "share.delivery.count.limit": None})``.

        Brokers apply the change asynchronously: a member may see the old
        value for a moment after this returns.

        A dead-letter topic (``errors.deadletterqueue.topic.name``, Kafka 4.4,
        KIP-1191) is checked before it is set, for what the brokers check only
        when they first write a dead letter (and then archive the record
        instead): the cluster's ``share.version`` must be 2, the name must start
        with the brokers' ``errors.deadletterqueue.topic.name.prefix``, and the
        topic must have ``errors.deadletterqueue.group.enable=true`` (or not
        exist, with ``errors.deadletterqueue.auto.create.topics.enable``).
        What cannot be read (not authorized) is not checked.

        Raises:
            InvalidConfigError: an unknown key or a value out of range; the
                message names the key and, for the share-group settings whose
                bounds are broker configs, the allowed range; for a dead-letter
                topic that would not work, what to change.
        """
        (group,) = _group_ids([group_id])
        if not changes:
            raise ValueError("no config changes given")
        dlq.check_dlq_values(changes)
        deadline = self._deadline(timeout)
        wanted = dlq.wanted_dlq_topic(changes)
        if wanted is not None:
            self._check_dlq_topic(group, wanted, deadline)
        try:
            self._call(
                f"alter configs of group {group!r}",
                Route.any(),
                rq.alter_configs(rq.RESOURCE_GROUP, group, changes),
                deadline,
                f"ALTER_CONFIGS on GROUP {group!r}",
            )
        except KafkaError as exc:
            hint = self._config_hint(group, changes, exc, deadline)
            if hint:
                raise type(exc)(f"{exc}; {hint}") from None
            raise

    def _config_hint(
        self,
        group_id: str,
        changes: Mapping[str, object | None],
        error: KafkaError,
        deadline_ms: int,
    ) -> str:
        """Explain an INVALID_CONFIG answer: which key is unknown, or its allowed range."""
        if getattr(error, "name", "") != "INVALID_CONFIG" or monotonic_ms() >= deadline_ms:
            return ""
        try:
            known = self.describe_group_configs(group_id, timeout=_left_s(deadline_ms))
            if not self._cluster.brokers:
                self._metadata([], deadline_ms)
            broker_id = self._cluster.any_node()
            broker = (
                self._call(
                    "describe broker configs",
                    Route.node(broker_id),
                    rq.describe_configs(rq.RESOURCE_BROKER, str(broker_id)),
                    deadline_ms,
                )
                if broker_id >= 0
                else {}
            )
        except KafkaError:
            return ""
        return rq.config_hint(changes, known, broker)

    # -- dead-letter queues (KIP-1191) -------------------------------------------------------

    def describe_dead_letter_queue(
        self, group_id: str, *, timeout: float | None = None
    ) -> DeadLetterQueueSettings:
        """The group's dead-letter queue and what it depends on (Kafka 4.4, KIP-1191).

        Reads the group's configs and, when it has a dead-letter topic, the
        cluster's ``share.version``, the brokers' dead-letter configs and the
        topic's; ``problems`` of the answer says what stops dead letters from
        being written, and what to change. Facts the principal may not read
        are ``None``.
        """
        (group,) = _group_ids([group_id])
        deadline = self._deadline(timeout)
        entries = self.describe_group_configs(group, timeout=_left_s(deadline))
        name = entries.get(dlq.GROUP_TOPIC_NAME)
        if name is None or not name.value:
            return dlq.dlq_settings(group, entries, None, None, None, None)
        return self._dlq_settings(group, entries, name.value, deadline)

    def _dlq_settings(
        self, group: str, entries: Mapping[str, ConfigEntry], topic: str, deadline_ms: int
    ) -> DeadLetterQueueSettings:
        """What the cluster says about ``topic`` as ``group``'s dead-letter topic."""
        if not self._cluster.brokers:
            self._metadata([], deadline_ms)
        broker_id = self._cluster.any_node()
        broker: dict[str, ConfigEntry] | None = None
        if broker_id >= 0:
            broker = self._readable(lambda: self._call(
                "describe broker configs", Route.node(broker_id),
                rq.describe_configs(rq.RESOURCE_BROKER, str(broker_id)), deadline_ms,
                "DESCRIBE_CONFIGS on the CLUSTER"))
        table = self._net.any_api_versions()
        level = table.finalized_features.get("share.version", 0) if table is not None else None
        topic_configs: dict[str, ConfigEntry] | None = None
        exists: bool | None = None
        try:
            topic_configs = self._readable(lambda: self.describe_topic_configs(
                topic, timeout=_left_s(deadline_ms)))
            exists = True if topic_configs is not None else None
        except UnknownTopicOrPartitionError:
            exists = False
        return dlq.dlq_settings(group, entries, broker, level, topic_configs, exists)

    @staticmethod
    def _readable(read: Callable[[], T]) -> T | None:
        """``read()``, or None when the principal may not read it."""
        try:
            return read()
        except (TopicAuthorizationFailedError, ClusterAuthorizationFailedError):
            return None

    def _check_dlq_topic(self, group: str, topic: str, deadline_ms: int) -> None:
        entries = {dlq.GROUP_TOPIC_NAME: ConfigEntry(dlq.GROUP_TOPIC_NAME, topic)}
        problems = self._dlq_settings(group, entries, topic, deadline_ms).problems
        if problems:
            raise InvalidConfigError(
                f"{dlq.GROUP_TOPIC_NAME}={topic} for group {group!r} would not work, the "
                "brokers would archive records instead of writing them to it: "
                + "; ".join(problems)
            )

    def describe_topic_configs(
        self, topic: str, *, timeout: float | None = None
    ) -> dict[str, ConfigEntry]:
        """A topic's configs (DescribeConfigs on the TOPIC resource), by name.

        Raises:
            UnknownTopicOrPartitionError: the topic does not exist.
        """
        return self._call(
            f"describe configs of topic {topic!r}",
            Route.any(),
            rq.describe_configs(rq.RESOURCE_TOPIC, topic),
            self._deadline(timeout),
            f"DESCRIBE_CONFIGS on TOPIC {topic!r}",
        )

    def alter_topic_configs(
        self,
        topic: str,
        changes: Mapping[str, object | None],
        *,
        timeout: float | None = None,
    ) -> None:
        """Change topic configs incrementally (IncrementalAlterConfigs, TOPIC resource).

        ``None`` resets a key to its default. E.g. enabling a topic as a share
        group's dead-letter queue:
        ``alter_topic_configs("dlq.orders", {"errors.deadletterqueue.group.enable": True})``.

        Raises:
            InvalidConfigError, UnknownTopicOrPartitionError: naming the topic.
        """
        if not changes:
            raise ValueError("no config changes given")
        self._call(
            f"alter configs of topic {topic!r}",
            Route.any(),
            rq.alter_configs(rq.RESOURCE_TOPIC, topic, changes),
            self._deadline(timeout),
            f"ALTER_CONFIGS on TOPIC {topic!r}",
        )

    # -- client telemetry subscriptions (KIP-714) -----------------------------------------------

    def describe_client_metrics(
        self, name: str, *, timeout: float | None = None
    ) -> dict[str, ConfigEntry]:
        """A client-metrics subscription's configs (``metrics``, ``interval.ms``,
        ``match``), by name (DescribeConfigs on the CLIENT_METRICS resource); the
        defaults for a subscription that does not exist."""
        _check_subscription_name(name)
        return self._call(
            f"describe client metrics subscription {name!r}",
            Route.any(),
            rq.describe_configs(rq.RESOURCE_CLIENT_METRICS, name),
            self._deadline(timeout),
            f"DESCRIBE_CONFIGS on CLIENT_METRICS {name!r}",
        )

    def alter_client_metrics(
        self,
        name: str,
        changes: Mapping[str, object | None],
        *,
        timeout: float | None = None,
    ) -> None:
        """Create or change a client-metrics subscription incrementally
        (IncrementalAlterConfigs, CLIENT_METRICS resource): which metrics the
        clients it matches push, and how often, as ``kafka-client-metrics.sh`` does.

        Keys: ``metrics`` (name prefixes, comma-separated or a list; ``*`` for all),
        ``interval.ms`` (100-3600000, default 300000), ``match`` (``key=regex``
        entries on ``client_id``, ``client_instance_id``, ``client_software_name``,
        ``client_software_version``, ``client_source_address``,
        ``client_source_port``; none: every client). ``None`` resets a key;
        resetting all three removes the subscription. E.g.
        ``alter_client_metrics("share-consumers", {"metrics": "org.apache.kafka.consumer.share.",
        "interval.ms": 60000})``.

        Raises:
            InvalidConfigError, InvalidRequestError: an unknown key or a bad value,
                as the brokers say it.
        """
        _check_subscription_name(name)
        if not changes:
            raise ValueError("no config changes given")
        values = {key: (",".join(map(str, value)) if isinstance(value, list | tuple) else value)
                  for key, value in changes.items()}
        self._call(
            f"alter client metrics subscription {name!r}",
            Route.any(),
            rq.alter_configs(rq.RESOURCE_CLIENT_METRICS, name, values),
            self._deadline(timeout),
            f"ALTER_CONFIGS on CLIENT_METRICS {name!r}",
        )

    # -- topics and cluster -------------------------------------------------------------------

    def create_topics(
        self,
        topics: Iterable[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Create topics (a name alone uses the broker's default partitions and replicas).

        Returns once the metadata shows them with a leader for every partition
        (or when ``timeout`` is about to run out): the controller answers as soon
        as it has created them, and brokers learn of them a moment later, so a
        describe or produce right after the call would otherwise fail with
        UNKNOWN_TOPIC_OR_PARTITION.

        Raises:
            TopicAlreadyExistsError, InvalidPartitionsError, InvalidConfigError, ...:
                naming the topic.
        """
        new = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        if not new:
            raise ValueError("no topics given")
        deadline = self._deadline(timeout)
        names = ", ".join(repr(t.name) for t in new)
        self._call(
            f"create topic(s) {names}",
            Route.any(),
            rq.create_topics(new, validate_only, deadline_ms=deadline),
            deadline,
            "CREATE on the CLUSTER or on each TOPIC",
        )
        if validate_only:
            return
        wanted = [t.name for t in new]
        # Leave a little of the deadline unused: the topics exist, and a caller
        # that then times out on its own call gets that call's error.
        while monotonic_ms() < deadline - 100:
            if rq.topics_visible(self._metadata(wanted, deadline), wanted):
                return
            time.sleep(0.05)

    def delete_topics(self, topics: Iterable[str], *, timeout: float | None = None) -> None:
        """Delete topics by name.

        Raises:
            UnknownTopicOrPartitionError: a topic does not exist.
        """
        names = sorted(set(topics))
        if not names:
            raise ValueError("no topics given")
        deadline = self._deadline(timeout)
        self._call(
            "delete topic(s) " + ", ".join(repr(t) for t in names),
            Route.any(),
            rq.delete_topics(names, deadline_ms=deadline),
            deadline,
            "DELETE on each TOPIC",
        )

    def list_topics(
        self, *, include_internal: bool = False, timeout: float | None = None
    ) -> dict[str, TopicListing]:
        """Every topic by name (internal ones such as ``__share_group_state`` on request)."""
        view = self._metadata(None, self._deadline(timeout))
        return {
            t.name: TopicListing(t.name, t.topic_id, t.name in view.internal)
            for t in view.topics
            if t.error_code == 0 and (include_internal or t.name not in view.internal)
        }

    def describe_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, TopicDescription]:
        """Partitions, leaders and replicas of topics.

        Raises:
            UnknownTopicOrPartitionError: a topic does not exist.
        """
        names = sorted(set(topics))
        if not names:
            raise ValueError("no topics given")
        view = self._metadata(names, self._deadline(timeout))
        return rq.topic_descriptions(view, names)

    def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        """The cluster id, the controller and the brokers (DescribeCluster)."""
        return self._call(
            "describe the cluster", Route.any(), rq.describe_cluster(), self._deadline(timeout)
        )

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec],
        *,
        isolation_level: str = "read_uncommitted",
        timeout: float | None = None,
    ) -> dict[TopicPartition, ListOffsetsResultInfo]:
        """Look offsets up on the partition leaders (ListOffsets).

        E.g. ``list_offsets({TopicPartition("t", 0): OffsetSpec.latest()})``.
        Partitions whose leader moved are looked up again until the deadline.
        With ``isolation_level="read_committed"`` the latest offset is the last
        stable offset (that of the first record of a still open transaction),
        as Java's ``ListOffsetsOptions(IsolationLevel.READ_COMMITTED)``.

        Raises:
            UnknownTopicOrPartitionError: a topic or partition does not exist.
            ValueError: ``isolation_level`` is neither ``read_uncommitted`` nor
                ``read_committed``.
        """
        if isolation_level not in rq.ISOLATION_LEVELS:
            raise ValueError(
                "isolation_level must be 'read_uncommitted' or 'read_committed', "
                f"got {isolation_level!r}"
            )
        if not specs:
            return {}
        return self._per_leader(
            "list offsets", specs,
            lambda _, parts: rq.list_offsets(parts, isolation_level),
            "DESCRIBE on the topics", self._deadline(timeout),
        )

    def _per_leader(
        self,
        what: str,
        pending: Mapping[TopicPartition, V],
        call: Callable[
            [rq.MetadataView, dict[TopicPartition, V]],
            Call[Any, dict[TopicPartition, R | KafkaError]],
        ],
        needs: str,
        deadline: int,
    ) -> dict[TopicPartition, R]:
        """Run ``call`` (given the metadata it was routed by) on each partition's
        leader; partitions whose leader moved
        (a retriable error as a value) or is not known yet go again, after a
        metadata refresh and a backoff, until ``deadline``."""
        pending = dict(pending)
        results: dict[TopicPartition, R] = {}
        attempts = 0
        last: KafkaError | None = None
        while pending:
            view = self._metadata(sorted({tp.topic for tp in pending}), deadline)
            by_leader = rq.group_by_leader(view, pending)
            calls = [
                (f"{what} on broker {leader}", Route.node(leader), call(view, parts), needs)
                for leader, parts in sorted(by_leader.items())
            ]
            for part in self._call_all(calls, deadline):
                for tp, outcome in part.items():
                    if isinstance(outcome, KafkaError):
                        last = outcome
                    else:
                        results[tp] = outcome
            pending = {tp: v for tp, v in pending.items() if tp not in results}
            if pending:
                wait_ms = self._backoff.backoff_ms(attempts)
                attempts += 1
                if monotonic_ms() + wait_ms >= deadline:
                    listed = ", ".join(str(tp) for tp in sorted(pending))
                    why = f"; last error: {last}" if last is not None else ": no leader known"
                    raise KafkaTimeoutError(f"{what} of {listed} did not complete in time{why}")
                time.sleep(wait_ms / 1000)
        return results

    def delete_records(
        self, offsets: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """Delete every record before the given offset of each partition
        (DeleteRecords on the leaders), as Java's ``Admin.deleteRecords``: the log
        start moves up to that offset. Returns each partition's new low watermark.

        Raises:
            OffsetOutOfRangeError: an offset is past the partition's end.
            UnknownTopicOrPartitionError: a topic or partition does not exist.
            TopicAuthorizationFailedError: no DELETE permission on a topic.
        """
        if not offsets:
            return {}
        deadline = self._deadline(timeout)
        return self._per_leader(
            "delete records", offsets,
            lambda _, parts: rq.delete_records(parts, max(1, deadline - monotonic_ms())),
            "DELETE on the topics", deadline,
        )

    def read_log(
        self,
        partition: TopicPartition,
        offset: int,
        *,
        max_bytes: int = 1 << 20,
        isolation_level: str = "read_uncommitted",
        timeout: float | None = None,
    ) -> LogSlice:
        """Read a partition's log from ``offset`` with one plain Fetch on its leader
        (no consumer group, no fetch session, no waiting for new records): about
        ``max_bytes`` of record batches, at least one whole batch if there is one.

        The Spark source reads the records of a staged micro-batch back with it.
        Leader moves are retried until the deadline.

        Raises:
            OffsetOutOfRangeError: ``offset`` is before the log start (deleted by
                retention) or past its end.
            UnknownTopicOrPartitionError: the partition does not exist.
            ValueError: a bad ``offset``, ``max_bytes`` or ``isolation_level``.
        """
        if isolation_level not in rq.ISOLATION_LEVELS:
            raise ValueError(
                "isolation_level must be 'read_uncommitted' or 'read_committed', "
                f"got {isolation_level!r}"
            )
        if offset < 0 or max_bytes < 1:
            raise ValueError(f"offset must be >= 0 and max_bytes >= 1, got {offset}, {max_bytes}")
        slices = self._per_leader(
            "read the log", {partition: offset},
            lambda view, parts: rq.fetch_log(
                parts, {t.name: t.topic_id for t in view.topics}, max_bytes, isolation_level
            ),
            "READ on the topic", self._deadline(timeout),
        )
        return slices[partition]


def _with_time(
    handler: Callable[[Any, KafkaError | None, int], None],
) -> Callable[[Any, KafkaError | None], None]:
    """Adapt a sans-IO handler: pass it the time the answer arrived."""

    def handle(response: Any, error: KafkaError | None) -> None:
        handler(response, error, monotonic_ms())

    return handle


def _left_s(deadline_ms: int) -> float:
    return max(0, deadline_ms - monotonic_ms()) / 1000


def _group_ids(group_ids: Iterable[str]) -> list[str]:
    if isinstance(group_ids, str):
        raise TypeError(
            f"pass a list of group ids, not the string {group_ids!r} (e.g. [{group_ids!r}])"
        )
    ids = list(dict.fromkeys(group_ids))
    if not ids:
        raise ValueError("no group ids given")
    for g in ids:
        if not isinstance(g, str) or not g:
            raise ValueError(f"a group id must be a non-empty string, got {g!r}")
    return ids


def _non_empty_message(description: ShareGroupDescription, action: str) -> str:
    members = "; ".join(
        f"{m.member_id} (client {m.client_id!r} at {m.host})" for m in description.members
    )
    return (
        f"NON_EMPTY_GROUP (error code 68): share group {description.group_id!r} has "
        f"{len(description.members)} active member(s): {members}. Stop them (or wait for "
        f"their session to time out) to {action}"
    )


def _check_subscription_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a client metrics subscription needs a non-empty name, got {name!r}")
