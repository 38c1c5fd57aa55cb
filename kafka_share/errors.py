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
may succeed. Broker error classes also carry ``code``, Kafka's numeric code,
and ``name``, Kafka's name for it.

The classes above are written by hand here. The per-code classes are generated
from the table ``errors.toml`` (one row per code: Kafka's name, the class, Java's
exception, retriable) by ``tools/gen_errors.py`` into ``_error_codes.py``, and
re-exported from this module, which is where to import them from.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "ERROR_CODES",
    "AuthenticationError",
    "BrokerError",
    "ConfigError",
    "CorruptMessageError",
    "IllegalStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "RecordDeserializationError",
    "SaslAuthenticationError",
    "SslAuthenticationError",
    "WakeupError",
    "error_for_code",
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


# One class per Kafka error code, generated from the table errors.toml by
# tools/gen_errors.py. Imported only now because those classes derive from the ones
# above: _error_codes imports them from this module while it is still initialising.
from kafka_share import _error_codes  # noqa: E402
from kafka_share._error_codes import *  # noqa: E402, F403

__all__ += _error_codes.__all__

ERROR_CODES: Mapping[int, type[BrokerError]] = MappingProxyType(dict(_error_codes.BY_CODE))
"""Every known Kafka error code (except 0, NONE) mapped to its exception class."""


def error_for_code(code: int, message: str | None = None) -> BrokerError:
    """Build the exception for a broker error ``code``.

    Args:
        code: Kafka's numeric error code; must not be 0 (NONE).
        message: the broker's error message, if the response carried one.

    Returns:
        An instance of the matching :class:`BrokerError` subclass; for a code
        this client does not know (a broker newer than the client may send
        one), a plain :class:`BrokerError` whose ``code`` is that code, whose
        ``name`` is ``UNKNOWN_ERROR_CODE_<code>`` and whose message names it.

    Raises:
        TypeError: ``code`` is not an ``int``.
        ValueError: ``code`` is 0, which means "no error".
    """
    if not isinstance(code, int) or isinstance(code, bool):
        raise TypeError(f"a Kafka error code is an int, got {type(code).__name__} {code!r}")
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    cls = ERROR_CODES.get(code)
    if cls is None:
        text = (
            f"unknown broker error code {code}: not among the Kafka error codes this "
            "client knows (the broker may be newer than the client)"
        )
        err = BrokerError(f"{text}; broker message: {message}" if message else text)
        err.code = code
        err.name = f"UNKNOWN_ERROR_CODE_{code}"
        return err
    text = f"{cls.name} (error code {code})"
    return cls(f"{text}: {message}" if message else text)


#: Java's name for a SASL authentication failure (the broker's error code 58).
SaslAuthenticationError = SaslAuthenticationFailedError  # noqa: F405
