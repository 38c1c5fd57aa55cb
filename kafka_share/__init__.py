"""kafka-share: a pure-Python client for Apache Kafka share groups (KIP-932).

Share groups give queue semantics on Kafka topics: many consumers on one
partition, per-record acknowledgement (accept, release, reject, renew),
redelivery with delivery counts. See ``kafka_share.ShareConsumer``, and
``kafka_share.AsyncShareConsumer`` (``kafka_share.aio``) for asyncio.
"""

from typing import TYPE_CHECKING, Any

from kafka_share._version import __version__
from kafka_share.config import AcknowledgementMode, AcquireMode, ShareConsumerConfig
from kafka_share.consumer import AcknowledgementCommitCallback, ShareConsumer
from kafka_share.errors import (
    BrokerError,
    ConfigError,
    CorruptMessageError,
    CorruptRecordError,
    IllegalStateError,
    InvalidRecordStateError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    NotLeaderOrFollowerError,
    RecordDeserializationError,
    UnsupportedVersionError,
    WakeupError,
)
from kafka_share.models import (
    AcknowledgeType,
    ConsumerRecord,
    ConsumerRecords,
    TimestampType,
    TopicIdPartition,
    TopicPartition,
)

if TYPE_CHECKING:
    from kafka_share.aio import AsyncShareConsumer
    from kafka_share.dead_letter import DeadLetter

__all__ = [
    "AcknowledgeType",
    "AcknowledgementCommitCallback",
    "AcknowledgementMode",
    "AcquireMode",
    "AsyncShareConsumer",
    "BrokerError",
    "ConfigError",
    "ConsumerRecord",
    "ConsumerRecords",
    "CorruptMessageError",
    "CorruptRecordError",
    "DeadLetter",
    "IllegalStateError",
    "InvalidRecordStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "NetworkError",
    "NotLeaderOrFollowerError",
    "RecordDeserializationError",
    "ShareConsumer",
    "ShareConsumerConfig",
    "TimestampType",
    "TopicIdPartition",
    "TopicPartition",
    "UnsupportedVersionError",
    "WakeupError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # AsyncShareConsumer on first use: a thread-only application never imports asyncio.
    if name == "AsyncShareConsumer":
        from kafka_share.aio import AsyncShareConsumer  # noqa: PLC0415

        return AsyncShareConsumer
    # DeadLetter on first use: a consumer without a dead-letter topic never needs it.
    if name == "DeadLetter":
        from kafka_share.dead_letter import DeadLetter  # noqa: PLC0415

        return DeadLetter
    raise AttributeError(f"module 'kafka_share' has no attribute {name!r}")
