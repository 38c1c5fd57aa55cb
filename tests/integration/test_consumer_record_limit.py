"""``share.acquire.mode=record_limit`` and ``fetch.ahead=manual`` against a real
broker: a consumer acquires only what its polls ask for
(``poll(max_records=...)``), ahead of a poll only through ``prefetch``, and never
after its poll has given up."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from share_helpers import poll_until

from kafka_share import AcknowledgeType, ShareConsumer
from kafka_share.aio import AsyncShareConsumer

RECORD_LIMIT: dict[str, Any] = {
    "share_acquire_mode": "record_limit", "share_acknowledgement_mode": "explicit",
}
MANUAL: dict[str, Any] = {
    "share_acquire_mode": "batch_optimized", "share_acknowledgement_mode": "explicit",
    "fetch_ahead": "manual",
}


def _accept_all(consumer: ShareConsumer[Any, Any], records: Any) -> None:
    for r in records:
        consumer.acknowledge(r, AcknowledgeType.ACCEPT)


def _another_member_takes(consumer_factory: Any, group: str, topic: str,
                          count: int) -> ShareConsumer[Any, Any]:
    """A new member polls ``count`` records at once (accepted and committed),
    first deliveries, offsets 0..count-1: nobody else was holding them."""
    other = consumer_factory(group, **RECORD_LIMIT)
    other.subscribe([topic])
    seen = poll_until(other, lambda s: len(s) >= count, timeout_s=12.0,
                      on_batch=lambda b: _accept_all(other, b))
    assert sorted(r.offset for r in seen) == list(range(count))
    assert {r.delivery_count for r in seen} == {1}
    assert all(err is None for err in other.commit_sync(timeout=10.0).values())
    return other  # type: ignore[no-any-return]


def _wait_for_assignment(consumer: ShareConsumer[Any, Any]) -> None:
    """Poll (finding nothing) until the member has joined and fetched once."""
    assert list(consumer.poll(3.0)) == []


@pytest.mark.parametrize("mode", [RECORD_LIMIT, MANUAL], ids=["record_limit", "manual"])
def test_an_idle_consumer_acquires_nothing_after_its_poll_gave_up(
    mode: dict[str, Any], topic_factory: Any, share_group: str, kafka_produce: Any,
    consumer_factory: Any,
) -> None:
    # Before: a poll's fetch round went on after the poll returned empty, so an
    # idle member kept long-polling and locked every record produced meanwhile,
    # for nobody, until the lock ran out (30 s here): another member got nothing.
    topic = topic_factory(partitions=1)
    idle = consumer_factory(share_group, **mode)
    idle.subscribe([topic])
    _wait_for_assignment(idle)
    assert list(idle.poll(0.5)) == []
    kafka_produce(topic, [f"v{i}".encode() for i in range(10)])
    time.sleep(1.5)

    _another_member_takes(consumer_factory, share_group, topic, 10)
    assert list(idle.poll(0.5)) == []


def test_poll_max_records_caps_what_the_broker_acquires(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"v{i}".encode() for i in range(100)])
    first = consumer_factory(share_group, **RECORD_LIMIT)
    first.subscribe([topic])
    deadline = time.monotonic() + 10.0
    capped = list(first.poll(1.0, max_records=7))
    while not capped and time.monotonic() < deadline:
        capped = list(first.poll(1.0, max_records=7))
    assert 0 < len(capped) <= 7
    _accept_all(first, capped)
    assert all(err is None for err in first.commit_sync(timeout=10.0).values())

    # The broker acquired only what the capped poll asked for: the rest is
    # available to another member at once, at delivery count 1.
    taken = {r.offset for r in capped}
    second = consumer_factory(share_group, **RECORD_LIMIT)
    second.subscribe([topic])
    rest = poll_until(second, lambda s: len(s) >= 100 - len(taken), timeout_s=12.0,
                      on_batch=lambda b: _accept_all(second, b))
    assert {r.offset for r in rest} == set(range(100)) - taken
    assert {r.delivery_count for r in rest} == {1}


def test_prefetch_fetches_the_next_records_within_its_cap(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"v{i}".encode() for i in range(200)])
    consumer = consumer_factory(share_group, max_poll_records=50, **RECORD_LIMIT)
    consumer.subscribe([topic])
    first = poll_until(consumer, lambda s: len(s) > 0, timeout_s=10.0, poll_s=3.0)
    assert 0 < len(first) <= 50
    _accept_all(consumer, first)
    assert consumer.prefetch(max_records=20) is True  # carries the ACCEPTs

    # The prefetched response arrives without a poll; the poll hands it out.
    deadline = time.monotonic() + 5.0
    ahead = consumer.poll(0, max_records=5)
    while not ahead.count() and time.monotonic() < deadline:
        time.sleep(0.05)
        ahead = consumer.poll(0, max_records=5)
    assert ahead.count() == 5
    # 15 of the prefetched 20 are still buffered: no second response on top.
    _accept_all(consumer, ahead)
    assert consumer.prefetch(max_records=20) is False
    rest_of_ahead = consumer.poll(5.0)
    assert rest_of_ahead.count() == 15
    _accept_all(consumer, rest_of_ahead)
    results = consumer.commit_sync(timeout=10.0)
    assert results and all(err is None for err in results.values())

    offsets = [r.offset for batch in (first, ahead, rest_of_ahead) for r in batch]
    assert len(offsets) == len(set(offsets)) == len(first) + 20
    # Nothing beyond the cap was acquired: another member gets the rest now.
    other = consumer_factory(share_group, **RECORD_LIMIT)
    other.subscribe([topic])
    rest = poll_until(other, lambda s: len(s) >= 200 - len(offsets), timeout_s=12.0,
                      on_batch=lambda b: _accept_all(other, b))
    assert {r.offset for r in rest} == set(range(200)) - set(offsets)


def test_a_manual_consumer_fetches_only_for_waiting_polls_and_prefetch(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    consumer = consumer_factory(share_group, **MANUAL)
    consumer.subscribe([topic])
    _wait_for_assignment(consumer)
    kafka_produce(topic, [f"v{i}".encode() for i in range(30)])
    time.sleep(1.0)
    # poll(0) hands out what is buffered (nothing) and fetches nothing, however often.
    for _ in range(20):
        assert consumer.poll(0).count() == 0
        time.sleep(0.05)
    _another_member_takes(consumer_factory, share_group, topic, 30).close()

    # prefetch, then poll(0): the prefetched records, without a waiting poll.
    kafka_produce(topic, [f"w{i}".encode() for i in range(5)])
    time.sleep(0.5)
    assert consumer.prefetch() is True
    deadline = time.monotonic() + 5.0
    got = consumer.poll(0)
    while not got.count() and time.monotonic() < deadline:
        time.sleep(0.05)
        got = consumer.poll(0)
    assert sorted(r.offset for r in got) == list(range(30, 35))
    _accept_all(consumer, got)
    assert all(err is None for err in consumer.commit_sync(timeout=10.0).values())


def test_bad_max_records_are_refused(consumer_factory: Any, share_group: str) -> None:
    consumer = consumer_factory(share_group, **RECORD_LIMIT)
    consumer.subscribe(["some-topic"])
    for bad in (0, -1, True, 1.5, "3"):
        with pytest.raises(ValueError, match="max_records must be a positive int"):
            consumer.poll(0, max_records=bad)
        with pytest.raises(ValueError, match="max_records must be a positive int"):
            consumer.prefetch(max_records=bad)
    unsubscribed = consumer_factory(share_group, **RECORD_LIMIT)
    with pytest.raises(Exception, match="not subscribed"):
        unsubscribed.prefetch(max_records=5)


def test_async_consumer_prefetch_and_poll_max_records(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"v{i}".encode() for i in range(60)])

    async def main() -> list[int]:
        async with AsyncShareConsumer(bootstrap_servers=kafka_bootstrap, group_id=share_group,
                                      **RECORD_LIMIT) as consumer:
            await consumer.subscribe([topic])
            got: list[int] = []
            deadline = time.monotonic() + 15.0
            while len(got) < 60 and time.monotonic() < deadline:
                batch = await consumer.poll(3.0, max_records=25)
                assert batch.count() <= 25
                for r in batch:
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT)
                    got.append(r.offset)
                if batch.count() and len(got) < 60:
                    consumer.prefetch(max_records=min(25, 60 - len(got)))
            await consumer.commit_sync(timeout=10.0)
            return got

    got = asyncio.run(main())
    assert sorted(got) == list(range(60))
