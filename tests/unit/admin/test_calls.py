"""AdminRpc: routing, coordinator lookup, retries with backoff, deadlines (sans-IO)."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_share.admin import requests as rq
from kafka_share.admin.calls import AdminRpc, Call, DoNotRetry, Outgoing, Route, Routing
from kafka_share.cluster import ClusterMetadata
from kafka_share.errors import (
    CoordinatorLoadInProgressError,
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    NotCoordinatorError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from kafka_share.protocol.messages import (
    DeleteTopicsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka_share.share.backoff import ExponentialBackoff
from kafka_share.share.unsent import VersionedRequest


def make(route: Route, parse: Any, *, timeout_ms: int = 10_000, routing: Routing | None = None
         ) -> tuple[AdminRpc[Any], Routing]:
    routing = routing or Routing(ClusterMetadata([("b", 9092)], metadata_max_age_ms=60_000))
    rpc: AdminRpc[Any] = AdminRpc(
        "test call", route, Call(str, lambda: "REQUEST", parse), routing=routing, now_ms=0,
        timeout_ms=timeout_ms, request_timeout_ms=3000,
        backoff=ExponentialBackoff(100, 1000, jitter=0),
    )
    return rpc, routing


def coordinator_answer(out: Outgoing, node_id: int = 7, code: int = 0, now_ms: int = 0) -> None:
    assert isinstance(out.request, VersionedRequest)
    built = out.request.build(6)
    assert isinstance(built, FindCoordinatorRequest) and built.coordinator_keys == ["g"]
    out.handler(FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
        key="g", node_id=node_id, host="h7", port=9, error_code=code)]), None, now_ms)


def test_any_route_sends_to_a_bootstrap_node_and_returns_the_parsed_value() -> None:
    rpc, _ = make(Route.any(), lambda r: r + "!")
    (out,) = rpc.poll(0)
    assert out.node_id == -1 and out.request == "REQUEST" and out.timeout_ms == 3000
    assert rpc.poll(0) == []  # one request in flight at a time
    out.handler("answer", None, 5)
    assert rpc.done and rpc.result() == "answer!"


def test_coordinator_route_looks_the_coordinator_up_first_and_remembers_it() -> None:
    rpc, routing = make(Route.coordinator("g"), lambda r: r)
    (lookup,) = rpc.poll(0)
    coordinator_answer(lookup)
    assert routing.coordinators == {"g": 7}
    assert routing.cluster.address_of(7) == ("h7", 9)
    (out,) = rpc.poll(1)
    assert out.node_id == 7
    out.handler("ok", None, 2)
    assert rpc.result() == "ok"
    second, _ = make(Route.coordinator("g"), lambda r: r, routing=routing)
    assert second.poll(3)[0].node_id == 7  # no second lookup


def test_not_coordinator_forgets_the_coordinator_and_retries_after_backoff() -> None:
    def parse(r: Any) -> Any:
        if r == "moved":
            raise NotCoordinatorError("moved")
        return r

    rpc, routing = make(Route.coordinator("g"), parse)
    coordinator_answer(rpc.poll(0)[0])
    rpc.poll(0)[0].handler("moved", None, 10)
    assert "g" not in routing.coordinators and not rpc.done
    assert rpc.poll(50) == [] and rpc.time_until_next_ms(50) == 60  # 100 ms backoff
    (lookup,) = rpc.poll(110)
    coordinator_answer(lookup, node_id=8, now_ms=110)
    (out,) = rpc.poll(110)
    assert out.node_id == 8
    out.handler("ok", None, 120)
    assert rpc.result() == "ok" and rpc.attempts == 1


def test_retriable_errors_back_off_exponentially_until_the_deadline() -> None:
    def parse(r: Any) -> Any:
        raise CoordinatorLoadInProgressError("loading")

    rpc, _ = make(Route.any(), parse, timeout_ms=1000)
    now = 0
    sends = []
    while not rpc.done:
        for out in rpc.poll(now):
            sends.append(now)
            out.handler("x", None, now)
        wait = rpc.time_until_next_ms(now)
        now += wait if wait else 1
    assert sends == [0, 100, 300, 700]
    with pytest.raises(KafkaTimeoutError, match=r"test call did not complete within 1 s "
                       r"\(4 attempt\(s\); last error: loading\)"):
        rpc.result()


def test_connection_failures_rotate_the_node_and_retry() -> None:
    routing = Routing(ClusterMetadata([("a", 1), ("b", 2)], metadata_max_age_ms=60_000))
    rpc, _ = make(Route.any(), lambda r: r, routing=routing)
    first = rpc.poll(0)[0]
    first.handler(None, NetworkError("refused"), 0)
    second = rpc.poll(100)[0]
    assert {first.node_id, second.node_id} == {-1, -2}


def test_non_retriable_errors_fail_at_once() -> None:
    rpc, _ = make(Route.any(), lambda r: r)
    rpc.poll(0)[0].handler(None, UnsupportedVersionError("too old"), 1)
    with pytest.raises(UnsupportedVersionError, match="too old"):
        rpc.result()

    def parse(r: Any) -> Any:
        raise DoNotRetry(UnknownTopicOrPartitionError("gone"))

    rpc, _ = make(Route.any(), parse)
    rpc.poll(0)[0].handler("x", None, 1)
    with pytest.raises(UnknownTopicOrPartitionError, match="gone"):
        rpc.result()


def test_coordinator_lookup_errors() -> None:
    rpc, _ = make(Route.coordinator("g"), lambda r: r)
    coordinator_answer(rpc.poll(0)[0], code=15)  # COORDINATOR_NOT_AVAILABLE: retried
    assert not rpc.done
    coordinator_answer(rpc.poll(100)[0], code=30, now_ms=100)  # GROUP_AUTHORIZATION_FAILED
    assert rpc.done
    with pytest.raises(Exception, match="GROUP_AUTHORIZATION_FAILED"):
        rpc.result()


def test_request_timeout_is_cut_to_the_deadline() -> None:
    rpc, _ = make(Route.any(), lambda r: r, timeout_ms=1000)
    assert rpc.poll(900)[0].timeout_ms == 100


def test_an_attempt_that_times_out_at_the_deadline_fails_the_call() -> None:
    rpc, _ = make(Route.any(), lambda r: r, timeout_ms=500)
    (out,) = rpc.poll(0)
    assert out.timeout_ms == 500 and rpc.time_until_next_ms(0) == 500
    # The request's own timeout (cut to the deadline) is what ends the wait.
    assert rpc.poll(500) == [] and not rpc.done
    out.handler(None, KafkaTimeoutError("no answer"), 500)
    with pytest.raises(KafkaTimeoutError, match="last error: no answer"):
        rpc.result()


def test_delete_topics_parse_names_a_missing_topic_and_does_not_retry() -> None:
    call = rq.delete_topics(["t1", "gone"], deadline_ms=0)
    response = DeleteTopicsResponse(responses=[
        DeleteTopicsResponse.DeletableTopicResult(name="t1", error_code=0),
        DeleteTopicsResponse.DeletableTopicResult(name="gone", error_code=3),
    ])
    with pytest.raises(DoNotRetry) as info:
        call.parse(response)
    assert isinstance(info.value.error, UnknownTopicOrPartitionError)
    assert "topic 'gone'" in str(info.value.error) and "does not exist" in str(info.value.error)


def test_group_not_found_is_named() -> None:
    from kafka_share.protocol.messages import ShareGroupDescribeResponse as R

    routing = Routing(ClusterMetadata([("b", 1)], metadata_max_age_ms=1))
    call = rq.describe_share_group("g", routing)
    with pytest.raises(GroupIdNotFoundError, match="share group 'g' does not exist"):
        call.parse(R(groups=[R.DescribedGroup(group_id="g", error_code=69)]))


@pytest.mark.parametrize("version", [0, 1])
def test_share_group_offsets_parse(version: int) -> None:
    from kafka_share import TopicPartition
    from kafka_share.protocol.messages import DescribeShareGroupOffsetsResponse as R

    call = rq.describe_share_group_offsets("g", None)
    request = call.build()
    assert isinstance(request, VersionedRequest)
    assert request.build(version).groups[0].topics is None  # every topic
    response = R(groups=[R.DescribeShareGroupOffsetsResponseGroup(group_id="g", topics=[
        R.DescribeShareGroupOffsetsResponseTopic(topic_name="t", partitions=[
            R.DescribeShareGroupOffsetsResponsePartition(
                partition_index=0, start_offset=7, leader_epoch=2, lag=5),
            R.DescribeShareGroupOffsetsResponsePartition(
                partition_index=1, start_offset=-1, leader_epoch=-1, lag=-1),
        ])
    ])])
    got = call.parse(response)
    first, second = got[TopicPartition("t", 0)], got[TopicPartition("t", 1)]
    # v0 (Kafka 4.1) has no lag: unavailable, never a guess.
    assert (first.start_offset, first.leader_epoch, first.lag) == (7, 2, 5 if version else None)
    # Not initialised yet: shown as absent, like Kafka's tools.
    assert (second.start_offset, second.leader_epoch, second.lag) == (None, None, None)


def test_config_hint_names_unknown_keys_and_ranges() -> None:
    from kafka_share.admin.types import ConfigEntry

    known = {k: ConfigEntry(k, "1") for k in ("share.record.lock.duration.ms",
                                             "share.auto.offset.reset")}
    broker = {
        "group.share.min.record.lock.duration.ms": ConfigEntry("x", "1000"),
        "group.share.max.record.lock.duration.ms": ConfigEntry("y", "60000"),
    }
    hint = rq.config_hint({"share.lock.duration.ms": 5}, known, broker)
    assert "'share.lock.duration.ms' is not a group config" in hint
    assert "did you mean 'share.record.lock.duration.ms'?" in hint
    hint = rq.config_hint({"share.record.lock.duration.ms": 5}, known, broker)
    assert hint == (
        "share.record.lock.duration.ms must be between 1000 and 60000 (the broker's "
        "group.share.min.record.lock.duration.ms and group.share.max.record.lock.duration.ms)"
        ", got 5"
    )
    assert rq.config_hint({"share.record.lock.duration.ms": None}, known, broker) == ""


def test_config_values_are_kafka_strings() -> None:
    assert rq.config_value(True) == "true" and rq.config_value(15000) == "15000"
    with pytest.raises(TypeError, match="config value"):
        rq.config_value([1])


def test_an_authorization_failure_names_the_rights_the_call_needs() -> None:
    routing = Routing(ClusterMetadata([("b", 9092)], metadata_max_age_ms=60_000))
    rpc: AdminRpc[Any] = AdminRpc(
        "describe share group 'g'", Route.coordinator("g"),
        Call(str, lambda: "REQUEST", lambda r: r),
        routing=routing, now_ms=0, timeout_ms=10_000, request_timeout_ms=3000,
        backoff=ExponentialBackoff(100, 1000, jitter=0), needs="DESCRIBE on GROUP 'g'",
    )
    # FindCoordinator already checks DESCRIBE on the group: its answer fails the call.
    coordinator_answer(rpc.poll(0)[0], code=GroupAuthorizationFailedError.code)
    with pytest.raises(GroupAuthorizationFailedError) as caught:
        rpc.result()
    assert str(caught.value) == (
        "GROUP_AUTHORIZATION_FAILED (error code 30): describe share group 'g' needs DESCRIBE "
        "on GROUP 'g'")
    assert rpc.attempts == 0  # not retried


def test_other_errors_do_not_mention_rights() -> None:
    rpc, _ = make(Route.any(), lambda r: (_ for _ in ()).throw(GroupIdNotFoundError("gone")))
    rpc.needs = "DESCRIBE on GROUP 'g'"
    rpc.poll(0)[0].handler("answer", None, 1)
    with pytest.raises(GroupIdNotFoundError, match=r"^gone$"):
        rpc.result()


def test_an_answer_of_another_type_fails_the_call_naming_both_types() -> None:
    rpc, _ = make(Route.any(), lambda r: r)
    rpc.poll(0)[0].handler(b"bytes", None, 1)
    assert rpc.done and rpc.attempts == 0
    with pytest.raises(KafkaError, match="test call: a bytes came back for a request expecting"):
        rpc.result()


def test_a_coordinator_lookup_answered_with_another_type_fails_the_call() -> None:
    rpc, _ = make(Route.coordinator("g"), lambda r: r)
    rpc.poll(0)[0].handler("not a FindCoordinatorResponse", None, 1)
    with pytest.raises(
        KafkaError, match="a str came back for a request expecting a FindCoordinatorResponse"
    ):
        rpc.result()


def test_a_timeout_names_the_callers_budget_not_the_millisecond_less_it_started_with() -> None:
    rpc, _ = make(Route.any(), lambda r: r, timeout_ms=999)  # a 1 s timeout, started 1 ms late
    rpc.poll(0)[0].handler(None, NetworkError("refused"), 500)
    rpc.poll(999)
    with pytest.raises(KafkaTimeoutError, match=r"did not complete within 1 s"):
        rpc.result()
