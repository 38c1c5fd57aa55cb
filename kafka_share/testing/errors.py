"""Errors raised by the broker harness.

All of them derive from :class:`kafka_share.errors.KafkaError`, so a test
suite can catch one base class. Each message says what failed and what to do.
"""

from __future__ import annotations

from kafka_share.errors import KafkaError

__all__ = [
    "BrokerStartError",
    "HarnessError",
    "JavaNotFoundError",
    "MavenError",
    "UnsupportedKafkaVersionError",
    "UnsupportedOperationError",
]


class HarnessError(KafkaError):
    """Base class of every error raised by :mod:`kafka_share.testing`."""


class JavaNotFoundError(HarnessError):
    """No ``java`` on PATH, or it is older than Java 17."""


class MavenError(HarnessError):
    """``mvn`` is missing, or resolving the broker jars from Maven Central failed."""


class UnsupportedKafkaVersionError(HarnessError, ValueError):
    """The requested Kafka version cannot run share groups (e.g. 4.0.x) or is malformed."""


class BrokerStartError(HarnessError):
    """A broker process died, or never answered within the start timeout.

    The message ends with the last lines of the broker's log.
    """


class UnsupportedOperationError(HarnessError):
    """The backend cannot do this (e.g. killing a node of an external cluster)."""
