"""When the threaded consumer asks for the next response after a large one.

A response too large to fetch ahead of (over ``AHEAD_MAX_HELD`` records) is
fetched for by the poll after the one that hands out its last records, so the
ShareFetch acknowledges all of them (the asyncio facade's twin is in
``tests/unit/test_aio_consumer_api.py``). The network thread gets no broker;
the test adds completed fetches to the fetch buffer and records what the
consumer submits.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafka_share import ShareConsumer
from kafka_share._handoff.events import CompletedShareFetch, FetchEvent
from kafka_share.models import TopicIdPartition
from kafka_share.records.builder import NewRecord, build_batch
from tests.unit.share.helpers import as_dict

TIP = TopicIdPartition(uuid.UUID(int=12), "jobs", 0)


def fetch(base: int, count: int) -> CompletedShareFetch:
    data = build_batch(
        [NewRecord(key=None, value=b"v%d" % i) for i in range(base, base + count)],
        base_offset=base,
    )
    return CompletedShareFetch(1, TIP, memoryview(data), [(base, base + count - 1, 1)])


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_the_fetch_after_a_large_response_carries_the_acks_of_all_its_records(
    mode: str,
) -> None:
    c: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers="127.0.0.1:9", group_id="g", max_poll_records=500,
        share_acknowledgement_mode=mode,
    )
    #: the offsets acknowledged by each FetchEvent submitted (as submitted)
    submitted: list[list[int]] = []
    real = c._thread.submit

    def submit(event: Any) -> None:
        if isinstance(event, FetchEvent):
            acks = event.acks.get(TIP)
            submitted.append(sorted(as_dict(acks.acknowledgements)) if acks else [])
        real(event)

    c._thread.submit = submit  # type: ignore[method-assign]
    try:
        c.subscribe(["jobs"])
        c._core._fetch_buffer.add_all([fetch(0, 1200)])
        per_poll: list[list[list[int]]] = []
        counts: list[int] = []
        for _ in range(4):
            submitted.clear()
            records = c.poll(0.05)
            counts.append(records.count())
            per_poll.append(list(submitted))
            if mode == "explicit":
                for r in records:
                    c.acknowledge(r)
    finally:
        c.close(timeout=0.5)
    assert counts == [500, 500, 200, 0]
    assert per_poll[2] == [], "the poll handing out the last records fetched before their acks"
    assert per_poll[3] == [list(range(1000, 1200))]
