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

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "ERROR_CODES",
    "BrokerError",
    "BrokerIdNotRegisteredError",
    "BrokerNotAvailableError",
    "ClusterAuthorizationFailedError",
    "ConcurrentTransactionsError",
    "ConfigError",
    "ControllerIdNotRegisteredError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptMessageError",
    "CorruptRecordError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DuplicateBrokerRegistrationError",
    "DuplicateResourceError",
    "DuplicateSequenceNumberError",
    "DuplicateVoterError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "FeatureUpdateFailedError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "FencedStateEpochError",
    "FetchSessionIdNotFoundError",
    "FetchSessionTopicIdError",
    "GroupAuthorizationFailedError",
    "GroupDeletionFailedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "IllegalStateError",
    "InconsistentClusterIdError",
    "InconsistentGroupProtocolError",
    "InconsistentTopicIdError",
    "InconsistentVoterSetError",
    "IneligibleReplicaError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigError",
    "InvalidFetchSessionEpochError",
    "InvalidFetchSizeError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidPrincipalTypeError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidRecordStateError",
    "InvalidRegistrationError",
    "InvalidRegularExpressionError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidShareSessionEpochError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "InvalidUpdateVersionError",
    "InvalidVoterKeyError",
    "KafkaError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "LeaderNotAvailableError",
    "ListenerNotFoundError",
    "LogDirNotFoundError",
    "MemberIdRequiredError",
    "MessageTooLargeError",
    "MismatchedEndpointTypeError",
    "NetworkError",
    "NewLeaderElectedError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetMetadataTooLargeError",
    "OffsetMovedToTieredStorageError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PolicyViolationError",
    "PositionOutOfRangeError",
    "PreferredLeaderNotAvailableError",
    "PrincipalDeserializationFailureError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "RebalanceInProgressError",
    "RebootstrapRequiredError",
    "RecordDeserializationError",
    "RecordListTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "ResourceNotFoundError",
    "SaslAuthenticationFailedError",
    "SecurityDisabledError",
    "ShareSessionLimitReachedError",
    "ShareSessionNotFoundError",
    "SnapshotNotFoundError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StaleMemberEpochError",
    "StreamsInvalidTopologyEpochError",
    "StreamsInvalidTopologyError",
    "StreamsTopologyDescriptionUpdateFailedError",
    "StreamsTopologyFencedError",
    "TelemetryTooLargeError",
    "ThrottlingQuotaExceededError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TopicDeletionDisabledError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "TransactionalIdNotFoundError",
    "UnacceptableCredentialError",
    "UnknownControllerIdError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownSubscriptionIdError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnreleasedInstanceIdError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedCompressionTypeError",
    "UnsupportedEndpointTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "VoterNotFoundError",
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


# One class per Kafka error code, transcribed from Java's Errors enum (Kafka 4.x):
# code, Kafka's name, and whether Java's exception is a RetriableException.

