"""What the consume manager does with the error codes of share responses."""

from __future__ import annotations

from kafka_share.errors import KafkaError, NetworkError, UnsupportedVersionError, error_for_code
from kafka_share.protocol.error_codes import ErrorCode

__all__ = [
    "LEADER_MOVED",
    "NO_RETRY",
    "REFRESH_METADATA_ERRORS",
    "TOPIC_ID_ERRORS",
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
