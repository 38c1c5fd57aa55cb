"""subscribe(pattern=...) against a real broker: the matching topics consumed, a
topic created later joined within metadata.max.age.ms, a deleted one left while
the others carry on; both consumers."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from share_helpers import apoll_until, poll_until, run_loop

from kafka_share import ConsumerRecord
from kafka_share.admin import Admin
from kafka_share.aio import AsyncShareConsumer
from kafka_share.errors import GroupIdNotFoundError
from kafka_share.testing import unique_name

pytestmark = pytest.mark.integration

#: metadata.max.age.ms of these tests: how soon a new or deleted topic is noticed
MAX_AGE_MS = 1_000
#: what a topic created later may take on top (the heartbeat that tells the
#: broker and its answer with the new assignment, the first fetch)
SLACK_S = 10.0


def _values(records: list[ConsumerRecord[Any, Any]], topic: str) -> set[bytes]:
    return {r.value for r in records if r.topic == topic}


def _members(bootstrap: str, group: str) -> int:
    """Members of ``group`` (0 also when it does not exist yet)."""
    with Admin(bootstrap_servers=bootstrap) as admin:
        try:
            described = admin.describe_share_groups([group], timeout=10.0)
        except GroupIdNotFoundError:
            return 0
    return len(described[group].members)


def test_pattern_consumes_matching_topics_joins_a_new_one_and_survives_a_deletion(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_admin: Any,
    consumer_factory: Any,
) -> None:
    prefix = unique_name("pattern")
    a = topic_factory(name=f"{prefix}-a", partitions=2)
    b = topic_factory(name=f"{prefix}-b")
    other = topic_factory(name=f"{prefix}x-other")  # the prefix, but not "<prefix>-..."
    for topic in (a, b, other):
        kafka_produce(topic, [f"{topic}-{i}".encode() for i in range(5)], partition=0)

    c = consumer_factory(share_group, metadata_max_age_ms=MAX_AGE_MS)
    c.subscribe(pattern=re.escape(prefix) + "-.*")
    seen = poll_until(c, lambda s: len(_values(s, a)) + len(_values(s, b)) >= 10, timeout_s=30)
    assert _values(seen, a) == {f"{a}-{i}".encode() for i in range(5)}
    assert _values(seen, b) == {f"{b}-{i}".encode() for i in range(5)}
    assert not _values(seen, other), "a topic the pattern does not match as a whole"
    assert c.subscription() == {a, b}

    created = topic_factory(name=f"{prefix}-c")
    kafka_produce(created, [b"late"], partition=0)
    start = time.monotonic()
    late = poll_until(c, lambda s: bool(_values(s, created)), timeout_s=MAX_AGE_MS / 1000 + SLACK_S)
    took_s = time.monotonic() - start
    print(f"records of a topic created later arrived after {took_s:.2f} s")
    assert _values(late, created) == {b"late"}, f"nothing from {created} in {took_s:.1f} s"
    assert c.subscription() == {a, b, created}

    kafka_admin.delete_topic(a)
    deadline = time.monotonic() + MAX_AGE_MS / 1000 + SLACK_S
    while c.subscription() != {b, created} and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.subscription() == {b, created}
    kafka_produce(b, [b"after"], partition=0)
    kafka_produce(created, [b"after"], partition=0)
    after = poll_until(
        c, lambda s: b"after" in _values(s, b) and b"after" in _values(s, created),
        timeout_s=30,
    )
    assert b"after" in _values(after, b) and b"after" in _values(after, created)
    results = c.commit_sync(timeout=10.0)
    assert all(err is None for err in results.values()), results


def test_async_pattern_matching_nothing_waits_out_of_the_group_then_consumes(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_admin: Any,
    kafka_bootstrap: str,
) -> None:
    prefix = unique_name("apattern")

    async def main() -> None:
        consumer: AsyncShareConsumer[Any, Any] = AsyncShareConsumer(
            bootstrap_servers=kafka_bootstrap, group_id=share_group,
            metadata_max_age_ms=MAX_AGE_MS,
        )
        async with consumer:
            await consumer.subscribe(pattern=re.compile(re.escape(prefix) + r"-\d+"))
            # Nothing matches: no error, no records, no member in the group.
            assert await apoll_until(consumer, lambda s: False, timeout_s=2.0) == []
            assert consumer.subscription() == frozenset()
            assert _members(kafka_bootstrap, share_group) == 0

            one = topic_factory(name=f"{prefix}-1")
            two = topic_factory(name=f"{prefix}-2")
            topic_factory(name=f"{prefix}-x")  # not digits: not matched
            kafka_produce(one, [b"one"], partition=0)
            kafka_produce(two, [b"two"], partition=0)
            kafka_produce(f"{prefix}-x", [b"x"], partition=0)
            got = await apoll_until(
                consumer, lambda s: bool(_values(s, one)) and bool(_values(s, two)),
                timeout_s=MAX_AGE_MS / 1000 + SLACK_S,
            )
            assert _values(got, one) == {b"one"} and _values(got, two) == {b"two"}
            assert all(r.topic in (one, two) for r in got)
            assert consumer.subscription() == {one, two}

            kafka_admin.delete_topic(one)
            kafka_produce(two, [b"still"], partition=0)
            more = await apoll_until(
                consumer, lambda s: b"still" in _values(s, two),
                timeout_s=MAX_AGE_MS / 1000 + SLACK_S,
            )
            assert b"still" in _values(more, two)
            deadline = time.monotonic() + MAX_AGE_MS / 1000 + SLACK_S
            while consumer.subscription() != {two} and time.monotonic() < deadline:
                await consumer.poll(0.2)
            assert consumer.subscription() == {two}

    run_loop(main())
