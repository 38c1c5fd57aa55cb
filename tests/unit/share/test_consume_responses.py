"""Share responses read into plain outcomes (share/consume/responses.py)."""

from __future__ import annotations

import uuid

from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import ShareAcknowledgeResponse, ShareFetchResponse
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.consume.responses import read_acknowledge, read_fetch

T1, T2, T3 = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
P = ShareFetchResponse.PartitionData
R = ShareFetchResponse.AcquiredRecords
AR = ShareAcknowledgeResponse


def _acks(*offsets: int) -> Acknowledgements:
    a = Acknowledgements()
    for o in offsets:
        a.add(o, AcknowledgeType.ACCEPT)
    return a


def test_a_fetch_is_read_per_partition_in_the_response_order() -> None:
    a0, a9 = _acks(1), _acks(2)
    tip0, tip1 = TopicIdPartition(T1, "one", 0), TopicIdPartition(T1, "one", 1)
    tip9 = TopicIdPartition(T2, "two", 9)  # acknowledged, never answered
    response = ShareFetchResponse(responses=[
        ShareFetchResponse.ShareFetchableTopicResponse(topic_id=T1, partitions=[
            P(partition_index=1, records=b"bytes",
              acquired_records=[R(first_offset=5, last_offset=7, delivery_count=2)]),
            P(partition_index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
              acknowledge_error_code=ErrorCode.INVALID_RECORD_STATE,
              acknowledge_error_message="gone"),
        ]),
        # a topic named neither when the request went out nor now: skipped
        ShareFetchResponse.ShareFetchableTopicResponse(topic_id=T3, partitions=[P()]),
    ])
    answer = read_fetch(response, {tip0: a0, tip9: a9}, {}, {T1: "one"})
    first, second = answer.partitions
    assert (first.partition, first.acks, first.error_code, first.records, first.acquired) == (
        tip1, None, 0, b"bytes", [(5, 7, 2)])
    assert (second.partition, second.acks, second.ack_error_code, second.ack_error_message,
            second.error_code) == (tip0, a0, ErrorCode.INVALID_RECORD_STATE, "gone",
                                   ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert answer.unanswered == [tip9]


def test_the_names_known_when_the_request_went_out_come_first() -> None:
    response = ShareFetchResponse(responses=[
        ShareFetchResponse.ShareFetchableTopicResponse(topic_id=T1, partitions=[P()])])
    answer = read_fetch(response, {}, {T1: "then"}, {T1: "now"})
    assert answer.partitions[0].partition.topic == "then"


def test_an_acknowledge_answer_covers_what_was_acknowledged_only() -> None:
    tip0, tip1 = TopicIdPartition(T1, "one", 0), TopicIdPartition(T1, "one", 1)
    response = AR(responses=[AR.ShareAcknowledgeTopicResponse(topic_id=T1, partitions=[
        AR.PartitionData(partition_index=1, error_code=ErrorCode.INVALID_RECORD_STATE,
                        error_message="lock"),
        AR.PartitionData(partition_index=7),  # not acknowledged: ignored
    ])])
    answer = read_acknowledge(response, {tip0: _acks(1), tip1: _acks(2)})
    assert answer.answered == [(tip1, ErrorCode.INVALID_RECORD_STATE, "lock")]
    assert answer.unanswered == [tip0]
