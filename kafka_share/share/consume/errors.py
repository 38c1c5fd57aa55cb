"""What the consume manager does with the error codes of share responses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka_share.cluster import BrokerInfo, ClusterMetadata, PartitionLeader
from kafka_share.errors import KafkaError, NetworkError, UnsupportedVersionError, error_for_code
from kafka_share.protocol.error_codes import ErrorCode

__all__ = [
    "LEADER_MOVED",
    "NO_RETRY",
    "REFRESH_METADATA_ERRORS",
    "TOPIC_ID_ERRORS",
    "apply_leader_hints",
    "retriable",
    "session_lost",
    "transport_failure",
]

REFRESH_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)
#: The partition's topic id is not (or no longer) the topic's: forget it.
TOPIC_ID_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              ErrorCode.INCONSISTENT_TOPIC_ID})
#: The partition's leader moved: the response may name the new one.
LEADER_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
#: Partition errors that are never retried: the locks are gone or the topic is.
NO_RETRY = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INVALID_RECORD_STATE,
    }
)


def retriable(code: int) -> bool:
    if code in NO_RETRY:
        return False
    return error_for_code(code).retriable


def session_lost(node_id: int) -> NetworkError:
    return NetworkError(
        f"the share session with node {node_id} was lost (disconnect or broker restart); "
        "the acknowledgements could not be sent and the records will be redelivered after "
        "their acquisition lock expires"
    )


def transport_failure(node_id: int, error: KafkaError) -> KafkaError:
    if isinstance(error, NetworkError | UnsupportedVersionError):
        return error
    err = NetworkError(f"request to node {node_id} failed: {error}")
    err.__cause__ = error
    return err


def apply_leader_hints(
    cluster: ClusterMetadata, topics: Iterable[Any], endpoints: Iterable[Any],
) -> None:
    """Take the new leaders a share response names for its partitions whose
    leader moved (KIP-951's CurrentLeader and NodeEndpoints)."""
    brokers = [BrokerInfo(e.node_id, e.host, e.port, e.rack) for e in endpoints]
    for topic in topics:
        name = cluster.topic_names.get(topic.topic_id)
        for p in topic.partitions:
            if p.error_code in LEADER_MOVED and name is not None:
                leader = p.current_leader
                cluster.update_leader(
                    name,
                    p.partition_index,
                    PartitionLeader(leader.leader_id, leader.leader_epoch),
                    brokers,
                )
