"""API keys, the versions this client speaks, and negotiation against a broker.

:class:`ApiVersionsTable` is built from the broker's ApiVersionsResponse and
answers "which version of API X do we use on this connection" (the highest
version both sides support). Share-group APIs get a dedicated error: Kafka
4.0 only offered an incompatible early-access v0, and 4.1+ brokers need the
``share.version`` feature enabled.

ApiVersions negotiation (KIP-511): the client sends its highest ApiVersions
version (:data:`API_VERSIONS_FIRST_VERSION`). A broker that does not know that
version answers UNSUPPORTED_VERSION (35), normally with a *v0-format* body
listing the ApiVersions versions it supports;
:class:`~kafka_share.protocol.codec.KafkaCodec` reads what it can of that body
(:func:`~kafka_share.protocol.codec.decode_api_versions_unsupported`), and
:func:`api_versions_retry_version` picks the version to retry at, or raises
when there is none.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kafka_share.errors import UnsupportedVersionError
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import ApiVersionsResponse

__all__ = [
    "API_VERSIONS_FIRST_VERSION",
    "CLIENT_VERSIONS",
    "SHARE_API_KEYS",
    "ApiKey",
    "ApiVersionsTable",
    "api_versions_retry_version",
]


class ApiKey(enum.IntEnum):
    """Kafka API keys used by this client (Kafka's ``ApiKeys`` names)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_CLUSTER = 60
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


CLIENT_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {
    ApiKey.METADATA: (0, 13),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    # v5 (KIP-1242 cluster-id checks) is not used: it needs the cluster id up front.
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    # Client telemetry (KIP-714), when enable.metrics.push is on.
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0),
    # Admin APIs (kafka_share.admin).
    ApiKey.LIST_OFFSETS: (1, 8),
    # Plain Fetch, only to read given offsets back (Admin.read_log).
    ApiKey.FETCH: (12, 16),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.CREATE_TOPICS: (2, 4),
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    # The multi-group form; only to read a consumer group's committed offsets.
    ApiKey.OFFSET_FETCH: (8, 8),
}
"""(min, max) version of every API this client can encode and decode."""

API_VERSIONS_FIRST_VERSION = CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
"""The ApiVersions version to send first on a new connection."""

SHARE_API_KEYS = frozenset(
    {
        ApiKey.SHARE_GROUP_HEARTBEAT,
        ApiKey.SHARE_GROUP_DESCRIBE,
        ApiKey.SHARE_FETCH,
        ApiKey.SHARE_ACKNOWLEDGE,
    }
)
"""The share-group RPCs (KIP-932); v0 was Kafka 4.0 early access and is refused."""

SHARE_VERSION_FEATURE = "share.version"

_SHARE_HINT = (
    "share groups need Apache Kafka >= 4.1 with the share.version feature >= 1 enabled "
    "(e.g. `kafka-features.sh --bootstrap-server HOST:PORT upgrade --feature share.version=1`)"
)


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API {api_key}"


