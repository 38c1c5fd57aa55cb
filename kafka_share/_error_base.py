"""The hand-written exception classes: the base of the tree in :mod:`kafka_share.errors`.

They live here, apart from the public module, so that the generated per-code
classes (``_error_codes``) can derive from them without an import cycle.
Import them from :mod:`kafka_share.errors`; each names that module as its
``__module__``, so reprs, tracebacks and pickles do too.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "BrokerError",
    "ConfigError",
    "CorruptMessageError",
    "IllegalStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "RecordDeserializationError",
    "SslAuthenticationError",
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


class AuthenticationError(KafkaError):
    """The client could not authenticate to a broker (SASL or TLS).

    Not retriable: the same credentials fail again. The consumer backs off
    (``reconnect.backoff.max.ms``) before its next attempt and raises this from
    the call that is waiting (``poll``, ``commit_sync``, ...). The message never
    contains a secret.
    """


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: an untrusted or mismatched certificate, a client
    certificate the broker refused, or a TLS listener mismatch. The message says
    what failed to verify."""


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
    """An error code returned by a broker. Subclasses exist for every code.

    ``code`` is Kafka's numeric error code, ``name`` its upper-case name (as in
    Java's ``Errors`` enum) and ``retriable`` matches Java's
    ``RetriableException`` hierarchy. Use :func:`error_for_code` to turn a code
    from a response into an exception. Subclasses may also be raised
    client-side with a custom message (e.g. :class:`UnsupportedVersionError`
    when version negotiation fails).
    """

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message if message else f"{self.name} (error code {self.code})")


for _cls in (
    KafkaError, ConfigError, IllegalStateError, WakeupError, KafkaTimeoutError,
    AuthenticationError, SslAuthenticationError, CorruptMessageError,
    RecordDeserializationError, BrokerError,
):
    _cls.__module__ = "kafka_share.errors"
del _cls
