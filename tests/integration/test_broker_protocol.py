"""Talk to the real broker with kafka-share's own codec: versions and group state."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from share_helpers import poll_until

from kafka_share.protocol.api_keys import ApiKey, ApiVersionsTable
from kafka_share.protocol.codec import NEED_DATA, KafkaCodec
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kafka_share.share.membership import generate_member_id
from tests.unit.protocol.helpers import receive_data, require_share_groups

pytestmark = pytest.mark.integration


def _round_trip(bootstrap: str, request: Any, version: int) -> Any:
    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    codec = KafkaCodec(client_id="protocol-test")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        _, frame = codec.send_request(request, version)
        sock.sendall(frame)
        while True:
            receive_data(codec, sock.recv(65536))
            event = codec.next_response()
            if event is not NEED_DATA:
                return event[1]


def test_broker_advertises_the_share_apis(kafka_bootstrap: str, kafka_cluster: Any) -> None:
    response = _round_trip(kafka_bootstrap, ApiVersionsRequest(
        client_software_name="kafka-share", client_software_version="test"), 3)
    assert isinstance(response, ApiVersionsResponse) and response.error_code == 0
    table = ApiVersionsTable.from_response(response)
    broker = table.broker_versions
    assert broker[ApiKey.SHARE_GROUP_HEARTBEAT][1] >= 1
    assert broker[ApiKey.SHARE_GROUP_DESCRIBE][1] >= 1
    version = str(getattr(kafka_cluster, "kafka_version", "4.2"))
    major_minor = tuple(int(part) for part in version.split(".")[:2])
    expected_share_max = 2 if major_minor >= (4, 2) else 1
    assert broker[ApiKey.SHARE_FETCH][1] == expected_share_max
    assert broker[ApiKey.SHARE_ACKNOWLEDGE][1] == expected_share_max
    assert table.finalized_features.get("share.version", 0) >= 1
    require_share_groups(table)  # raises if the cluster could not serve share groups


def test_heartbeat_carries_client_rack(
    kafka_bootstrap: str, topic_factory: Any, share_group: str, kafka_produce: Any,
    consumer_factory: Any,
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"x"], partition=0)
    c = consumer_factory(share_group, client_rack="rack-a", client_id="rack-client")
    c.subscribe([topic])
    assert len(poll_until(c, lambda s: len(s) >= 1, timeout_s=30)) == 1
    response = _round_trip(
        kafka_bootstrap, ShareGroupDescribeRequest(group_ids=[share_group]), 1
    )
    assert isinstance(response, ShareGroupDescribeResponse)
    (group,) = response.groups
    assert group.error_code == 0 and group.group_id == share_group
    (member,) = group.members
    assert member.member_id == c.member_id
    assert member.rack_id == "rack-a"
    assert member.client_id == "rack-client"
    assert topic in member.subscribed_topic_names


def test_a_join_without_topic_names_is_refused(kafka_bootstrap: str, share_group: str) -> None:
    """Why a pattern subscription matching nothing keeps the member out of the group
    (``share/engine.py`` ``ConsumerEngine._match_pattern``): the broker refuses a
    join at epoch 0 whose SubscribedTopicNames is empty."""
    response = _round_trip(kafka_bootstrap, ShareGroupHeartbeatRequest(
        group_id=share_group, member_id=generate_member_id(), member_epoch=0,
        subscribed_topic_names=[],
    ), 1)
    assert isinstance(response, ShareGroupHeartbeatResponse)
    if response.error_code == ErrorCode.NOT_COORDINATOR:
        pytest.skip("the group's coordinator is another broker of this cluster")
    assert response.error_code == ErrorCode.INVALID_REQUEST, response
    assert "SubscribedTopicNames must be set" in (response.error_message or "")
