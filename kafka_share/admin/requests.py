"""Admin requests and the parsing of their responses: pure functions, no I/O.

Each function returns a :class:`Call`: ``build()`` makes the request (called
again for every attempt) and ``parse(response)`` turns the response into the
value the :class:`~kafka_share.admin.Admin` method returns, raising Kafka's
error class (via :func:`~kafka_share.errors.error_for_code`) with a message
naming the group, topic, partition or config concerned. A retriable error is
retried by :class:`~kafka_share.admin.calls.AdminRpc`; :class:`DoNotRetry`
marks one that must not be.
"""

from __future__ import annotations

import difflib
import uuid
from collections.abc import Mapping, Sequence
from typing import TypeVar

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.admin.calls import Call, DoNotRetry, Routing
from kafka_share.admin.types import (
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigSource,
    ListOffsetsResultInfo,
    LogSlice,
    NewTopic,
    Node,
    OffsetSpec,
    PartitionInfo,
    ShareGroupDescription,
    ShareGroupListing,
    ShareMemberDescription,
    SharePartitionOffsetInfo,
    TopicDescription,
)
from kafka_share.cluster import BrokerInfo, PartitionLeader, TopicMetadata
from kafka_share.errors import (
    BrokerError,
    GroupIdNotFoundError,
    KafkaError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafka_share.models import TopicPartition
from kafka_share.protocol.api_keys import ApiKey
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    FetchRequest,
    FetchResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from kafka_share.share.unsent import VersionedRequest

T = TypeVar("T")
R = TypeVar("R")
V = TypeVar("V")

_OffsetsTopic = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestTopic

#: DescribeConfigs / IncrementalAlterConfigs resource types.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32


#: Share-group configs whose allowed range is set by broker configs (Kafka's
#: GroupConfig): group key -> (broker config of the minimum, of the maximum).
SHARE_GROUP_CONFIG_BOUNDS: Mapping[str, tuple[str, str]] = {
    "share.record.lock.duration.ms": (
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    "share.session.timeout.ms": (
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    "share.heartbeat.interval.ms": (
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    "share.delivery.count.limit": (
        "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit",
    ),
    "share.partition.max.record.locks": (
        "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks",
    ),
}


def _error(code: int, context: str, message: str | None) -> BrokerError:
    return error_for_code(code, f"{context}: {message}" if message else context)


# -- metadata -----------------------------------------------------------------------------


@attrs_repr
@attrs.frozen(repr=False)
class MetadataView:
    """The parts of a Metadata response the admin client uses."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicMetadata, ...]
    internal: frozenset[str]
    #: topic -> partition -> (replicas, isr)
    replicas: Mapping[str, Mapping[int, tuple[tuple[int, ...], tuple[int, ...]]]]


def metadata(topics: Sequence[str] | None) -> Call[MetadataResponse, MetadataView]:
    """Metadata for ``topics`` (None: every topic; empty: brokers only)."""

    def build() -> MetadataRequest:
        return MetadataRequest(
            topics=None if topics is None else [
                MetadataRequest.MetadataRequestTopic(name=t) for t in topics
            ],
            allow_auto_topic_creation=False,
        )

    def parse(response: MetadataResponse) -> MetadataView:
        brokers = tuple(BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers)
        topic_list = []
        internal = set()
        replicas: dict[str, dict[int, tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        for t in response.topics:
            name = t.name or ""
            if t.is_internal:
                internal.add(name)
            partitions = {
                p.partition_index: PartitionLeader(p.leader_id, p.leader_epoch)
                for p in t.partitions
            }
            replicas[name] = {
                p.partition_index: (tuple(p.replica_nodes), tuple(p.isr_nodes))
                for p in t.partitions
            }
            topic_list.append(TopicMetadata(name, t.topic_id, t.error_code, partitions))
        return MetadataView(
            response.cluster_id, response.controller_id, brokers, tuple(topic_list),
            frozenset(internal), replicas,
        )

    return Call(MetadataResponse, build, parse)


def _topic_error(code: int, name: str) -> BrokerError:
    """The error of a topic in a Metadata answer, naming the topic (and the missing ACL)."""
    error = _error(code, f"topic {name!r}", None)
    if error.name == "TOPIC_AUTHORIZATION_FAILED":
        error = type(error)(f"{error}: not authorized; the principal needs DESCRIBE on "
                            f"TOPIC {name!r}")
    return error


def topics_visible(view: MetadataView, names: Sequence[str]) -> bool:
    """Whether ``view`` shows every topic of ``names`` with a leader for each
    partition (what a created topic needs before it can be described or used)."""
    by_name = {t.name: t for t in view.topics}
    for name in names:
        t = by_name.get(name)
        if t is None or t.error_code != 0 or not t.partitions:
            return False
        if any(leader.leader_id < 0 for leader in t.partitions.values()):
            return False
    return True


def topic_descriptions(view: MetadataView, names: Sequence[str]) -> dict[str, TopicDescription]:
    """The descriptions of ``names`` from ``view``; raises for a missing topic."""
    by_name = {t.name: t for t in view.topics}
    out: dict[str, TopicDescription] = {}
    for name in names:
        t = by_name.get(name)
        if t is None or t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise UnknownTopicOrPartitionError(
                f"UNKNOWN_TOPIC_OR_PARTITION (error code 3): topic {name!r} does not exist"
            )
        if t.error_code != 0:
            raise _topic_error(t.error_code, name)
        parts = []
        for index, leader in sorted(t.partitions.items()):
            reps, isr = view.replicas.get(name, {}).get(index, ((), ()))
            parts.append(PartitionInfo(
                index, leader.leader_id if leader.leader_id >= 0 else None, reps, isr
            ))
        out[name] = TopicDescription(name, t.topic_id, name in view.internal, tuple(parts))
    return out


def group_by_leader(
    view: MetadataView, specs: Mapping[TopicPartition, V]
) -> dict[int, dict[TopicPartition, V]]:
    """Partitions by leader; raises for a topic or partition that does not exist.

    Partitions without a leader right now are left out (the caller retries them).
    """
    by_name = {t.name: t for t in view.topics}
    out: dict[int, dict[TopicPartition, V]] = {}
    for tp, spec in specs.items():
        t = by_name.get(tp.topic)
        if t is None or t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise UnknownTopicOrPartitionError(
                f"UNKNOWN_TOPIC_OR_PARTITION (error code 3): topic {tp.topic!r} does not exist"
            )
        if t.error_code != 0:
            error = _topic_error(t.error_code, tp.topic)
            if not error.retriable:
                raise error  # e.g. TOPIC_AUTHORIZATION_FAILED: waiting cannot help
            continue  # e.g. LEADER_NOT_AVAILABLE while it is being created
        leader = t.partitions.get(tp.partition)
        if leader is None:
            raise UnknownTopicOrPartitionError(
                f"UNKNOWN_TOPIC_OR_PARTITION (error code 3): topic {tp.topic!r} has no "
                f"partition {tp.partition} (it has {len(t.partitions)})"
            )
        if leader.leader_id >= 0:
            out.setdefault(leader.leader_id, {})[tp] = spec
    return out


# -- groups -------------------------------------------------------------------------------


def list_groups() -> Call[ListGroupsResponse, list[ShareGroupListing]]:
    """ListGroups on one broker, share groups only."""

    def build() -> ListGroupsRequest:
        return ListGroupsRequest(types_filter=["share"])

    def parse(response: ListGroupsResponse) -> list[ShareGroupListing]:
        if response.error_code:
            raise _error(response.error_code, "list groups", None)
        return [
            ShareGroupListing(g.group_id, g.group_state or "Unknown")
            for g in response.groups
            if (g.group_type or "").lower() == "share"
        ]

    return Call(ListGroupsResponse, build, parse)


def list_group_types() -> Call[ListGroupsResponse, dict[str, str]]:
    """ListGroups on one broker, every type: group id -> type (``classic``, ``consumer``,
    ``share``, ...), to tell an unknown group from one of another type."""

    def build() -> ListGroupsRequest:
        return ListGroupsRequest()

    def parse(response: ListGroupsResponse) -> dict[str, str]:
        if response.error_code:
            raise _error(response.error_code, "list groups", None)
        return {g.group_id: (g.group_type or "classic").lower() for g in response.groups}

    return Call(ListGroupsResponse, build, parse)


def consumer_group_offsets(
    group_id: str, topics: Sequence[str] | None
) -> Call[OffsetFetchResponse, dict[TopicPartition, int]]:
    """OffsetFetch (v8) of a consumer group: its committed offsets, only where it has one.

    Asks for every topic (the broker needs no partition list then) and keeps
    ``topics``. ``RequireStable``: offsets of pending transactional commits are
    retried (UNSTABLE_OFFSET_COMMIT), not returned before they are decided.
    """
    req = OffsetFetchRequest
    wanted = None if topics is None else set(topics)

    def build() -> OffsetFetchRequest:
        return req(
            groups=[req.OffsetFetchRequestGroup(group_id=group_id, topics=None)],
            require_stable=True,
        )

    def parse(response: OffsetFetchResponse) -> dict[TopicPartition, int]:
        group = next((g for g in response.groups if g.group_id == group_id), None)
        if group is None:
            raise _error(69, f"consumer group {group_id!r} is missing from the answer", None)
        if group.error_code:
            raise _error(group.error_code, f"consumer group {group_id!r}", None)
        out: dict[TopicPartition, int] = {}
        failures: list[tuple[object, int, str | None]] = []
        for t in group.topics:
            if wanted is not None and t.name not in wanted:
                continue
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    failures.append((tp, p.error_code, None))
                elif p.committed_offset >= 0:  # -1: nothing committed
                    out[tp] = p.committed_offset
        _raise_first(failures, f"fetch the offsets of consumer group {group_id!r}")
        return dict(sorted(out.items()))

    return Call(OffsetFetchResponse, build, parse)


def describe_share_group(
    group_id: str, routing: Routing
) -> Call[ShareGroupDescribeResponse, ShareGroupDescription]:
    def build() -> ShareGroupDescribeRequest:
        return ShareGroupDescribeRequest(group_ids=[group_id])

    def parse(response: ShareGroupDescribeResponse) -> ShareGroupDescription:
        group = next((g for g in response.groups if g.group_id == group_id), None)
        if group is None:
            raise _error(69, f"share group {group_id!r} is missing from the answer", None)
        if group.error_code:
            if group.error_code == GroupIdNotFoundError.code:
                raise GroupIdNotFoundError(
                    f"GROUP_ID_NOT_FOUND (error code 69): share group {group_id!r} does not "
                    f"exist{': ' + group.error_message if group.error_message else ''}"
                )
            raise _error(group.error_code, f"share group {group_id!r}", group.error_message)
        info = routing.coordinator_node(group_id)
        coordinator = (
            Node(info.node_id, info.host, info.port, info.rack)
            if info is not None
            else Node(-1, "", -1)
        )
        members = tuple(
            ShareMemberDescription(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.client_host,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                assignment=frozenset(
                    TopicPartition(tp.topic_name, p)
                    for tp in m.assignment.topic_partitions
                    for p in tp.partitions
                ),
                subscribed_topics=tuple(m.subscribed_topic_names),
            )
            for m in group.members
        )
        return ShareGroupDescription(
            group_id=group_id,
            state=group.group_state,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            coordinator=coordinator,
            members=members,
            assignor_name=group.assignor_name,
        )

    return Call(ShareGroupDescribeResponse, build, parse)


def describe_share_group_offsets(
    group_id: str, partitions: Sequence[TopicPartition] | None
) -> Call[DescribeShareGroupOffsetsResponse, dict[TopicPartition, SharePartitionOffsetInfo]]:
    used: dict[str, int] = {}
    req = DescribeShareGroupOffsetsRequest

    def build_version(version: int) -> DescribeShareGroupOffsetsRequest:
        used["version"] = version
        topics: list[_OffsetsTopic] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [
                req.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=sorted(ps))
                for t, ps in sorted(by_topic.items())
            ]
        return req(groups=[
            req.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=topics)
        ])

    def parse(
        response: DescribeShareGroupOffsetsResponse,
    ) -> dict[TopicPartition, SharePartitionOffsetInfo]:
        lag_known = used.get("version", 0) >= 1
        group = next((g for g in response.groups if g.group_id == group_id), None)
        if group is None:
            raise _error(69, f"share group {group_id!r} is missing from the answer", None)
        if group.error_code:
            raise _error(group.error_code, f"share group {group_id!r}", group.error_message)
        out: dict[TopicPartition, SharePartitionOffsetInfo] = {}
        for t in group.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic_name, p.partition_index)
                if p.error_code:
                    raise _error(
                        p.error_code, f"share group {group_id!r}, partition {tp}", p.error_message
                    )
                out[tp] = SharePartitionOffsetInfo(
                    start_offset=p.start_offset if p.start_offset >= 0 else None,
                    leader_epoch=p.leader_epoch if p.leader_epoch >= 0 else None,
                    lag=p.lag if lag_known and p.lag >= 0 else None,
                )
        return dict(sorted(out.items()))

    return Call(
        DescribeShareGroupOffsetsResponse,
        lambda: VersionedRequest(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, build_version),
        parse,
    )


def alter_share_group_offsets(
    group_id: str, offsets: Mapping[TopicPartition, int]
) -> Call[AlterShareGroupOffsetsResponse, None]:
    req = AlterShareGroupOffsetsRequest

    def build() -> AlterShareGroupOffsetsRequest:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
        return req(group_id=group_id, topics=[
            req.AlterShareGroupOffsetsRequestTopic(
                topic_name=t,
                partitions=[
                    req.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                    for p, o in sorted(ps)
                ],
            )
            for t, ps in sorted(by_topic.items())
        ])

    def parse(response: AlterShareGroupOffsetsResponse) -> None:
        if response.error_code:
            raise _error(response.error_code, f"share group {group_id!r}", response.error_message)
        failures = [
            (TopicPartition(t.topic_name, p.partition_index), p.error_code, p.error_message)
            for t in response.responses
            for p in t.partitions
            if p.error_code
        ]
        _raise_first(failures, f"alter offsets of share group {group_id!r}")

    return Call(AlterShareGroupOffsetsResponse, build, parse)


def delete_share_group_offsets(
    group_id: str, topics: Sequence[str]
) -> Call[DeleteShareGroupOffsetsResponse, None]:
    req = DeleteShareGroupOffsetsRequest

    def build() -> DeleteShareGroupOffsetsRequest:
        return req(group_id=group_id, topics=[
            req.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics
        ])

    def parse(response: DeleteShareGroupOffsetsResponse) -> None:
        if response.error_code:
            raise _error(response.error_code, f"share group {group_id!r}", response.error_message)
        failures = [
            (f"topic {t.topic_name!r}", t.error_code, t.error_message)
            for t in response.responses
            if t.error_code
        ]
        _raise_first(failures, f"delete offsets of share group {group_id!r}")

    return Call(DeleteShareGroupOffsetsResponse, build, parse)


def _raise_first(failures: Sequence[tuple[object, int, str | None]], what: str) -> None:
    """Raise the error of the first failure, listing every failure in the message."""
    if not failures:
        return
    listed = "; ".join(
        f"{where}: {error_for_code(code).name}{' (' + msg + ')' if msg else ''}"
        for where, code, msg in failures
    )
    first = failures[0][1]
    error = error_for_code(first, f"{what} failed for {listed}")
    if first == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise DoNotRetry(error)  # naming a missing topic: retrying cannot help
    raise error


def delete_group(group_id: str) -> Call[DeleteGroupsResponse, None]:
    def build() -> DeleteGroupsRequest:
        return DeleteGroupsRequest(groups_names=[group_id])

    def parse(response: DeleteGroupsResponse) -> None:
        for r in response.results:
            if r.group_id == group_id and r.error_code:
                if r.error_code == GroupIdNotFoundError.code:
                    raise GroupIdNotFoundError(
                        f"GROUP_ID_NOT_FOUND (error code 69): share group {group_id!r} "
                        "does not exist"
                    )
                raise _error(r.error_code, f"delete group {group_id!r}", None)

    return Call(DeleteGroupsResponse, build, parse)


# -- configs ------------------------------------------------------------------------------


def describe_configs(
    resource_type: int, name: str
) -> Call[DescribeConfigsResponse, dict[str, ConfigEntry]]:
    def build() -> DescribeConfigsRequest:
        return DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            )
        ])

    def parse(response: DescribeConfigsResponse) -> dict[str, ConfigEntry]:
        out: dict[str, ConfigEntry] = {}
        for r in response.results:
            if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                # a missing topic: retrying cannot help
                raise DoNotRetry(_error(r.error_code, f"describe configs of {name!r}",
                                        r.error_message))
            if r.error_code:
                raise _error(r.error_code, f"describe configs of {name!r}", r.error_message)
            for c in r.configs:
                out[c.name] = ConfigEntry(
                    c.name,
                    c.value,
                    ConfigSource.from_wire(c.config_source),
                    c.read_only,
                    c.is_sensitive,
                )
        return dict(sorted(out.items()))

    return Call(DescribeConfigsResponse, build, parse)


def config_value(value: object) -> str:
    """The wire string of a config value (``True`` -> ``"true"``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(f"a config value must be a str, int, float or bool, got {value!r}")


def alter_configs(
    resource_type: int, name: str, changes: Mapping[str, object | None]
) -> Call[IncrementalAlterConfigsResponse, None]:
    req = IncrementalAlterConfigsRequest
    ops = [
        req.AlterableConfig(name=key, config_operation=AlterConfigOp.DELETE, value=None)
        if value is None
        else req.AlterableConfig(
            name=key, config_operation=AlterConfigOp.SET, value=config_value(value)
        )
        for key, value in changes.items()
    ]

    def build() -> IncrementalAlterConfigsRequest:
        return req(resources=[
            req.AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=ops)
        ])

    def parse(response: IncrementalAlterConfigsResponse) -> None:
        for r in response.responses:
            if r.error_code:
                raise _error(r.error_code, f"alter configs of {name!r}", r.error_message)

    return Call(IncrementalAlterConfigsResponse, build, parse)


def config_hint(
    changes: Mapping[str, object | None],
    known: Mapping[str, ConfigEntry],
    broker: Mapping[str, ConfigEntry],
) -> str:
    """Say which of ``changes`` is an unknown key, or what range each known key allows."""
    hints = []
    for key, value in changes.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1)
            hints.append(
                f"{key!r} is not a group config"
                + (f" (did you mean {close[0]!r}?)" if close else "")
                + "; group configs: " + ", ".join(sorted(known))
            )
            continue
        bounds = SHARE_GROUP_CONFIG_BOUNDS.get(key)
        if bounds is None or value is None:
            continue
        lo = broker.get(bounds[0])
        hi = broker.get(bounds[1])
        if lo is not None and hi is not None and lo.value is not None and hi.value is not None:
            hints.append(
                f"{key} must be between {lo.value} and {hi.value} "
                f"(the broker's {bounds[0]} and {bounds[1]}), got {config_value(value)}"
            )
    return "; ".join(hints)


# -- topics and cluster ------------------------------------------------------------------


def create_topics(
    topics: Sequence[NewTopic], validate_only: bool, *, deadline_ms: int
) -> Call[CreateTopicsResponse, None]:
    req = CreateTopicsRequest
    del deadline_ms  # the broker-side wait is bounded by the request timeout instead

    def build() -> CreateTopicsRequest:
        return req(
            topics=[
                req.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=[],
                    configs=[
                        req.CreatableTopicConfig(name=k, value=config_value(v))
                        for k, v in sorted(t.configs.items())
                    ],
                )
                for t in topics
            ],
            timeout_ms=30_000,
            validate_only=validate_only,
        )

    def parse(response: CreateTopicsResponse) -> None:
        failures = [
            (f"topic {t.name!r}", t.error_code, t.error_message)
            for t in response.topics
            if t.error_code
        ]
        _raise_first(failures, "create topics")

    return Call(CreateTopicsResponse, build, parse)


def delete_topics(names: Sequence[str], *, deadline_ms: int) -> Call[DeleteTopicsResponse, None]:
    del deadline_ms

    def build() -> DeleteTopicsRequest:
        return DeleteTopicsRequest(topic_names=list(names), timeout_ms=30_000)

    def parse(response: DeleteTopicsResponse) -> None:
        failures = [
            (f"topic {t.name!r}", t.error_code,
             t.error_message or ("it does not exist"
                                 if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else None))
            for t in response.responses
            if t.error_code
        ]
        _raise_first(failures, "delete topics")

    return Call(DeleteTopicsResponse, build, parse)


def describe_cluster() -> Call[DescribeClusterResponse, ClusterDescription]:
    def build() -> DescribeClusterRequest:
        return DescribeClusterRequest()

    def parse(response: DescribeClusterResponse) -> ClusterDescription:
        if response.error_code:
            raise _error(response.error_code, "describe the cluster", response.error_message)
        return ClusterDescription(
            cluster_id=response.cluster_id,
            controller_id=response.controller_id if response.controller_id >= 0 else None,
            nodes=tuple(
                sorted(
                    (Node(b.broker_id, b.host, b.port, b.rack) for b in response.brokers),
                    key=lambda n: n.node_id,
                )
            ),
        )

    return Call(DescribeClusterResponse, build, parse)


#: ListOffsets' isolation levels: the latest offset is the high watermark, or
#: the last stable offset (before the first open transaction).
ISOLATION_LEVELS: dict[str, int] = {"read_uncommitted": 0, "read_committed": 1}


def list_offsets(
    specs: Mapping[TopicPartition, OffsetSpec],
    isolation_level: str = "read_uncommitted",
) -> Call[ListOffsetsResponse, dict[TopicPartition, ListOffsetsResultInfo | KafkaError]]:
    """ListOffsets on one leader. Per-partition errors come back as values (the
    caller retries those partitions after a metadata refresh)."""
    isolation = ISOLATION_LEVELS[isolation_level]
    req = ListOffsetsRequest

    def build() -> ListOffsetsRequest:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, spec in specs.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, spec.timestamp))
        return req(
            replica_id=-1,
            isolation_level=isolation,
            topics=[
                req.ListOffsetsTopic(name=t, partitions=[
                    req.ListOffsetsPartition(partition_index=p, timestamp=ts)
                    for p, ts in sorted(ps)
                ])
                for t, ps in sorted(by_topic.items())
            ],
        )

    def parse(
        response: ListOffsetsResponse,
    ) -> dict[TopicPartition, ListOffsetsResultInfo | KafkaError]:
        out: dict[TopicPartition, ListOffsetsResultInfo | KafkaError] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    error = _error(p.error_code, f"list offsets of {tp}", None)
                    if not error.retriable:
                        raise error
                    out[tp] = error
                else:
                    out[tp] = ListOffsetsResultInfo(
                        p.offset, p.timestamp, p.leader_epoch if p.leader_epoch >= 0 else None
                    )
        return out

    return Call(ListOffsetsResponse, build, parse)


