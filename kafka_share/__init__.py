"""kafka-share: a pure-Python client for Apache Kafka share groups (KIP-932).

Share groups give queue semantics on Kafka topics: many consumers on one
partition, per-record acknowledgement (accept, release, reject, renew),
redelivery with delivery counts. See ``kafka_share.ShareConsumer``.
"""

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

__all__ = [
    "AcknowledgeType",
    "AcknowledgementCommitCallback",
    "AcknowledgementMode",
    "AcquireMode",
    "BrokerError",
    "ConfigError",
    "ConsumerRecord",
    "ConsumerRecords",
    "CorruptMessageError",
    "CorruptRecordError",
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
