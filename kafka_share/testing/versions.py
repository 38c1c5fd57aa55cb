"""Kafka version parsing and what each 4.x release needs to run share groups."""

from __future__ import annotations

import re
from typing import NamedTuple

from kafka_share.testing.errors import UnsupportedKafkaVersionError

__all__ = ["DEFAULT_KAFKA_VERSION", "KafkaVersion", "parse_kafka_version"]

#: The Kafka release the harness runs unless told otherwise
#: (``KAFKA_SHARE_KAFKA_VERSION`` or ``kafka_version=``).
DEFAULT_KAFKA_VERSION = "4.4.0"

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


class KafkaVersion(NamedTuple):
    """A parsed ``major.minor.patch`` Apache Kafka release number."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def share_on_by_default(self) -> bool:
        """Whether a freshly formatted cluster gets ``share.version=1`` by itself.

        From 4.2 on the latest production metadata version implies share.version 1;
        on 4.1 it must be asked for at format time (``--feature share.version=1``).
        """
        return (self.major, self.minor) >= (4, 2)

    @property
    def max_share_version(self) -> int:
        """The highest ``share.version`` feature level the release can run.

        2 (share-group dead-letter queues, KIP-1191) from 4.4 on, else 1.
        """
        return 2 if (self.major, self.minor) >= (4, 4) else 1

    def check_share_version(self, level: int) -> int:
        """``level`` if this release can format a cluster at that ``share.version``.

        Raises:
            UnsupportedKafkaVersionError: the release has no such level.
        """
        if not 0 <= level <= self.max_share_version:
            raise UnsupportedKafkaVersionError(
                f"share.version={level} is not a level Kafka {self} has (0 to "
                f"{self.max_share_version}; share.version=2, dead-letter queues, needs Kafka "
                "4.4.0 or newer)"
            )
        return level


def parse_kafka_version(text: str) -> KafkaVersion:
    """Parse and validate a Kafka release number such as ``"4.4.0"``.

    Raises :class:`UnsupportedKafkaVersionError` for malformed strings and for
    releases whose share-group protocol this project cannot speak: anything
    before 4.1 (4.0 only has the early-access, unstable v0 share RPCs).
    """
    match = _VERSION_RE.match(text.strip())
    if match is None:
        raise UnsupportedKafkaVersionError(
            f"Kafka version {text!r} is not a release number like '4.4.0' "
            "(set KAFKA_SHARE_KAFKA_VERSION to major.minor.patch)"
        )
    version = KafkaVersion(*(int(part) for part in match.groups()))
    if version.major < 4:
        raise UnsupportedKafkaVersionError(
            f"Kafka {version} has no share groups (KIP-932); use Kafka 4.1.0 or newer"
        )
    if (version.major, version.minor) == (4, 0):
        raise UnsupportedKafkaVersionError(
            f"Kafka {version} only has the early-access share-group protocol (unstable v0 "
            "RPCs) that 4.1+ clients cannot talk to; use Kafka 4.1.0 or newer"
        )
    return version