def fetch_log(
    offsets: Mapping[TopicPartition, int], topic_ids: Mapping[str, uuid.UUID], max_bytes: int,
    isolation_level: str,
) -> Call[FetchResponse, dict[TopicPartition, LogSlice | KafkaError]]:
    """A plain Fetch (no fetch session, no wait) of partitions from the given
    offsets on their leader. A retriable partition error (the leader moved) comes
    back as a value for the caller to retry after a metadata refresh; others raise."""
    isolation = ISOLATION_LEVELS[isolation_level]
    req = FetchRequest
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in offsets:
        by_topic.setdefault(tp.topic, []).append(tp)

    def build_version(version: int) -> FetchRequest:
        return req(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=max_bytes,
            isolation_level=isolation,
            session_id=0,
            session_epoch=-1,  # a full fetch outside any fetch session
            topics=[
                req.FetchTopic(topic=topic, topic_id=topic_ids[topic], partitions=[
                    req.FetchPartition(partition=tp.partition, fetch_offset=offsets[tp],
                                       partition_max_bytes=max_bytes)
                    for tp in tps
                ])
                for topic, tps in by_topic.items()
            ],
            forgotten_topics_data=[],
        )

    def parse(response: FetchResponse) -> dict[TopicPartition, LogSlice | KafkaError]:
        what = f"fetch of {', '.join(f'{tp} from offset {o}' for tp, o in offsets.items())}"
        if response.error_code:
            raise _error(response.error_code, what, None)
        # Fetch v13+ names topics by id only.
        names = {topic_ids[topic]: topic for topic in by_topic}
        out: dict[TopicPartition, LogSlice | KafkaError] = {}
        for t in response.responses:
            name = t.topic or names.get(t.topic_id, "")
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                if tp not in offsets:
                    continue
                if p.error_code:
                    error = _error(p.error_code, f"fetch of {tp} from offset {offsets[tp]}", None)
                    if not error.retriable:
                        raise error
                    out[tp] = error
                    continue
                out[tp] = LogSlice(
                    records=bytes(p.records or b""),
                    high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset,
                    log_start_offset=p.log_start_offset,
                    aborted_transactions=tuple(
                        (a.producer_id, a.first_offset) for a in p.aborted_transactions or ()
                    ),
                )
        missing = [str(tp) for tp in offsets if tp not in out]
        if missing:
            raise _error(3, f"{what}: {', '.join(missing)} missing from the answer", None)
        return out

    return Call(FetchResponse, lambda: VersionedRequest(ApiKey.FETCH, build_version), parse)


def delete_records(
    offsets: Mapping[TopicPartition, int], timeout_ms: int
) -> Call[DeleteRecordsResponse, dict[TopicPartition, int | KafkaError]]:
    """DeleteRecords on one leader: each partition's new low watermark, or a
    retriable error as a value (the caller retries after a metadata refresh)."""
    req = DeleteRecordsRequest

    def build() -> DeleteRecordsRequest:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
        return req(
            topics=[
                req.DeleteRecordsTopic(name=t, partitions=[
                    req.DeleteRecordsPartition(partition_index=p, offset=o)
                    for p, o in sorted(ps)
                ])
                for t, ps in sorted(by_topic.items())
            ],
            timeout_ms=timeout_ms,
        )

    def parse(response: DeleteRecordsResponse) -> dict[TopicPartition, int | KafkaError]:
        out: dict[TopicPartition, int | KafkaError] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    error = _error(p.error_code, f"delete records of {tp}", None)
                    if not error.retriable:
                        raise error
                    out[tp] = error
                else:
                    out[tp] = p.low_watermark
        return out

    return Call(DeleteRecordsResponse, build, parse)
