"""Share-group administration: :class:`Admin` and its value types.

::

    from kafka_share import TopicPartition
    from kafka_share.admin import Admin

    with Admin(bootstrap_servers="localhost:9092") as admin:
        print(admin.describe_share_groups(["orders"])["orders"].members)
        admin.alter_group_configs("orders", {"share.record.lock.duration.ms": 60_000})

The client is synchronous; every method takes a ``timeout`` in seconds.
"""

from kafka_share.admin.client import Admin
from kafka_share.admin.types import (
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigSource,
    DeadLetterQueueSettings,
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
    TopicListing,
)

__all__ = [
    "Admin",
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
