"""kafka-share: a pure-Python client for Apache Kafka share groups (KIP-932).

Share groups give queue semantics on Kafka topics: many consumers on one
partition, per-record acknowledgement (accept, release, reject, renew),
redelivery with delivery counts. See ``kafka_share.ShareConsumer``.
"""

from kafka_share._version import __version__
from kafka_share.errors import (
    ConfigError,
    CorruptMessageError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    RecordDeserializationError,
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

__all__ = [
    "AcknowledgeType",
    "ConfigError",
    "ConsumerRecord",
    "ConsumerRecords",
    "CorruptMessageError",
    "IllegalStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "RecordDeserializationError",
    "TimestampType",
    "TopicIdPartition",
    "TopicPartition",
    "WakeupError",
    "__version__",
]
