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

The top of the tree is written by hand (in ``_error_base``). The per-code classes
are generated from the table ``errors.toml`` (one row per code: Kafka's name, the class, Java's
exception, retriable) by ``tools/gen_errors.py`` into ``_error_codes.py``, and
re-exported from this module, which is where to import them from.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# The hand-written base classes, and one class per Kafka error code generated
# from the table errors.toml by tools/gen_errors.py.
from kafka_share import _error_codes
from kafka_share._error_base import (
    AuthenticationError,
    BrokerError,
    ConfigError,
    CorruptMessageError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    RecordDeserializationError,
    SslAuthenticationError,
    WakeupError,
)
from kafka_share._error_codes import *  # noqa: F403

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
