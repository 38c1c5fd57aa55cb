"""A max.poll.records above the broker's per-partition lock limit
(``group.share.partition.max.record.locks``, 2000 by default) against a real
broker.

The poll that drained the buffer used to ask for the next ShareFetch while its
own records were still acquired: the broker found the share-partition at its
limit, acquired nothing and held the fetch for ``fetch.max.wait.ms`` while the
acks that would free it waited behind, once per response. With
``fetch.max.wait.ms`` at 10 s every such response costs 10 s, so consuming
20,000 backlogged records (two or three responses) took 10 to 20 s; without
the stall it takes well under a second. The bound of 8 s leaves a wide margin
for a loaded machine and is still broken by a single stall.

The application works on each batch for :data:`WORK_S`: with no work at all,
the next poll could take the acks before the network thread sent the fetch,
and the fetch then carried them (a race that hid the stall).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from share_helpers import apoll_until, poll_until

from kafka_share import ConsumerRecord
from kafka_share.aio import AsyncShareConsumer

pytestmark = pytest.mark.integration

TOTAL = 20_000
MAX_POLL = 5_000
BOUND_S = 8.0
WORK_S = 0.02
CONFIG: dict[str, Any] = {"max_poll_records": MAX_POLL, "fetch_max_wait_ms": 10_000}


def _produce(kafka_produce: Any, topic: str) -> None:
    kafka_produce(topic, [b"x" * 100 for _ in range(TOTAL)], partition=0)


def _check(seen: list[ConsumerRecord[Any, Any]], elapsed_s: float) -> None:
    print(f"{TOTAL} records in {elapsed_s:.2f} s after the first")
    assert len({r.offset for r in seen}) == TOTAL, f"got {len(seen)} records of {TOTAL}"
    assert len(seen) == TOTAL, "a record was delivered twice"
    assert elapsed_s < BOUND_S, (
        f"{TOTAL} backlogged records took {elapsed_s:.1f} s after the first one: "
        "fetches waited on the broker's record-lock limit"
    )


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_max_poll_records_above_the_lock_limit_does_not_stall_fetching(
    mode: str, topic_factory: Any, share_group: str, kafka_produce: Any,
    consumer_factory: Any,
) -> None:
    topic = topic_factory(partitions=1)
    _produce(kafka_produce, topic)
    consumer = consumer_factory(share_group, share_acknowledgement_mode=mode, **CONFIG)
    consumer.subscribe([topic])
    # Time from the first record: joining the group is not what is measured.
    first = poll_until(consumer, lambda s: len(s) > 0, timeout_s=60)
    assert first, "no record within 60 s"
    started = time.monotonic()

    def ack(batch: list[ConsumerRecord[Any, Any]]) -> None:
        if mode == "explicit":
            for r in batch:
                consumer.acknowledge(r)
        time.sleep(WORK_S)

    ack(first)
    rest = poll_until(
        consumer, lambda s: len(first) + len(s) >= TOTAL, timeout_s=60, on_batch=ack
    )
    elapsed_s = time.monotonic() - started
    _check(first + rest, elapsed_s)
    assert all(err is None for err in consumer.commit_sync(timeout=10.0).values())


def test_the_async_consumer_does_not_stall_either(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    _produce(kafka_produce, topic)

    async def main() -> tuple[list[ConsumerRecord[Any, Any]], float]:
        async with AsyncShareConsumer(
            bootstrap_servers=kafka_bootstrap, group_id=share_group, **CONFIG
        ) as consumer:
            await consumer.subscribe([topic])
            seen = await apoll_until(consumer, lambda s: len(s) > 0, timeout_s=60)
            assert seen, "no record within 60 s"
            started = time.monotonic()
            deadline = started + 60
            while len(seen) < TOTAL and time.monotonic() < deadline:
                await asyncio.sleep(WORK_S)
                seen.extend(await consumer.poll(0.5))
            return seen, time.monotonic() - started

    seen, elapsed_s = asyncio.run(main())
    _check(seen, elapsed_s)
