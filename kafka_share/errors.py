"""Exceptions raised by kafka-share.

Tree::

    KafkaError                       base of everything this package raises
    ├── ConfigError                  bad config key or value (also a ValueError)
    ├── IllegalStateError            API misuse: wrong mode, record not in batch, closed consumer
    ├── WakeupError                  ``wakeup()`` interrupted a blocking call
    ├── KafkaTimeoutError            an operation did not finish within its timeout
    ├── CorruptMessageError          bytes from the wire could not be decoded (also a ValueError)
    ├── RecordDeserializationError   a key/value deserializer raised on a delivered record
    └── BrokerError                  an error code returned by a broker (see ERROR_CODES)
        └── one class per Kafka error code, e.g. InvalidRecordStateError (121)

Every exception carries ``retriable``: whether retrying the same operation
may succeed. Broker error classes also carry ``code``, Kafka's numeric code.
"""

from __future__ import annotations

__all__ = [
    "BrokerError",
    "ConfigError",
    "CorruptMessageError",
    "IllegalStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "RecordDeserializationError",
    "WakeupError",
]


class KafkaError(Exception):
    """Base class of every error kafka-share raises."""

    retriable: bool = False

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigError(KafkaError, ValueError):
    """A configuration key or value is invalid. The message names the key and the fix."""


class IllegalStateError(KafkaError, RuntimeError):
    """The API was used in a way the consumer's current state does not allow."""


class WakeupError(KafkaError):
    """A blocking call was interrupted by ``ShareConsumer.wakeup()``."""


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not complete within its timeout."""

    retriable = True


class CorruptMessageError(KafkaError, ValueError):
    """Bytes received from the wire could not be decoded.

    The message says what was being decoded, where, and why it failed.
    """


class RecordDeserializationError(KafkaError):
    """A key or value deserializer raised for a delivered record.

    The record has been released back to the share group (and may be
    redelivered). In explicit mode it can be rejected with
    ``ShareConsumer.acknowledge_offset(topic, partition, offset, REJECT)``.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        is_key: bool,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.is_key = is_key


class BrokerError(KafkaError):
    """An error code returned by a broker. Subclasses exist for every code."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
