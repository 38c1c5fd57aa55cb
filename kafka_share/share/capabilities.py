"""What the cluster's share protocol can do: one value, derived from the
negotiated versions, and the one place that says a feature is missing.

Kafka 4.1 speaks the v1 share protocol (ShareFetch/ShareAcknowledge v1);
Kafka 4.2+ adds v2: RENEW acknowledgements (KIP-1222) and
``share.acquire.mode=record_limit`` (KIP-1206). Both are *ignorable* or new
fields, so encoding them at v1 would silently drop them: a RENEW would become
nothing and a record_limit fetch a batch_optimized one. Every check therefore
goes through :meth:`ShareCapabilities.require`, which raises the same clear
:class:`~kafka_share.errors.UnsupportedVersionError` wherever it is asked: in
the facade before an acknowledgement is recorded, in the engine before a
request is built, and at encode time against the version a connection
negotiated (a cluster in a rolling upgrade can have both).
"""

from __future__ import annotations

import enum

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import UnsupportedVersionError

__all__ = ["ShareCapabilities", "ShareFeature"]


class ShareFeature(enum.Enum):
    """A share-protocol feature that needs v2 (Apache Kafka 4.2+)."""

    RENEW = "AcknowledgeType.RENEW"
    RECORD_LIMIT = "share.acquire.mode=record_limit"
    #: renewing locks from the network thread (sends RENEW acknowledgements)
    AUTO_RENEW = "share.auto.renew=true"

    @property
    def advice(self) -> str:
        if self is ShareFeature.RECORD_LIMIT:
            return "Use batch_optimized or upgrade the cluster."
        if self is ShareFeature.AUTO_RENEW:
            return (
                "Set share.auto.renew=false (and keep processing within the group's "
                "share.record.lock.duration.ms) or upgrade the cluster."
            )
        return "Acknowledge with ACCEPT or RELEASE instead, or upgrade the cluster."


#: The first ShareFetch/ShareAcknowledge version with RENEW and record_limit.
_V2 = 2


@attrs_repr
@attrs.frozen(repr=False)
class ShareCapabilities:
    """The share protocol version a broker negotiated (``ShareFetch`` max version)."""

    share_fetch_version: int

    def supports(self, feature: ShareFeature) -> bool:
        del feature  # every feature so far arrived with v2
        return self.share_fetch_version >= _V2

    def require(self, feature: ShareFeature) -> None:
        """Raise a clear error if ``feature`` cannot be used with this broker."""
        if not self.supports(feature):
            raise UnsupportedVersionError(
                f"{feature.value} needs the v2 share protocol (ShareFetch/ShareAcknowledge "
                f"v2, Apache Kafka 4.2+); the broker only supports "
                f"v{self.share_fetch_version}. {feature.advice}"
            )
