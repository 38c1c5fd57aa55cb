"""Value types returned by and given to :class:`kafka_share.admin.Admin`.

Plain immutable values, like :mod:`kafka_share.models`: they hold no reference
to the admin client and can be compared, stored and pickled. Names follow
Java's ``Admin`` API where one exists (``ShareGroupDescription``,
``ShareMemberDescription``, ``ConfigEntry``, ``NewTopic``, ...).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.models import TopicPartition

__all__ = [
    "AlterConfigOp",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigSource",
    "DeadLetterQueueSettings",
    "ListOffsetsResultInfo",
    "LogSlice",
    "NewTopic",
    "Node",
    "OffsetSpec",
    "PartitionInfo",
    "ShareGroupDescription",
    "ShareGroupListing",
    "ShareMemberDescription",
    "SharePartitionOffsetInfo",
    "TopicDescription",
    "TopicListing",
]


@attrs_repr
@attrs.frozen(repr=False)
class Node:
    """A broker: its id, where it listens, and its rack (``None`` when unset)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    def __str__(self) -> str:
        return f"{self.host}:{self.port} (id: {self.node_id})"


@attrs_repr
@attrs.frozen(repr=False)
class ShareGroupListing:
    """One share group as listed by :meth:`Admin.list_share_groups`.

    ``state`` is the broker's name for the group state: ``"Empty"``,
    ``"Stable"``, ``"Dead"`` (or ``"Unknown"`` if the broker did not say).
    """

    group_id: str
    state: str


@attrs_repr
@attrs.frozen(repr=False)
class ShareMemberDescription:
    """One member of a share group."""

    member_id: str
    client_id: str
    #: The member's address as the coordinator saw it (e.g. ``/127.0.0.1``).
    host: str
    rack_id: str | None
    member_epoch: int
    #: The share-partitions currently assigned to the member.
    assignment: frozenset[TopicPartition]
    subscribed_topics: tuple[str, ...] = ()


@attrs_repr
@attrs.frozen(repr=False)
class ShareGroupDescription:
    """A share group as described by :meth:`Admin.describe_share_groups`."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    #: The group's coordinator.
    coordinator: Node
    members: tuple[ShareMemberDescription, ...]
    assignor_name: str = ""


@attrs_repr
@attrs.frozen(repr=False)
class SharePartitionOffsetInfo:
    """Where a share group is on one share-partition.

    ``start_offset`` is the share-partition start offset (SPSO): every record
    before it is done (acknowledged or archived). It is ``None`` while the
    share-partition has not been initialised (no member has fetched it yet),
    which Kafka's tools show as ``-``. ``lag`` is the number of
    records from the start offset to the end of the partition that are not
    yet done (KIP-1226); it is ``None`` when the broker cannot tell, which is
    always the case before Kafka 4.2 (DescribeShareGroupOffsets v0).
    """

    start_offset: int | None
    leader_epoch: int | None
    lag: int | None


class ConfigSource(enum.Enum):
    """Where a config value comes from (Kafka's ``ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def from_wire(cls, value: int) -> ConfigSource:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@attrs_repr
@attrs.frozen(repr=False)
class ConfigEntry:
    """One config of a resource (a group, a topic, a broker)."""

    name: str
    #: ``None`` for sensitive values, which brokers never return.
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    read_only: bool = False
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        """True if nothing overrides the built-in default."""
        return self.source is ConfigSource.DEFAULT_CONFIG


@attrs_repr
@attrs.frozen(repr=False)
class DeadLetterQueueSettings:
    """A share group's dead-letter queue (KIP-1191, Kafka 4.4) and what it depends on.

    ``topic`` is the group's ``errors.deadletterqueue.topic.name`` (``None``: the
    group has no dead-letter queue) and ``copy_record`` its
    ``errors.deadletterqueue.copy.record.enable``. The rest is what the cluster
    said about it, ``None`` where it could not be read (not authorized, or the
    group has no topic to ask about): the cluster's ``share.version`` feature
    level, the brokers' ``errors.deadletterqueue.topic.name.prefix`` and
    ``errors.deadletterqueue.auto.create.topics.enable``, whether the topic
    exists, and its ``errors.deadletterqueue.group.enable``. ``supported`` is
    False when the brokers have no dead-letter configs (before Kafka 4.4).
    ``problems`` says,
    for each thing that stops the brokers from writing dead letters to the
    topic, what to change; with any, the brokers archive the records instead.
    """

    group_id: str
    topic: str | None
    copy_record: bool
    share_version: int | None = None
    topic_prefix: str | None = None
    auto_create_topics: bool | None = None
    topic_exists: bool | None = None
    topic_enabled: bool | None = None
    problems: tuple[str, ...] = ()
    supported: bool = True

    @property
    def active(self) -> bool:
        """Whether the group has a dead-letter topic and nothing known stops its writes."""
        return self.topic is not None and not self.problems


class AlterConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs operations (the wire values)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _config_dict(configs: Mapping[str, str]) -> dict[str, str]:
    return dict(configs)


@attrs_repr
@attrs.frozen(hash=False, repr=False)
class NewTopic:
    """A topic for :meth:`Admin.create_topics`; ``-1`` uses the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = attrs.field(factory=dict, converter=_config_dict)


@attrs_repr
@attrs.frozen(repr=False)
class TopicListing:
    """One topic as listed by :meth:`Admin.list_topics`."""

    name: str
    topic_id: uuid.UUID
    is_internal: bool


@attrs_repr
@attrs.frozen(repr=False)
class PartitionInfo:
    """One partition of a described topic. ``leader`` is ``None`` while it has none."""

    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@attrs_repr
@attrs.frozen(repr=False)
class TopicDescription:
    """A topic as described by :meth:`Admin.describe_topics`."""

    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]


@attrs_repr
@attrs.frozen(repr=False)
class ClusterDescription:
    """The cluster as described by :meth:`Admin.describe_cluster`."""

    cluster_id: str
    #: The active controller's id as brokers report it; ``None`` if unknown.
    controller_id: int | None
    nodes: tuple[Node, ...]


@attrs_repr
@attrs.frozen(repr=False)
class OffsetSpec:
    """Which offset :meth:`Admin.list_offsets` looks up.

    ``OffsetSpec.earliest()``, ``OffsetSpec.latest()`` or
    ``OffsetSpec.for_timestamp(ms)`` (the first offset whose timestamp is at
    or after ``ms``; the end offset when there is none).
    """

    #: Kafka's ListOffsets timestamp: -2 earliest, -1 latest, else a time in ms.
    timestamp: int

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(-2)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(-1)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        if timestamp_ms < 0:
            raise ValueError(f"a timestamp must be >= 0 ms, got {timestamp_ms}")
        return cls(timestamp_ms)


@attrs_repr
@attrs.frozen(repr=False)
class LogSlice:
    """What :meth:`Admin.read_log` read from a partition's log: the raw record
    batches (decode them with :func:`kafka_share.records.iter_batches`; the first
    may start before the offset asked for, and the last may be cut short), and
    the partition's offsets at the time of reading."""

    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    #: (producer id, first offset) of each aborted transaction in the range
    #: (read_committed only)
    aborted_transactions: tuple[tuple[int, int], ...] = ()


@attrs_repr
@attrs.frozen(repr=False)
class ListOffsetsResultInfo:
    """An offset found by :meth:`Admin.list_offsets` (``timestamp`` -1 when none applies)."""

    offset: int
    timestamp: int
    leader_epoch: int | None