class UnknownServerError(BrokerError):
    """UNKNOWN_SERVER_ERROR (-1)."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    retriable = False


class OffsetOutOfRangeError(BrokerError):
    """OFFSET_OUT_OF_RANGE (1)."""

    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    retriable = False


class CorruptRecordError(BrokerError):
    """CORRUPT_MESSAGE (2)."""

    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True


class UnknownTopicOrPartitionError(BrokerError):
    """UNKNOWN_TOPIC_OR_PARTITION (3)."""

    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True


class InvalidFetchSizeError(BrokerError):
    """INVALID_FETCH_SIZE (4)."""

    code = 4
    name = "INVALID_FETCH_SIZE"
    retriable = False


class LeaderNotAvailableError(BrokerError):
    """LEADER_NOT_AVAILABLE (5)."""

    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True


class NotLeaderOrFollowerError(BrokerError):
    """NOT_LEADER_OR_FOLLOWER (6)."""

    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True


class RequestTimedOutError(BrokerError, KafkaTimeoutError):
    """REQUEST_TIMED_OUT (7)."""

    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True


class BrokerNotAvailableError(BrokerError):
    """BROKER_NOT_AVAILABLE (8)."""

    code = 8
    name = "BROKER_NOT_AVAILABLE"
    retriable = False


class ReplicaNotAvailableError(BrokerError):
    """REPLICA_NOT_AVAILABLE (9)."""

    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True


class MessageTooLargeError(BrokerError):
    """MESSAGE_TOO_LARGE (10)."""

    code = 10
    name = "MESSAGE_TOO_LARGE"
    retriable = False


class StaleControllerEpochError(BrokerError):
    """STALE_CONTROLLER_EPOCH (11)."""

    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    retriable = False


class OffsetMetadataTooLargeError(BrokerError):
    """OFFSET_METADATA_TOO_LARGE (12)."""

    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    retriable = False


class NetworkError(BrokerError):
    """NETWORK_EXCEPTION (13)."""

    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True


class CoordinatorLoadInProgressError(BrokerError):
    """COORDINATOR_LOAD_IN_PROGRESS (14)."""

    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True


class CoordinatorNotAvailableError(BrokerError):
    """COORDINATOR_NOT_AVAILABLE (15)."""

    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True


class NotCoordinatorError(BrokerError):
    """NOT_COORDINATOR (16)."""

    code = 16
    name = "NOT_COORDINATOR"
    retriable = True


class InvalidTopicError(BrokerError):
    """INVALID_TOPIC_EXCEPTION (17)."""

    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    retriable = False


class RecordListTooLargeError(BrokerError):
    """RECORD_LIST_TOO_LARGE (18)."""

    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    retriable = False


class NotEnoughReplicasError(BrokerError):
    """NOT_ENOUGH_REPLICAS (19)."""

    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True


class NotEnoughReplicasAfterAppendError(BrokerError):
    """NOT_ENOUGH_REPLICAS_AFTER_APPEND (20)."""

    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True


class InvalidRequiredAcksError(BrokerError):
    """INVALID_REQUIRED_ACKS (21)."""

    code = 21
    name = "INVALID_REQUIRED_ACKS"
    retriable = False


class IllegalGenerationError(BrokerError):
    """ILLEGAL_GENERATION (22)."""

    code = 22
    name = "ILLEGAL_GENERATION"
    retriable = False


class InconsistentGroupProtocolError(BrokerError):
    """INCONSISTENT_GROUP_PROTOCOL (23)."""

    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    retriable = False


class InvalidGroupIdError(BrokerError):
    """INVALID_GROUP_ID (24)."""

    code = 24
    name = "INVALID_GROUP_ID"
    retriable = False


class UnknownMemberIdError(BrokerError):
    """UNKNOWN_MEMBER_ID (25)."""

    code = 25
    name = "UNKNOWN_MEMBER_ID"
    retriable = False


class InvalidSessionTimeoutError(BrokerError):
    """INVALID_SESSION_TIMEOUT (26)."""

    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    retriable = False


class RebalanceInProgressError(BrokerError):
    """REBALANCE_IN_PROGRESS (27)."""

    code = 27
    name = "REBALANCE_IN_PROGRESS"
    retriable = False


class InvalidCommitOffsetSizeError(BrokerError):
    """INVALID_COMMIT_OFFSET_SIZE (28)."""

    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    retriable = False


class TopicAuthorizationFailedError(BrokerError):
    """TOPIC_AUTHORIZATION_FAILED (29)."""

    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    retriable = False


class GroupAuthorizationFailedError(BrokerError):
    """GROUP_AUTHORIZATION_FAILED (30)."""

    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    retriable = False


class ClusterAuthorizationFailedError(BrokerError):
    """CLUSTER_AUTHORIZATION_FAILED (31)."""

    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    retriable = False


class InvalidTimestampError(BrokerError):
    """INVALID_TIMESTAMP (32)."""

    code = 32
    name = "INVALID_TIMESTAMP"
    retriable = False


class UnsupportedSaslMechanismError(BrokerError):
    """UNSUPPORTED_SASL_MECHANISM (33)."""

    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    retriable = False


class IllegalSaslStateError(BrokerError):
    """ILLEGAL_SASL_STATE (34)."""

    code = 34
    name = "ILLEGAL_SASL_STATE"
    retriable = False


class UnsupportedVersionError(BrokerError):
    """UNSUPPORTED_VERSION (35)."""

    code = 35
    name = "UNSUPPORTED_VERSION"
    retriable = False


class TopicAlreadyExistsError(BrokerError):
    """TOPIC_ALREADY_EXISTS (36)."""

    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    retriable = False


class InvalidPartitionsError(BrokerError):
    """INVALID_PARTITIONS (37)."""

    code = 37
    name = "INVALID_PARTITIONS"
    retriable = False


class InvalidReplicationFactorError(BrokerError):
    """INVALID_REPLICATION_FACTOR (38)."""

    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    retriable = False


class InvalidReplicaAssignmentError(BrokerError):
    """INVALID_REPLICA_ASSIGNMENT (39)."""

    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"
    retriable = False


class InvalidConfigError(BrokerError):
    """INVALID_CONFIG (40)."""

    code = 40
    name = "INVALID_CONFIG"
    retriable = False


class NotControllerError(BrokerError):
    """NOT_CONTROLLER (41)."""

    code = 41
    name = "NOT_CONTROLLER"
    retriable = True


class InvalidRequestError(BrokerError):
    """INVALID_REQUEST (42)."""

    code = 42
    name = "INVALID_REQUEST"
    retriable = False


class UnsupportedForMessageFormatError(BrokerError):
    """UNSUPPORTED_FOR_MESSAGE_FORMAT (43)."""

    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    retriable = False


class PolicyViolationError(BrokerError):
    """POLICY_VIOLATION (44)."""

    code = 44
    name = "POLICY_VIOLATION"
    retriable = False


class OutOfOrderSequenceNumberError(BrokerError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER (45)."""

    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    retriable = False


