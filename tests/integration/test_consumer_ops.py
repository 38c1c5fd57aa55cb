"""Operational behaviour on a real broker: metrics, logging, poll-interval liveness,
the coordinator lookup before subscribe, the receive marks between polls."""

from __future__ import annotations

import logging
import math
import socket
import sys
import time
from typing import Any

import pytest
from share_helpers import poll_until

from kafka_share.metrics import METRIC_GROUPS

pytestmark = pytest.mark.integration


def test_metrics_use_java_names_and_count_what_happened(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=2)
    kafka_produce(topic, [b"x" * 100 for _ in range(300)], partition=0)
    kafka_produce(topic, [b"y" * 100 for _ in range(200)], partition=1)
    c = consumer_factory(share_group)
    before = c.metrics()
    assert set(before) == set(METRIC_GROUPS)
    assert before["records-consumed-total"] == 0
    assert math.isnan(before["last-poll-seconds-ago"])
    c.subscribe([topic])
    seen = poll_until(c, lambda s: len(s) >= 500, timeout_s=30)
    assert len(seen) == 500
    c.commit_sync(timeout=10.0)
    m = c.metrics()
    assert m["records-consumed-total"] == 500
    assert m["bytes-consumed-total"] == 500 * 100
    assert m["records-consumed-rate"] > 0
    assert m["fetch-total"] >= 1 and m["fetch-latency-avg"] >= 0
    assert m["records-per-request-max"] >= 1
    assert m["acknowledgements-send-total"] >= 500
    assert m["acknowledgements-error-total"] == 0
    assert m["heartbeat-total"] >= 1 and m["last-heartbeat-seconds-ago"] >= 0
    assert m["rebalance-total"] >= 1
    assert 0 <= m["last-poll-seconds-ago"] < 30
    assert 0 <= m["poll-idle-ratio-avg"] <= 1


def test_every_log_line_names_the_consumer_and_no_payload_is_logged(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="kafka_share")
    topic = topic_factory(partitions=1)
    secret = "PAYLOAD-MARKER-7f3a"
    kafka_produce(topic, [secret.encode()] * 5, partition=0, key=b"KEY-MARKER-7f3a")
    c = consumer_factory(share_group, client_id="ops-test-client")
    c.subscribe([topic])
    assert len(poll_until(c, lambda s: len(s) >= 5, timeout_s=30)) == 5
    c.commit_sync(timeout=10.0)
    c.close()
    ours = [r for r in caplog.records if r.name.startswith("kafka_share")
            and not r.name.startswith("kafka_share.testing")]
    assert ours, "the consumer logged nothing at DEBUG"
    for record in ours:
        line = record.getMessage()
        assert "clientId=ops-test-client" in line and f"groupId={share_group}" in line, line
        assert "memberId=" in line, line
    assert "MARKER-7f3a" not in caplog.text


def test_consumer_that_stops_polling_leaves_and_rejoins(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, consumer_factory: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    kafka_produce(topic, [f"r{i}".encode() for i in range(5)], partition=0)
    slow = consumer_factory(group, share_acknowledgement_mode="explicit",
                            max_poll_interval_ms=3000)
    slow.subscribe([topic])
    held = poll_until(slow, lambda s: len(s) >= 5, timeout_s=30)
    assert len(held) == 5
    caplog.set_level(logging.WARNING, logger="kafka_share")

    other = consumer_factory(group)
    other.subscribe([topic])
    # slow stops polling: after max.poll.interval.ms it leaves the group, its
    # session ends and the broker releases the records long before the 60 s lock.
    got = poll_until(other, lambda s: len(s) >= 5, timeout_s=30)
    assert sorted(r.offset for r in got) == sorted(r.offset for r in held)
    assert "poll timeout has expired" in caplog.text

    # The next poll rejoins; records acknowledged late fail, new records flow again.
    for r in held:
        slow.acknowledge(r)
    kafka_produce(topic, [b"after"], partition=0)
    other.close()
    later = poll_until(slow, lambda s: any(r.value == b"after" for r in s), timeout_s=30,
                       on_batch=lambda b: [slow.acknowledge(r) for r in b])
    assert any(r.value == b"after" for r in later)
    time.sleep(0.1)


def test_the_coordinator_is_found_before_subscribe_so_the_join_starts_with_a_heartbeat(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As Java's network thread and librdkafka do: a constructed consumer looks
    its group coordinator up at once, so that ``subscribe`` heartbeats in its
    first round instead of after a FindCoordinator round trip."""
    from kafka_share._net import connection
    from kafka_share.protocol.api_keys import ApiKey

    topic = topic_factory()
    kafka_produce(topic, [b"v%d" % i for i in range(10)])
    sent: list[ApiKey] = []
    answered: list[ApiKey] = []
    send = connection.BrokerConnection.send

    def recording(self: Any, request: Any, handler: Any, *args: Any, **kwargs: Any) -> Any:
        # A VersionedRequest (FindCoordinator) carries its key as api_key.
        key = ApiKey(getattr(request, "api_key", None) or request.API_KEY)
        sent.append(key)

        def on_answer(response: Any, error: Any) -> Any:
            answered.append(key)
            return handler(response, error)

        return send(self, request, on_answer, *args, **kwargs)

    monkeypatch.setattr(connection.BrokerConnection, "send", recording)
    c = consumer_factory(share_group)
    deadline = time.monotonic() + 30
    while ApiKey.FIND_COORDINATOR not in answered and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ApiKey.FIND_COORDINATOR in answered, sent
    assert ApiKey.SHARE_GROUP_HEARTBEAT not in sent  # not in the group before subscribe
    before = len(sent)
    c.subscribe([topic])
    seen = poll_until(c, lambda s: len(s) >= 10, timeout_s=30)
    assert sorted(r.value for r in seen) == sorted(b"v%d" % i for i in range(10))
    # The join needed no second lookup: the coordinator was known.
    assert sent.count(ApiKey.FIND_COORDINATOR) == 1, sent
    assert ApiKey.SHARE_GROUP_HEARTBEAT in sent[before:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the marks are Linux's")
def test_between_polls_the_connection_awaiting_a_response_has_its_receive_mark_raised(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any,
) -> None:
    """A poll that hands out part of a response sends the fetch ahead; until the
    next poll nothing reads the socket, and the raised SO_RCVLOWAT lets the
    broker's answer arrive whole meanwhile. Every later wait lowers it again:
    the consumer reads every record, through to the small responses at the end."""
    topic = topic_factory()
    values = [b"%05d" % i + b"x" * 1019 for i in range(3000)]
    kafka_produce(topic, values)
    c = consumer_factory(share_group, max_poll_records=200)
    c.subscribe([topic])
    seen = poll_until(c, lambda s: len(s) > 0, timeout_s=30)
    raised = []
    while len(seen) < len(values):
        client = c._thread._client
        if client.low_water_raised:
            raised += [
                conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)
                for conn in client._connections.values() if conn.low_water_raised
            ]
        more = poll_until(c, lambda s: len(s) > 0, timeout_s=30)
        if not more:
            break  # records missing: the assertion below says so
        seen += more
    assert sorted(r.value for r in seen) == sorted(values)
    assert raised and min(raised) > 256 * 1024, raised
