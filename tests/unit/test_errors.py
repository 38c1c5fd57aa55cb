"""The Kafka error-code table: complete, consistent, and matching Java's retriable flags."""

from __future__ import annotations

import pytest

from kafka_share import errors as e


def test_table_complete_and_consistent() -> None:
    codes = e.ERROR_CODES
    # -1 and 1..136 (NONE = 0 is not an error); Kafka 4.x has no gaps.
    assert set(codes) == {-1, *range(1, 137)}
    names = [cls.name for cls in codes.values()]
    assert len(names) == len(set(names))
    classes = list(codes.values())
    assert len({c.__name__ for c in classes}) == len(classes)
    for code, cls in codes.items():
        assert cls.code == code
        assert issubclass(cls, e.BrokerError)
        assert cls.__name__.endswith("Error")
        assert cls.name.isupper()
        assert cls.__name__ in e.__all__


@pytest.mark.parametrize(
    ("cls", "code", "name", "retriable"),
    [
        (e.UnknownServerError, -1, "UNKNOWN_SERVER_ERROR", False),
        (e.CorruptRecordError, 2, "CORRUPT_MESSAGE", True),
        (e.UnknownTopicOrPartitionError, 3, "UNKNOWN_TOPIC_OR_PARTITION", True),
        (e.NotLeaderOrFollowerError, 6, "NOT_LEADER_OR_FOLLOWER", True),
        (e.RequestTimedOutError, 7, "REQUEST_TIMED_OUT", True),
        (e.NetworkError, 13, "NETWORK_EXCEPTION", True),
        (e.CoordinatorLoadInProgressError, 14, "COORDINATOR_LOAD_IN_PROGRESS", True),
        (e.CoordinatorNotAvailableError, 15, "COORDINATOR_NOT_AVAILABLE", True),
        (e.NotCoordinatorError, 16, "NOT_COORDINATOR", True),
        (e.UnknownMemberIdError, 25, "UNKNOWN_MEMBER_ID", False),
        (e.TopicAuthorizationFailedError, 29, "TOPIC_AUTHORIZATION_FAILED", False),
        (e.GroupAuthorizationFailedError, 30, "GROUP_AUTHORIZATION_FAILED", False),
        (e.UnsupportedVersionError, 35, "UNSUPPORTED_VERSION", False),
        (e.InvalidRequestError, 42, "INVALID_REQUEST", False),
        (e.KafkaStorageError, 56, "KAFKA_STORAGE_ERROR", True),
        (e.FencedLeaderEpochError, 74, "FENCED_LEADER_EPOCH", True),
        (e.GroupMaxSizeReachedError, 81, "GROUP_MAX_SIZE_REACHED", False),
        (e.UnknownTopicIdError, 100, "UNKNOWN_TOPIC_ID", True),
        (e.FencedMemberEpochError, 110, "FENCED_MEMBER_EPOCH", False),
        (e.InvalidRecordStateError, 121, "INVALID_RECORD_STATE", False),
        (e.ShareSessionNotFoundError, 122, "SHARE_SESSION_NOT_FOUND", True),
        (e.InvalidShareSessionEpochError, 123, "INVALID_SHARE_SESSION_EPOCH", True),
        (e.FencedStateEpochError, 124, "FENCED_STATE_EPOCH", False),
        (e.ShareSessionLimitReachedError, 133, "SHARE_SESSION_LIMIT_REACHED", True),
    ],
)
def test_spot_checks_against_java(
    cls: type[e.BrokerError], code: int, name: str, retriable: bool
) -> None:
    assert (cls.code, cls.name, cls.retriable) == (code, name, retriable)
    assert e.ERROR_CODES[code] is cls


def test_error_for_code() -> None:
    err = e.error_for_code(122, "session gone")
    assert isinstance(err, e.ShareSessionNotFoundError)
    assert str(err) == "SHARE_SESSION_NOT_FOUND (error code 122): session gone"
    assert err.retriable
    assert str(e.error_for_code(6)) == "NOT_LEADER_OR_FOLLOWER (error code 6)"
    unknown = e.error_for_code(9999, "new")
    assert type(unknown) is e.BrokerError
    assert unknown.code == 9999 and "9999" in str(unknown)
    with pytest.raises(ValueError, match="NONE"):
        e.error_for_code(0)


def test_request_timed_out_is_also_a_timeout() -> None:
    err = e.error_for_code(7)
    assert isinstance(err, e.KafkaTimeoutError) and isinstance(err, TimeoutError)


def test_unsupported_version_client_side_message() -> None:
    err = e.UnsupportedVersionError("share groups need Kafka >= 4.1")
    assert str(err) == "share groups need Kafka >= 4.1" and err.code == 35