class DuplicateSequenceNumberError(BrokerError):
    """DUPLICATE_SEQUENCE_NUMBER (46)."""

    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    retriable = False


class InvalidProducerEpochError(BrokerError):
    """INVALID_PRODUCER_EPOCH (47)."""

    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    retriable = False


class InvalidTxnStateError(BrokerError):
    """INVALID_TXN_STATE (48)."""

    code = 48
    name = "INVALID_TXN_STATE"
    retriable = False


class InvalidProducerIdMappingError(BrokerError):
    """INVALID_PRODUCER_ID_MAPPING (49)."""

    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    retriable = False


class InvalidTransactionTimeoutError(BrokerError):
    """INVALID_TRANSACTION_TIMEOUT (50)."""

    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    retriable = False


class ConcurrentTransactionsError(BrokerError):
    """CONCURRENT_TRANSACTIONS (51)."""

    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = True


class TransactionCoordinatorFencedError(BrokerError):
    """TRANSACTION_COORDINATOR_FENCED (52)."""

    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    retriable = False


class TransactionalIdAuthorizationFailedError(BrokerError):
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53)."""

    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    retriable = False


class SecurityDisabledError(BrokerError):
    """SECURITY_DISABLED (54)."""

    code = 54
    name = "SECURITY_DISABLED"
    retriable = False


class OperationNotAttemptedError(BrokerError):
    """OPERATION_NOT_ATTEMPTED (55)."""

    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    retriable = False


class KafkaStorageError(BrokerError):
    """KAFKA_STORAGE_ERROR (56)."""

    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True


class LogDirNotFoundError(BrokerError):
    """LOG_DIR_NOT_FOUND (57)."""

    code = 57
    name = "LOG_DIR_NOT_FOUND"
    retriable = False


class SaslAuthenticationFailedError(BrokerError):
    """SASL_AUTHENTICATION_FAILED (58)."""

    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    retriable = False


class UnknownProducerIdError(BrokerError):
    """UNKNOWN_PRODUCER_ID (59)."""

    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    retriable = False


class ReassignmentInProgressError(BrokerError):
    """REASSIGNMENT_IN_PROGRESS (60)."""

    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    retriable = False


class DelegationTokenAuthDisabledError(BrokerError):
    """DELEGATION_TOKEN_AUTH_DISABLED (61)."""

    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    retriable = False


class DelegationTokenNotFoundError(BrokerError):
    """DELEGATION_TOKEN_NOT_FOUND (62)."""

    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    retriable = False


class DelegationTokenOwnerMismatchError(BrokerError):
    """DELEGATION_TOKEN_OWNER_MISMATCH (63)."""

    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    retriable = False


class DelegationTokenRequestNotAllowedError(BrokerError):
    """DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64)."""

    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    retriable = False


class DelegationTokenAuthorizationFailedError(BrokerError):
    """DELEGATION_TOKEN_AUTHORIZATION_FAILED (65)."""

    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    retriable = False


class DelegationTokenExpiredError(BrokerError):
    """DELEGATION_TOKEN_EXPIRED (66)."""

    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    retriable = False


class InvalidPrincipalTypeError(BrokerError):
    """INVALID_PRINCIPAL_TYPE (67)."""

    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    retriable = False


class NonEmptyGroupError(BrokerError):
    """NON_EMPTY_GROUP (68)."""

    code = 68
    name = "NON_EMPTY_GROUP"
    retriable = False


class GroupIdNotFoundError(BrokerError):
    """GROUP_ID_NOT_FOUND (69)."""

    code = 69
    name = "GROUP_ID_NOT_FOUND"
    retriable = False


class FetchSessionIdNotFoundError(BrokerError):
    """FETCH_SESSION_ID_NOT_FOUND (70)."""

    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True


class InvalidFetchSessionEpochError(BrokerError):
    """INVALID_FETCH_SESSION_EPOCH (71)."""

    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True


class ListenerNotFoundError(BrokerError):
    """LISTENER_NOT_FOUND (72)."""

    code = 72
    name = "LISTENER_NOT_FOUND"
    retriable = True


class TopicDeletionDisabledError(BrokerError):
    """TOPIC_DELETION_DISABLED (73)."""

    code = 73
    name = "TOPIC_DELETION_DISABLED"
    retriable = False


class FencedLeaderEpochError(BrokerError):
    """FENCED_LEADER_EPOCH (74)."""

    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True


class UnknownLeaderEpochError(BrokerError):
    """UNKNOWN_LEADER_EPOCH (75)."""

    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True


class UnsupportedCompressionTypeError(BrokerError):
    """UNSUPPORTED_COMPRESSION_TYPE (76)."""

    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    retriable = False


class StaleBrokerEpochError(BrokerError):
    """STALE_BROKER_EPOCH (77)."""

    code = 77
    name = "STALE_BROKER_EPOCH"
    retriable = False


class OffsetNotAvailableError(BrokerError):
    """OFFSET_NOT_AVAILABLE (78)."""

    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    retriable = True


class MemberIdRequiredError(BrokerError):
    """MEMBER_ID_REQUIRED (79)."""

    code = 79
    name = "MEMBER_ID_REQUIRED"
    retriable = False


class PreferredLeaderNotAvailableError(BrokerError):
    """PREFERRED_LEADER_NOT_AVAILABLE (80)."""

    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True


class GroupMaxSizeReachedError(BrokerError):
    """GROUP_MAX_SIZE_REACHED (81)."""

    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    retriable = False


class FencedInstanceIdError(BrokerError):
    """FENCED_INSTANCE_ID (82)."""

    code = 82
    name = "FENCED_INSTANCE_ID"
    retriable = False


class EligibleLeadersNotAvailableError(BrokerError):
    """ELIGIBLE_LEADERS_NOT_AVAILABLE (83)."""

    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True


class ElectionNotNeededError(BrokerError):
    """ELECTION_NOT_NEEDED (84)."""

    code = 84
    name = "ELECTION_NOT_NEEDED"
    retriable = True


class NoReassignmentInProgressError(BrokerError):
    """NO_REASSIGNMENT_IN_PROGRESS (85)."""

    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    retriable = False


class GroupSubscribedToTopicError(BrokerError):
    """GROUP_SUBSCRIBED_TO_TOPIC (86)."""

    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    retriable = False


class InvalidRecordError(BrokerError):
    """INVALID_RECORD (87)."""

    code = 87
    name = "INVALID_RECORD"
    retriable = False


class UnstableOffsetCommitError(BrokerError):
    """UNSTABLE_OFFSET_COMMIT (88)."""

    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True


class ThrottlingQuotaExceededError(BrokerError):
    """THROTTLING_QUOTA_EXCEEDED (89)."""

    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True


class ProducerFencedError(BrokerError):
    """PRODUCER_FENCED (90)."""

    code = 90
    name = "PRODUCER_FENCED"
    retriable = False


class ResourceNotFoundError(BrokerError):
    """RESOURCE_NOT_FOUND (91)."""

    code = 91
    name = "RESOURCE_NOT_FOUND"
    retriable = False


class DuplicateResourceError(BrokerError):
    """DUPLICATE_RESOURCE (92)."""

    code = 92
    name = "DUPLICATE_RESOURCE"
    retriable = False


class UnacceptableCredentialError(BrokerError):
    """UNACCEPTABLE_CREDENTIAL (93)."""

    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    retriable = False


class InconsistentVoterSetError(BrokerError):
    """INCONSISTENT_VOTER_SET (94)."""

    code = 94
    name = "INCONSISTENT_VOTER_SET"
    retriable = False


class InvalidUpdateVersionError(BrokerError):
    """INVALID_UPDATE_VERSION (95)."""

    code = 95
    name = "INVALID_UPDATE_VERSION"
    retriable = False


class FeatureUpdateFailedError(BrokerError):
    """FEATURE_UPDATE_FAILED (96)."""

    code = 96
    name = "FEATURE_UPDATE_FAILED"
    retriable = False


class PrincipalDeserializationFailureError(BrokerError):
    """PRINCIPAL_DESERIALIZATION_FAILURE (97)."""

    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    retriable = False


class SnapshotNotFoundError(BrokerError):
    """SNAPSHOT_NOT_FOUND (98)."""

    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    retriable = False


class PositionOutOfRangeError(BrokerError):
    """POSITION_OUT_OF_RANGE (99)."""

    code = 99
    name = "POSITION_OUT_OF_RANGE"
    retriable = False


class UnknownTopicIdError(BrokerError):
    """UNKNOWN_TOPIC_ID (100)."""

    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True


class DuplicateBrokerRegistrationError(BrokerError):
    """DUPLICATE_BROKER_REGISTRATION (101)."""

    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    retriable = False


class BrokerIdNotRegisteredError(BrokerError):
    """BROKER_ID_NOT_REGISTERED (102)."""

    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    retriable = False


class InconsistentTopicIdError(BrokerError):
    """INCONSISTENT_TOPIC_ID (103)."""

    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    retriable = True


class InconsistentClusterIdError(BrokerError):
    """INCONSISTENT_CLUSTER_ID (104)."""

    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    retriable = False


class TransactionalIdNotFoundError(BrokerError):
    """TRANSACTIONAL_ID_NOT_FOUND (105)."""

    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"
    retriable = False


class FetchSessionTopicIdError(BrokerError):
    """FETCH_SESSION_TOPIC_ID_ERROR (106)."""

    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True


class IneligibleReplicaError(BrokerError):
    """INELIGIBLE_REPLICA (107)."""

    code = 107
    name = "INELIGIBLE_REPLICA"
    retriable = False


class NewLeaderElectedError(BrokerError):
    """NEW_LEADER_ELECTED (108)."""

    code = 108
    name = "NEW_LEADER_ELECTED"
    retriable = False


class OffsetMovedToTieredStorageError(BrokerError):
    """OFFSET_MOVED_TO_TIERED_STORAGE (109)."""

    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"
    retriable = False


class FencedMemberEpochError(BrokerError):
    """FENCED_MEMBER_EPOCH (110)."""

    code = 110
    name = "FENCED_MEMBER_EPOCH"
    retriable = False


class UnreleasedInstanceIdError(BrokerError):
    """UNRELEASED_INSTANCE_ID (111)."""

    code = 111
    name = "UNRELEASED_INSTANCE_ID"
    retriable = False


class UnsupportedAssignorError(BrokerError):
    """UNSUPPORTED_ASSIGNOR (112)."""

    code = 112
    name = "UNSUPPORTED_ASSIGNOR"
    retriable = False


class StaleMemberEpochError(BrokerError):
    """STALE_MEMBER_EPOCH (113)."""

    code = 113
    name = "STALE_MEMBER_EPOCH"
    retriable = False


class MismatchedEndpointTypeError(BrokerError):
    """MISMATCHED_ENDPOINT_TYPE (114)."""

    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"
    retriable = False


class UnsupportedEndpointTypeError(BrokerError):
    """UNSUPPORTED_ENDPOINT_TYPE (115)."""

    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"
    retriable = False


class UnknownControllerIdError(BrokerError):
    """UNKNOWN_CONTROLLER_ID (116)."""

    code = 116
    name = "UNKNOWN_CONTROLLER_ID"
    retriable = False


class UnknownSubscriptionIdError(BrokerError):
    """UNKNOWN_SUBSCRIPTION_ID (117)."""

    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"
    retriable = False


class TelemetryTooLargeError(BrokerError):
    """TELEMETRY_TOO_LARGE (118)."""

    code = 118
    name = "TELEMETRY_TOO_LARGE"
    retriable = False


class InvalidRegistrationError(BrokerError):
    """INVALID_REGISTRATION (119)."""

    code = 119
    name = "INVALID_REGISTRATION"
    retriable = False


class TransactionAbortableError(BrokerError):
    """TRANSACTION_ABORTABLE (120)."""

    code = 120
    name = "TRANSACTION_ABORTABLE"
    retriable = False


class InvalidRecordStateError(BrokerError):
    """INVALID_RECORD_STATE (121)."""

    code = 121
    name = "INVALID_RECORD_STATE"
    retriable = False


class ShareSessionNotFoundError(BrokerError):
    """SHARE_SESSION_NOT_FOUND (122)."""

    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    retriable = True


class InvalidShareSessionEpochError(BrokerError):
    """INVALID_SHARE_SESSION_EPOCH (123)."""

    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    retriable = True


class FencedStateEpochError(BrokerError):
    """FENCED_STATE_EPOCH (124)."""

    code = 124
    name = "FENCED_STATE_EPOCH"
    retriable = False


class InvalidVoterKeyError(BrokerError):
    """INVALID_VOTER_KEY (125)."""

    code = 125
    name = "INVALID_VOTER_KEY"
    retriable = False


class DuplicateVoterError(BrokerError):
    """DUPLICATE_VOTER (126)."""

    code = 126
    name = "DUPLICATE_VOTER"
    retriable = False


class VoterNotFoundError(BrokerError):
    """VOTER_NOT_FOUND (127)."""

    code = 127
    name = "VOTER_NOT_FOUND"
    retriable = False


class InvalidRegularExpressionError(BrokerError):
    """INVALID_REGULAR_EXPRESSION (128)."""

    code = 128
    name = "INVALID_REGULAR_EXPRESSION"
    retriable = False


class RebootstrapRequiredError(BrokerError):
    """REBOOTSTRAP_REQUIRED (129)."""

    code = 129
    name = "REBOOTSTRAP_REQUIRED"
    retriable = False


class StreamsInvalidTopologyError(BrokerError):
    """STREAMS_INVALID_TOPOLOGY (130)."""

    code = 130
    name = "STREAMS_INVALID_TOPOLOGY"
    retriable = False


class StreamsInvalidTopologyEpochError(BrokerError):
    """STREAMS_INVALID_TOPOLOGY_EPOCH (131)."""

    code = 131
    name = "STREAMS_INVALID_TOPOLOGY_EPOCH"
    retriable = False


class StreamsTopologyFencedError(BrokerError):
    """STREAMS_TOPOLOGY_FENCED (132)."""

    code = 132
    name = "STREAMS_TOPOLOGY_FENCED"
    retriable = False


class ShareSessionLimitReachedError(BrokerError):
    """SHARE_SESSION_LIMIT_REACHED (133)."""

    code = 133
    name = "SHARE_SESSION_LIMIT_REACHED"
    retriable = True


class GroupDeletionFailedError(BrokerError):
    """GROUP_DELETION_FAILED (134)."""

    code = 134
    name = "GROUP_DELETION_FAILED"
    retriable = False


class StreamsTopologyDescriptionUpdateFailedError(BrokerError):
    """STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED (135)."""

    code = 135
    name = "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED"
    retriable = False


class ControllerIdNotRegisteredError(BrokerError):
    """CONTROLLER_ID_NOT_REGISTERED (136)."""

    code = 136
    name = "CONTROLLER_ID_NOT_REGISTERED"
    retriable = False


def _build_table() -> Mapping[int, type[BrokerError]]:
    table: dict[int, type[BrokerError]] = {}
    stack: list[type[BrokerError]] = list(BrokerError.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__ == __name__ and "code" in cls.__dict__:
            table[cls.code] = cls
    return MappingProxyType(dict(sorted(table.items())))


ERROR_CODES: Mapping[int, type[BrokerError]] = _build_table()
"""Every known Kafka error code (except 0, NONE) mapped to its exception class."""


def error_for_code(code: int, message: str | None = None) -> BrokerError:
    """Build the exception for a broker error ``code``.

    Args:
        code: Kafka's numeric error code; must not be 0 (NONE).
        message: the broker's error message, if the response carried one.

    Returns:
        An instance of the matching :class:`BrokerError` subclass; for a code
        this client does not know, a plain :class:`BrokerError` whose ``code``
        is the unknown code and whose message names it.

    Raises:
        ValueError: ``code`` is 0, which means "no error".
    """
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    cls = ERROR_CODES.get(code)
    if cls is None:
        text = f"unknown broker error code {code}"
        err = BrokerError(f"{text}: {message}" if message else text)
        err.code = code
        err.name = f"UNKNOWN_ERROR_CODE_{code}"
        return err
    text = f"{cls.name} (error code {code})"
    return cls(f"{text}: {message}" if message else text)