class ApiVersionsTable:
    """Versions negotiated with one broker, from its ApiVersionsResponse.

    Args:
        broker_versions: API key -> (min, max) the broker advertised.
        finalized_features: feature name -> finalized max version level.
        client_versions: what this client supports (defaults to :data:`CLIENT_VERSIONS`).
    """

    def __init__(
        self,
        broker_versions: Mapping[int, tuple[int, int]],
        finalized_features: Mapping[str, int] | None = None,
        client_versions: Mapping[ApiKey, tuple[int, int]] = CLIENT_VERSIONS,
    ) -> None:
        self.broker_versions: dict[int, tuple[int, int]] = dict(broker_versions)
        self.finalized_features: dict[str, int] = dict(finalized_features or {})
        self._client: dict[int, tuple[int, int]] = {int(k): v for k, v in client_versions.items()}

    @classmethod
    def from_response(cls, response: ApiVersionsResponse) -> ApiVersionsTable:
        """Build the table from a successful ApiVersionsResponse.

        Raises:
            UnsupportedVersionError: the response carries an error code (e.g. 35,
                which calls for a retry; see :func:`api_versions_retry_version`).
        """
        if response.error_code != 0:
            raise UnsupportedVersionError(
                f"ApiVersions failed with error code {response.error_code}; "
                "cannot negotiate API versions"
            )
        broker = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        # Finalized features are only meaningful when the epoch is known (>= 0).
        features = (
            {f.name: f.max_version_level for f in response.finalized_features}
            if response.finalized_features_epoch >= 0 or response.finalized_features
            else {}
        )
        return cls(broker, features)

    def max_version(self, api_key: int) -> int | None:
        """Highest version both sides support, or ``None`` when there is none."""
        client = self._client.get(api_key)
        broker = self.broker_versions.get(api_key)
        if client is None or broker is None:
            return None
        hi = min(client[1], broker[1])
        return hi if hi >= max(client[0], broker[0]) else None

    def supports(self, api_key: int, version: int) -> bool:
        """Whether both sides support ``version`` of ``api_key``."""
        client = self._client.get(api_key)
        broker = self.broker_versions.get(api_key)
        if client is None or broker is None:
            return False
        return max(client[0], broker[0]) <= version <= min(client[1], broker[1])

    def version_for(self, api_key: int) -> int:
        """The version to use for ``api_key``: the highest common one.

        Raises:
            UnsupportedVersionError: no common version; the message names the
                API and both ranges. For share-group APIs it explains that
                Kafka >= 4.1 with ``share.version`` >= 1 is needed.
        """
        v = self.max_version(api_key)
        if v is not None:
            return v
        name = _api_name(api_key)
        client = self._client.get(api_key)
        broker = self.broker_versions.get(api_key)
        client_txt = f"v{client[0]}-v{client[1]}" if client else "none (not implemented)"
        broker_txt = f"v{broker[0]}-v{broker[1]}" if broker else "none (not advertised)"
        text = f"{name}: no common version (client supports {client_txt}, broker {broker_txt})"
        if api_key in SHARE_API_KEYS:
            if broker is not None and broker[1] < 1:
                text += "; the broker only offers the Kafka 4.0 early-access v0"
            text += f"; {_SHARE_HINT}"
        raise UnsupportedVersionError(text)


def api_versions_retry_version(response: ApiVersionsResponse, sent_version: int) -> int | None:
    """Decide whether (and at which version) to resend ApiVersions.

    A broker that does not support the ApiVersions version we sent answers
    UNSUPPORTED_VERSION (35), listing its own ApiVersions range when the
    codec could read it (KIP-511; see
    :func:`~kafka_share.protocol.codec.decode_api_versions_unsupported`).
    Retry at the highest version both sides support and below
    ``sent_version`` (so negotiation always terminates), or at v0 when no
    range could be read, as Java does.

    Returns:
        The version to retry at, or ``None`` when no retry is called for (no
        error, or another error).

    Raises:
        UnsupportedVersionError: there is no version left to try: the broker
            rejected v0, or the range it lists has nothing in common with the
            client's. The message names both ranges.
    """
    if response.error_code != ErrorCode.UNSUPPORTED_VERSION:
        return None
    client_min, client_max = CLIENT_VERSIONS[ApiKey.API_VERSIONS]
    client_txt = f"v{client_min}-v{client_max}"
    if sent_version <= client_min:
        raise UnsupportedVersionError(
            f"the broker rejected ApiVersions v{sent_version}, the lowest version this client "
            f"speaks ({client_txt}); cannot negotiate API versions"
        )
    for k in response.api_keys:
        if k.api_key == ApiKey.API_VERSIONS:
            retry = min(k.max_version, client_max, sent_version - 1)
            if retry < max(k.min_version, client_min):
                raise UnsupportedVersionError(
                    f"ApiVersions: no common version (broker supports "
                    f"v{k.min_version}-v{k.max_version}, client {client_txt}); "
                    "cannot negotiate API versions"
                )
            return retry
    return client_min
