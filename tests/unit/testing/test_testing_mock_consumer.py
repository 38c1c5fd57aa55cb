"""``kafka_share.testing.mock_consumer``: the mock consumers follow the real ones'
API and rules (the real consumer's errors and messages), and play the broker."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kafka_share import (
    AcknowledgeType,
    ConsumerRecord,
    ShareConsumer,
    TopicIdPartition,
    TopicPartition,
)
from kafka_share._app.acks import _unacknowledged_message
from kafka_share._app.checks import CLOSED, IMPLICIT_MODE, NOT_SUBSCRIBED, in_callback_message
from kafka_share.aio import AsyncShareConsumer
from kafka_share.errors import (
    ConfigError,
    IllegalStateError,
    InvalidRecordStateError,
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    RecordDeserializationError,
    WakeupError,
)
from kafka_share.models import TimestampType
from kafka_share.testing import MockAsyncShareConsumer, MockShareConsumer

ACCEPT, RELEASE, REJECT, RENEW = (
    AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.RENEW
)
T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(main)


def explicit(**kwargs: Any) -> MockShareConsumer[Any, Any]:
    return MockShareConsumer(share_acknowledgement_mode="explicit", **kwargs)


def offsets(records: Any) -> list[tuple[str, int, int, int]]:
    return [(r.topic, r.partition, r.offset, r.delivery_count) for r in records]


# -- the API matches the real consumers' -------------------------------------------------


_PROTOCOL = {"__init__", "__enter__", "__exit__", "__aenter__", "__aexit__", "__aiter__",
             "__anext__"}


def _public_api(cls: type) -> dict[str, Any]:
    """Public methods and properties, and the protocol dunders a user relies on."""
    return {
        name: inspect.getattr_static(cls, name) for name in dir(cls)
        if not name.startswith("_") or name in _PROTOCOL
    }


@pytest.mark.parametrize(("real", "mock"), [
    (ShareConsumer, MockShareConsumer), (AsyncShareConsumer, MockAsyncShareConsumer),
])
def test_the_mock_has_every_public_method_and_property_with_the_same_signature(
    real: type, mock: type
) -> None:
    real_api = _public_api(real)
    mock_api = _public_api(mock)
    assert "poll" in real_api and "__init__" in real_api
    missing = sorted(set(real_api) - set(mock_api))
    assert not missing, f"{mock.__name__} lacks {missing}"
    for name, attr in real_api.items():
        mine = mock_api[name]
        assert isinstance(mine, property) == isinstance(attr, property), name
        if isinstance(attr, property):
            assert (mine.fset is None) == (attr.fset is None), name
            continue
        assert inspect.iscoroutinefunction(mine) == inspect.iscoroutinefunction(attr), name
        # ``__enter__`` returns its own class: the mock's name stands for the real one's.
        mine_signature = str(inspect.signature(mine)).replace(f"Mock{real.__name__}",
                                                              real.__name__)
        assert mine_signature == str(inspect.signature(attr)), name


def test_the_api_check_notices_a_difference() -> None:
    class Drifted(MockShareConsumer[Any, Any]):
        def poll(self, timeout: float | None = None) -> Any:  # type: ignore[override]
            return None

    with pytest.raises(AssertionError, match="poll"):
        test_the_mock_has_every_public_method_and_property_with_the_same_signature(
            ShareConsumer, Drifted
        )


# -- configuration -------------------------------------------------------------------------


def test_configuration_is_checked_as_the_real_consumer_checks_it() -> None:
    with pytest.raises(ConfigError, match=r"share\.acknowledgement\.mode"):
        MockShareConsumer(share_acknowledgement_mode="sometimes")
    with pytest.raises(ConfigError, match=r"no\.such\.key"):
        MockShareConsumer({"no.such.key": 1})
    consumer = MockShareConsumer({"group.id": "workers", "client.id": "me"})
    assert (consumer.group_id, consumer.client_id) == ("workers", "me")
    assert MockShareConsumer().group_id == "mock-group"
    assert MockShareConsumer(group_id="g").member_id != MockShareConsumer(group_id="g").member_id


# -- subscription ------------------------------------------------------------------------


def test_subscribe_replaces_the_subscription_and_checks_names() -> None:
    consumer = MockShareConsumer()
    assert consumer.subscription() == frozenset()
    consumer.subscribe(["a", "b"])
    consumer.subscribe(["c"])
    assert consumer.subscription() == frozenset({"c"})
    consumer.subscribe([])
    assert consumer.subscription() == frozenset()
    consumer.subscribe(["c"])
    consumer.unsubscribe()
    assert consumer.subscription() == frozenset()
    with pytest.raises(InvalidTopicError, match="bad topic"):
        consumer.subscribe(["bad topic"])
    with pytest.raises(TypeError, match="single string"):
        consumer.subscribe("orders")


def test_the_assignment_is_every_partition_of_the_subscribed_topics() -> None:
    consumer = MockShareConsumer()
    consumer.add_record("a", value=b"1", partition=0)
    consumer.add_record("a", value=b"2", partition=3)
    consumer.add_record("b", value=b"3")
    assert consumer.assignment() == frozenset()
    consumer.subscribe(["a"])
    assert consumer.assignment() == {TopicPartition("a", 0), TopicPartition("a", 3)}
    consumer.unsubscribe()
    assert consumer.assignment() == frozenset()


def test_a_pattern_subscription_matches_the_topics_records_were_added_to() -> None:
    consumer = MockShareConsumer()
    consumer.add_record("orders-eu", value=b"eu")
    consumer.add_record("orders", value=b"plain")
    consumer.add_record("__orders-internal", value=b"internal")
    consumer.subscribe(pattern="orders-.*")
    assert consumer.subscription() == {"orders-eu"}
    assert [r.value for r in consumer.poll(0)] == [b"eu"]
    consumer.add_record("orders-us", value=b"us")  # a topic created later joins
    assert consumer.subscription() == {"orders-eu", "orders-us"}
    assert [r.value for r in consumer.poll(0)] == [b"us"]
    consumer.subscribe(pattern="nothing")
    assert consumer.subscription() == frozenset()
    assert consumer.poll(0).count() == 0  # subscribed, nothing matches: no error
    with pytest.raises(ValueError, match="invalid topic pattern"):
        consumer.subscribe(pattern="(")
    with pytest.raises(TypeError, match="not both"):
        consumer.subscribe(["orders"], pattern="orders")


def test_the_async_mock_subscribes_by_pattern_too() -> None:
    async def main() -> None:
        consumer: MockAsyncShareConsumer[Any, Any] = MockAsyncShareConsumer()
        consumer.add_record("jobs-1", value=b"j")
        await consumer.subscribe(pattern="jobs-[0-9]+")
        assert consumer.subscription() == {"jobs-1"}
        assert [r.value for r in await consumer.poll(0)] == [b"j"]
        await consumer.close()

    run(main())


def test_poll_without_a_subscription_raises_the_real_error() -> None:
    consumer = MockShareConsumer()
    consumer.add_record("orders", value=b"x")
    with pytest.raises(IllegalStateError) as caught:
        consumer.poll(0)
    assert str(caught.value) == NOT_SUBSCRIBED


# -- records and polls ------------------------------------------------------------------


def test_poll_delivers_records_of_subscribed_topics_only_in_order() -> None:
    consumer = MockShareConsumer()
    consumer.add_records("b", [b"b0", b"b1"])
    consumer.add_record("a", 1, value=b"a1-0")
    consumer.add_record("a", value=b"a0-0")
    consumer.add_record("other", value=b"o")
    consumer.subscribe(["a", "b"])
    records = consumer.poll(1.0)
    assert offsets(records) == [("a", 0, 0, 1), ("a", 1, 0, 1), ("b", 0, 0, 1), ("b", 0, 1, 1)]
    assert [r.value for r in records] == [b"a0-0", b"a1-0", b"b0", b"b1"]
    tip = consumer.topic_id_partition("b", 0)
    assert [r.offset for r in records.records(tip)] == [0, 1]
    assert consumer.poll(0).count() == 0  # the rest is not subscribed
    assert [r.topic for r in consumer.available()] == ["other"]
    consumer.subscribe(["other"])
    assert [r.value for r in consumer.poll(0)] == [b"o"]


def test_offsets_are_automatic_per_partition_unless_given() -> None:
    consumer = MockShareConsumer()
    assert consumer.add_record("t", value=b"x").offset == 0
    assert consumer.add_record("t", offset=10, value=b"y").offset == 10
    assert consumer.add_record("t", value=b"z").offset == 11
    assert consumer.add_record("t", 2, value=b"w").offset == 0
    with pytest.raises(ValueError, match="already has a record at offset 10"):
        consumer.add_record("t", offset=10)
    record = consumer.add_record(
        "t", key=b"k", value=b"v", headers=[("h", b"1")], timestamp=5,
        timestamp_type=TimestampType.LOG_APPEND_TIME, leader_epoch=3,
    )
    assert record == ConsumerRecord("t", 0, 12, 5, TimestampType.LOG_APPEND_TIME, b"k", b"v",
                                    (("h", b"1"),), 3, 1, 1, 1)


def test_a_consumer_record_is_added_as_it_is() -> None:
    consumer = MockShareConsumer()
    given = ConsumerRecord("t", 3, 7, 1, TimestampType.CREATE_TIME, None, {"any": "value"},
                           (), None, 2)
    assert consumer.add_record(given) is given
    consumer.subscribe(["t"])
    assert list(consumer.poll(0)) == [given]
    with pytest.raises(TypeError, match="not both"):
        consumer.add_record(given, value=b"x")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"partition": -1}, "partition"),
    ({"offset": -2}, "offset"),
    ({"delivery_count": 0}, "delivery_count"),
    ({"headers": [("h", "text")]}, "headers"),
    ({"timestamp": "now"}, "timestamp"),
])
def test_add_record_refuses_bad_fields(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MockShareConsumer().add_record("t", **kwargs)


def test_poll_hands_out_at_most_max_records_and_max_poll_records() -> None:
    consumer = MockShareConsumer(max_poll_records=3)
    consumer.add_records("t", [b"%d" % i for i in range(5)])
    consumer.subscribe(["t"])
    assert [r.offset for r in consumer.poll(0, max_records=2)] == [0, 1]
    assert [r.offset for r in consumer.poll(0, max_records=10)] == [2, 3, 4]
    with pytest.raises(ValueError, match="max_records"):
        consumer.poll(0, max_records=0)
    with pytest.raises(ValueError, match="negative"):
        consumer.poll(-1)


def test_acquisition_lock_timeout_is_known_once_records_were_delivered() -> None:
    consumer = MockShareConsumer()
    consumer.subscribe(["t"])
    consumer.poll(0)
    assert consumer.acquisition_lock_timeout_ms is None
    consumer.add_record("t", value=b"x")
    consumer.poll(0)
    assert consumer.acquisition_lock_timeout_ms == 30_000


# -- explicit mode -------------------------------------------------------------------------


def test_explicit_mode_poll_with_unacknowledged_records_raises_the_real_error() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"a", b"b"])
    consumer.subscribe(["t"])
    first = consumer.poll(0)
    consumer.acknowledge(first[0])
    with pytest.raises(IllegalStateError) as caught:
        consumer.poll(0)
    tip = consumer.topic_id_partition("t")
    assert str(caught.value) == _unacknowledged_message({tip: 1})
    consumer.acknowledge(first[1], REJECT)
    assert consumer.poll(0).count() == 0
    assert consumer.committed() == {("t", 0, 0): ACCEPT, ("t", 0, 1): REJECT}


def test_acknowledging_a_record_not_in_the_batch_is_refused() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    [record] = consumer.poll(0)
    consumer.acknowledge(record, RELEASE)
    consumer.commit_sync()
    with pytest.raises(IllegalStateError, match=r"cannot be acknowledged.*already acknowledged"):
        consumer.acknowledge(record)
    [again] = consumer.poll(0)
    assert again.delivery_count == 2
    with pytest.raises(IllegalStateError, match="earlier delivery"):
        consumer.acknowledge(record)  # the first delivery, not this one
    stranger = record._replace(topic="elsewhere")
    with pytest.raises(IllegalStateError, match="was not returned by the last poll"):
        consumer.acknowledge(stranger)
    consumer.acknowledge(again)


def test_acknowledge_type_errors_are_the_real_ones() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    [record] = consumer.poll(0)
    with pytest.raises(ValueError, match="invalid acknowledge type 9: use AcknowledgeType"):
        consumer.acknowledge(record, 9)  # type: ignore[arg-type]
    consumer.acknowledge(record, 3)  # type: ignore[arg-type]  # the int of REJECT
    assert consumer.acknowledged() == {("t", 0, 0): REJECT}


def test_implicit_mode_refuses_acknowledge_and_accepts_on_the_next_poll() -> None:
    consumer = MockShareConsumer()
    consumer.add_records("t", [b"a", b"b"])
    consumer.subscribe(["t"])
    records = consumer.poll(0)
    with pytest.raises(IllegalStateError) as caught:
        consumer.acknowledge(records[0])
    assert str(caught.value) == IMPLICIT_MODE
    with pytest.raises(IllegalStateError, match="Implicit"):
        consumer.acknowledge_offset("t", 0, 0, REJECT)
    assert consumer.acknowledged() == {}
    consumer.poll(0)
    assert consumer.committed() == {("t", 0, 0): ACCEPT, ("t", 0, 1): ACCEPT}
    assert consumer.available() == []


def test_implicit_mode_commit_sync_accepts_the_last_batch() -> None:
    consumer = MockShareConsumer()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    consumer.poll(0)
    assert consumer.commit_sync() == {consumer.topic_id_partition("t"): None}
    assert consumer.committed() == {("t", 0, 0): ACCEPT}


# -- what the mock broker does with acknowledgements ------------------------------------------


def test_released_records_come_back_with_a_higher_delivery_count_others_never() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"accept", b"release", b"reject"])
    consumer.subscribe(["t"])
    for record in consumer.poll(0):
        consumer.acknowledge(record, {b"accept": ACCEPT, b"release": RELEASE,
                                      b"reject": REJECT}[record.value])
    again = consumer.poll(0)
    assert offsets(again) == [("t", 0, 1, 2)]
    consumer.acknowledge(again[0], RELEASE)
    assert offsets(consumer.poll(0)) == [("t", 0, 1, 3)]


def test_a_record_released_at_the_delivery_count_limit_is_archived() -> None:
    consumer = explicit()
    consumer.delivery_count_limit = 2
    consumer.add_records("t", [b"poison"])
    consumer.subscribe(["t"])
    for expected_count in (1, 2):
        [record] = consumer.poll(0)
        assert record.delivery_count == expected_count
        consumer.acknowledge(record, RELEASE)
    assert consumer.poll(0).count() == 0
    assert consumer.available() == []
    with pytest.raises(ValueError, match="delivery_count_limit"):
        consumer.delivery_count_limit = 0


def test_renewed_records_come_back_from_the_next_poll_before_new_ones() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"slow", b"next"])
    consumer.subscribe(["t"])
    [slow] = consumer.poll(0, max_records=1)
    consumer.acknowledge(slow, RENEW)
    renewed = consumer.poll(0)
    assert list(renewed) == [slow]  # the same record, the same delivery count
    assert consumer.committed() == {("t", 0, 0): RENEW}
    consumer.acknowledge(slow, ACCEPT)
    assert [r.value for r in consumer.poll(0)] == [b"next"]
    assert consumer.committed()[("t", 0, 0)] is ACCEPT


def test_close_releases_what_was_not_acknowledged_and_sends_what_was() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"a", b"b"])
    consumer.subscribe(["t"])
    first, _ = consumer.poll(0)
    consumer.acknowledge(first)
    consumer.close()
    assert consumer.committed() == {("t", 0, 0): ACCEPT}
    assert offsets(consumer.available()) == [("t", 0, 1, 2)]


def test_implicit_mode_close_accepts_nothing() -> None:
    consumer = MockShareConsumer()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    consumer.poll(0)
    consumer.close()
    assert consumer.committed() == {}
    assert offsets(consumer.available()) == [("t", 0, 0, 2)]


# -- commits and the callback ----------------------------------------------------------------


def test_commit_sync_returns_one_result_per_partition_and_runs_the_callback_first() -> None:
    consumer = explicit()
    calls: list[tuple[dict[TopicIdPartition, set[int]], KafkaError | None]] = []
    consumer.set_acknowledgement_commit_callback(lambda o, e: calls.append((o, e)))
    consumer.add_records("t", [b"a", b"b"])
    consumer.add_records("t", [b"c"], partition=1)
    consumer.subscribe(["t"])
    assert consumer.commit_sync() == {}
    for record in consumer.poll(0):
        consumer.acknowledge(record)
    t0, t1 = consumer.topic_id_partition("t", 0), consumer.topic_id_partition("t", 1)
    assert consumer.commit_sync(5) == {t0: None, t1: None}
    assert sorted(calls, key=lambda c: sorted(c[0])[0].partition) == [
        ({t0: {0, 1}}, None), ({t1: {0}}, None),
    ]
    assert consumer.commit_sync() == {}
    with pytest.raises(TypeError, match="commit_sync"):
        consumer.commit_sync("soon")  # type: ignore[arg-type]


def test_commit_async_results_reach_the_callback_at_the_next_call() -> None:
    consumer = explicit()
    calls: list[Any] = []
    consumer.set_acknowledgement_commit_callback(lambda o, e: calls.append((o, e)))
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    [record] = consumer.poll(0)
    consumer.acknowledge(record)
    consumer.commit_async()
    assert calls == []
    assert consumer.committed() == {("t", 0, 0): ACCEPT}
    consumer.poll(0)
    assert calls == [({consumer.topic_id_partition("t"): {0}}, None)]


def test_acknowledgements_sent_by_a_poll_reach_the_callback_in_that_poll() -> None:
    consumer = MockShareConsumer()
    calls: list[Any] = []
    consumer.set_acknowledgement_commit_callback(lambda o, e: calls.append((o, e)))
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    consumer.poll(0)
    consumer.poll(0)
    assert calls == [({consumer.topic_id_partition("t"): {0}}, None)]


def test_a_commit_error_fails_matching_partitions_and_their_records_come_back() -> None:
    consumer = explicit()
    calls: list[Any] = []
    consumer.set_acknowledgement_commit_callback(lambda o, e: calls.append((o, e)))
    consumer.add_records("t", [b"a"], partition=0)
    consumer.add_records("t", [b"b"], partition=1)
    consumer.subscribe(["t"])
    lost = InvalidRecordStateError("the lock ran out")
    consumer.set_commit_error(lost, topic="t", partition=1)
    for record in consumer.poll(0):
        consumer.acknowledge(record)
    t0, t1 = consumer.topic_id_partition("t", 0), consumer.topic_id_partition("t", 1)
    assert consumer.commit_sync() == {t0: None, t1: lost}
    assert ({t1: {0}}, lost) in calls
    assert consumer.committed() == {("t", 0, 0): ACCEPT}
    assert consumer.acknowledged() == {("t", 0, 0): ACCEPT, ("t", 1, 0): ACCEPT}
    [again] = consumer.poll(0)
    assert offsets([again]) == [("t", 1, 0, 2)]
    consumer.set_commit_error(None)
    consumer.acknowledge(again)
    assert consumer.commit_sync() == {t1: None}
    with pytest.raises(TypeError, match="KafkaError"):
        consumer.set_commit_error(ValueError("x"))  # type: ignore[arg-type]


def test_the_latest_matching_commit_error_wins() -> None:
    consumer = MockShareConsumer()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    consumer.set_commit_error(InvalidRecordStateError("everywhere"))
    moved = NotLeaderOrFollowerError("moved")
    consumer.set_commit_error(moved, topic="t")
    consumer.poll(0)
    assert consumer.commit_sync() == {consumer.topic_id_partition("t"): moved}


def test_callback_exceptions_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    consumer = MockShareConsumer()

    def callback(offsets: Any, error: Any) -> None:
        raise RuntimeError("callback bug")

    consumer.set_acknowledgement_commit_callback(callback)
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    consumer.poll(0)
    with caplog.at_level(logging.ERROR):
        assert len(consumer.commit_sync()) == 1
    assert "Exception thrown by acknowledgement commit callback" in caplog.text
    with pytest.raises(TypeError, match="callable"):
        consumer.set_acknowledgement_commit_callback(42)  # type: ignore[arg-type]


def test_calls_from_the_callback_raise_the_real_error_except_wakeup() -> None:
    consumer = MockShareConsumer()
    seen: list[BaseException] = []

    def callback(offsets: Any, error: Any) -> None:
        try:
            consumer.poll(0)
        except IllegalStateError as exc:
            seen.append(exc)
        consumer.wakeup()

    consumer.set_acknowledgement_commit_callback(callback)
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    consumer.poll(0)
    consumer.commit_async()
    with pytest.raises(WakeupError):  # the wakeup from the callback ends this poll
        consumer.poll(0)
    assert [str(e) for e in seen] == [in_callback_message("ShareConsumer")]
    assert consumer.poll(0).count() == 0


def test_a_timed_out_commit_sync_still_sends_its_acknowledgements() -> None:
    consumer = explicit()
    calls: list[Any] = []
    consumer.set_acknowledgement_commit_callback(lambda o, e: calls.append((o, e)))
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    [record] = consumer.poll(0)
    consumer.acknowledge(record)
    consumer.schedule_commit_exception(KafkaTimeoutError("no answer"))
    with pytest.raises(KafkaTimeoutError, match="no answer"):
        consumer.commit_sync()
    assert consumer.committed() == {("t", 0, 0): ACCEPT}
    assert calls == []
    consumer.commit_sync()  # the late answer is reported now
    assert calls == [({consumer.topic_id_partition("t"): {0}}, None)]


# -- wakeup, injected failures, close ------------------------------------------------------------


def test_wakeup_makes_the_next_poll_raise_once() -> None:
    consumer = MockShareConsumer()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    consumer.wakeup()
    with pytest.raises(WakeupError, match="wakeup"):
        consumer.poll()
    assert consumer.poll().count() == 1


def test_wakeup_makes_commit_sync_raise_only_when_it_has_something_to_send() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    [record] = consumer.poll(0)
    consumer.wakeup()
    assert consumer.commit_sync() == {}  # nothing to wait for: no wakeup
    consumer.acknowledge(record)
    with pytest.raises(WakeupError):
        consumer.commit_sync()
    assert consumer.committed() == {("t", 0, 0): ACCEPT}


def test_a_poll_task_runs_inside_the_poll_and_can_wake_it_up() -> None:
    consumer = MockShareConsumer()
    consumer.subscribe(["t"])
    consumer.schedule_poll_task(lambda: consumer.add_record("t", value=b"late"))
    consumer.schedule_poll_task(consumer.wakeup)
    assert [r.value for r in consumer.poll(0)] == [b"late"]
    with pytest.raises(WakeupError):
        consumer.poll(0)
    with pytest.raises(TypeError, match="callable"):
        consumer.schedule_poll_task("not callable")  # type: ignore[arg-type]


def test_a_scheduled_poll_exception_is_raised_once_and_keeps_the_batch() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    [record] = consumer.poll(0)
    consumer.schedule_poll_exception(KafkaError("group authorization failed"))
    with pytest.raises(KafkaError, match="authorization"):
        consumer.poll(0)
    consumer.acknowledge(record)  # still in the batch
    assert consumer.poll(0).count() == 0
    with pytest.raises(TypeError, match="exception instance"):
        consumer.schedule_poll_exception(KafkaError)  # type: ignore[arg-type]


def test_close_is_idempotent_and_every_call_after_it_raises_the_real_error() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    [record] = consumer.poll(0)
    consumer.close()
    consumer.close()
    assert consumer.closed
    calls = [
        lambda: consumer.poll(0), lambda: consumer.subscribe(["t"]), consumer.unsubscribe,
        consumer.subscription, lambda: consumer.acknowledge(record),
        lambda: consumer.acknowledge_offset("t", 0, 0), consumer.commit_sync,
        consumer.commit_async, consumer.prefetch,
        lambda: consumer.set_acknowledgement_commit_callback(None), consumer.__enter__,
    ]
    for call in calls:
        with pytest.raises(IllegalStateError) as caught:
            call()
        assert str(caught.value) == CLOSED
    consumer.wakeup()  # harmless
    assert "records-consumed-total" in consumer.metrics()
    with pytest.raises(ValueError, match="close"):
        consumer.close(-1)


def test_close_reports_outstanding_results_to_the_callback() -> None:
    consumer = explicit()
    calls: list[Any] = []
    consumer.set_acknowledgement_commit_callback(lambda o, e: calls.append((o, e)))
    consumer.add_records("t", [b"a", b"b"])
    consumer.subscribe(["t"])
    first, second = consumer.poll(0)
    consumer.acknowledge(first)
    consumer.commit_async()
    consumer.acknowledge(second, REJECT)
    consumer.close()
    tip = consumer.topic_id_partition("t")
    assert calls == [({tip: {0}}, None), ({tip: {1}}, None)]


def test_unsubscribe_stops_deliveries() -> None:
    consumer = MockShareConsumer()
    consumer.add_records("t", [b"a"])
    consumer.subscribe(["t"])
    consumer.unsubscribe()
    with pytest.raises(IllegalStateError, match="not subscribed"):
        consumer.poll(0)
    assert len(consumer.available()) == 1


def test_the_context_manager_closes() -> None:
    with MockShareConsumer() as consumer:
        assert not consumer.closed
        assert "state=open" in repr(consumer)
    assert consumer.closed


def test_prefetch_sends_the_acknowledgements_made_so_far() -> None:
    consumer = explicit()
    consumer.add_records("t", [b"a"])
    with pytest.raises(IllegalStateError, match="not subscribed"):
        consumer.prefetch()
    consumer.subscribe(["t"])
    [record] = consumer.poll(0)
    consumer.acknowledge(record)
    assert consumer.prefetch(max_records=1)
    assert consumer.committed() == {("t", 0, 0): ACCEPT}


def test_metrics_count_what_was_consumed_under_the_real_names() -> None:
    consumer = MockShareConsumer()
    consumer.add_records("t", [b"a", b"b"])
    consumer.subscribe(["t"])
    consumer.poll(0)
    metrics = consumer.metrics()
    assert metrics["records-consumed-total"] == 2
    assert "fetch-latency-avg" in metrics


# -- deserializers and poison records ------------------------------------------------------------


def test_deserializers_apply_at_delivery() -> None:
    consumer: MockShareConsumer[str, int] = MockShareConsumer(
        key_deserializer=bytes.decode, value_deserializer=int
    )
    consumer.add_record("t", key=b"k", value=b"42")
    consumer.add_record("t", value=None)
    consumer.subscribe(["t"])
    assert [(r.key, r.value) for r in consumer.poll(0)] == [("k", 42), (None, None)]


def test_a_deserializer_failure_raises_after_the_records_before_it() -> None:
    consumer: MockShareConsumer[None, int] = explicit(value_deserializer=int)
    consumer.add_records("t", [b"1", b"oops", b"3"])
    consumer.subscribe(["t"])
    [good] = consumer.poll(0)
    assert good.value == 1
    consumer.acknowledge(good)
    with pytest.raises(RecordDeserializationError) as caught:
        consumer.poll(0)
    error = caught.value
    assert (error.topic, error.partition, error.offset, error.value) == ("t", 0, 1, b"oops")
    assert not error.is_key and isinstance(error.__cause__, ValueError)
    consumer.acknowledge_offset("t", 0, 1, REJECT)
    assert [r.value for r in consumer.poll(0)] == [3]
    assert consumer.committed()[("t", 0, 1)] is REJECT
    with pytest.raises(IllegalStateError, match="acknowledge_offset"):
        consumer.acknowledge_offset("t", 0, 2, REJECT)


def test_a_poison_record_not_acknowledged_is_released() -> None:
    consumer: MockShareConsumer[Any, int] = MockShareConsumer(key_deserializer=int)
    consumer.add_record("t", key=b"x")
    consumer.subscribe(["t"])
    with pytest.raises(RecordDeserializationError, match="key") as caught:
        consumer.poll(0)
    assert caught.value.is_key
    with pytest.raises(RecordDeserializationError):  # delivered again: still poison
        consumer.poll(0)
    assert consumer.committed() == {("t", 0, 0): RELEASE}


# -- poll_arrow ------------------------------------------------------------------------------


def test_poll_arrow_returns_the_real_columns_and_takes_acknowledge_arrow() -> None:
    pytest.importorskip("pyarrow")
    consumer = explicit()
    consumer.add_records("t", [b"a", b"b", b"c"])
    consumer.subscribe(["t"])
    batch = consumer.poll_arrow(0)
    assert batch.schema.names == ["topic", "partition", "offset", "timestamp",
                                  "timestamp_type", "key", "value", "headers",
                                  "delivery_count"]
    assert batch.column("value").to_pylist() == [b"a", b"b", b"c"]
    with pytest.raises(IllegalStateError, match="All records must be acknowledged"):
        consumer.poll_arrow(0)
    consumer.acknowledge_arrow(batch, [ACCEPT, RELEASE, REJECT])
    again = consumer.poll_arrow(0, view_types=True)
    assert again.column("offset").to_pylist() == [1]
    assert again.column("delivery_count").to_pylist() == [2]
    consumer.acknowledge_arrow(again)
    with pytest.raises(IllegalStateError, match="mixed"):
        consumer.poll(0)
    consumer.commit_sync()
    assert consumer.committed() == {("t", 0, 0): ACCEPT, ("t", 0, 1): ACCEPT,
                                    ("t", 0, 2): REJECT}


def test_poll_arrow_refuses_deserializers_and_values_that_are_not_bytes() -> None:
    pytest.importorskip("pyarrow")
    with pytest.raises(IllegalStateError, match="raw bytes"):
        MockShareConsumer(value_deserializer=int).poll_arrow(0)
    consumer = MockShareConsumer()
    consumer.add_record("t", value={"not": "bytes"})
    consumer.subscribe(["t"])
    with pytest.raises(TypeError, match="value of t-0 offset 0 is dict"):
        consumer.poll_arrow(0)


# -- the async twin ------------------------------------------------------------------------------


def test_the_async_mock_iterates_accepting_each_record_and_ends_when_dry() -> None:
    async def main() -> tuple[list[bytes], dict[Any, AcknowledgeType]]:
        async with MockAsyncShareConsumer() as consumer:
            consumer.add_records("t", [b"a", b"b", b"c"])
            await consumer.subscribe(["t"])
            seen = [record.value async for record in consumer]
            await consumer.commit_sync()
            return seen, consumer.committed()

    seen, committed = run(main())
    assert seen == [b"a", b"b", b"c"]
    assert committed == {("t", 0, 0): ACCEPT, ("t", 0, 1): ACCEPT, ("t", 0, 2): ACCEPT}


def test_the_async_mock_follows_the_same_rules() -> None:
    async def main() -> None:
        consumer = MockAsyncShareConsumer(share_acknowledgement_mode="explicit")
        consumer.add_records("t", [b"a", b"b"])
        with pytest.raises(IllegalStateError, match="not subscribed"):
            await consumer.poll(0)
        await consumer.subscribe(["t"])
        first, second = await consumer.poll(0)
        consumer.acknowledge(first)
        with pytest.raises(IllegalStateError, match="All records must be acknowledged"):
            await consumer.poll(0)
        consumer.acknowledge(second, RELEASE)
        tip = consumer.topic_id_partition("t")
        assert await consumer.commit_sync() == {tip: None}
        [again] = await consumer.poll(0)
        assert again.delivery_count == 2
        consumer.wakeup()
        consumer.acknowledge(again)
        with pytest.raises(WakeupError):
            await consumer.poll(0)
        assert consumer.blocked_loop_max_ms == 0
        await consumer.close()
        await consumer.close()
        with pytest.raises(IllegalStateError) as caught:
            await consumer.poll(0)
        assert str(caught.value) == CLOSED
        assert consumer.committed() == {("t", 0, 0): ACCEPT, ("t", 0, 1): ACCEPT}

    run(main())


def test_the_async_mock_names_the_async_consumer_in_the_callback_error() -> None:
    async def main() -> list[str]:
        consumer = MockAsyncShareConsumer()
        seen: list[str] = []

        def callback(offsets: Any, error: Any) -> None:
            try:
                consumer.commit_async()
            except IllegalStateError as exc:
                seen.append(str(exc))

        consumer.set_acknowledgement_commit_callback(callback)
        consumer.add_records("t", [b"a"])
        await consumer.subscribe(["t"])
        await consumer.poll(0)
        await consumer.commit_sync()
        return seen

    assert run(main()) == [in_callback_message("AsyncShareConsumer")]


# -- the example in docs/testing.md ----------------------------------------------------------------


def test_the_user_guide_examples_run() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "testing.md").read_text()
    section = text[text.index("## Unit tests without a broker"):text.index("## pytest fixtures")]
    blocks = [block.split("```")[0] for block in section.split("```python\n")[1:]]
    assert len(blocks) == 4  # the last one: a worker on the mock (kafka_share.workers)
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(blocks), "docs/testing.md", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert len(tests) == 3
    for test in tests:
        if inspect.iscoroutinefunction(test):
            run(test())
        else:
            test()
