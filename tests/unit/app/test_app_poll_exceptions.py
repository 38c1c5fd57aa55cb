"""A poll interrupted by a non-Kafka exception (KeyboardInterrupt in a
deserializer, ...) loses nothing: acknowledgements it took are still sent, and
records it did not hand out are neither accepted nor lost (issue 10, defect 4).

The consumer's network thread gets no broker (the address is unreachable); the
test plays its part by adding completed fetches to the fetch buffer, and
records what the consumer submits to it.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafka_share import AcknowledgeType, ShareConsumer
from kafka_share._handoff.events import AcknowledgeAsyncEvent, CompletedShareFetch, FetchEvent
from kafka_share.models import TopicIdPartition
from kafka_share.records.builder import NewRecord, build_batch
from tests.unit.app.helpers import take_acknowledged
from tests.unit.share.helpers import as_dict

NOWHERE = "127.0.0.1:9"
TIP0 = TopicIdPartition(uuid.UUID(int=11), "jobs", 0)
TIP1 = TopicIdPartition(uuid.UUID(int=11), "jobs", 1)
NODE = 1


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt without disturbing pytest."""


def deserialize(value: bytes) -> bytes:
    if value == b"interrupt":
        raise Interrupt
    return value


def fetch(tip: TopicIdPartition, base: int, values: list[bytes], node: int = NODE) -> Any:
    data = build_batch([NewRecord(key=None, value=v) for v in values], base_offset=base)
    last = base + len(values) - 1
    return CompletedShareFetch(node, tip, memoryview(data), [(base, last, 1)])


class Recorder:
    """Wraps the network thread's submit to see what the consumer hands it."""

    def __init__(self, consumer: ShareConsumer[Any, Any]) -> None:
        self.events: list[object] = []
        real = consumer._thread.submit

        def submit(event: Any) -> None:
            self.events.append(event)
            real(event)

        consumer._thread.submit = submit  # type: ignore[method-assign]

    def acked(self, tip: TopicIdPartition) -> dict[int, int]:
        out: dict[int, int] = {}
        for e in self.events:
            if isinstance(e, (FetchEvent, AcknowledgeAsyncEvent)) and tip in e.acks:
                out.update(as_dict(e.acks[tip].acknowledgements))
        return out


def consumer(**config: Any) -> ShareConsumer[Any, Any]:
    c: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=NOWHERE, group_id="g", value_deserializer=deserialize, **config
    )
    c.subscribe(["jobs"])
    return c


@pytest.mark.parametrize("mode", ["explicit", "implicit"])
@pytest.mark.parametrize("acquire", ["batch_optimized", "record_limit"])
def test_acks_taken_by_an_interrupted_poll_are_still_sent(mode: str, acquire: str) -> None:
    with consumer(share_acknowledgement_mode=mode, share_acquire_mode=acquire) as c:
        sent = Recorder(c)
        c._core._fetch_buffer.add_all([fetch(TIP0, 0, [b"a", b"b"])])
        records = list(c.poll(1.0))
        assert [r.offset for r in records] == [0, 1]
        if mode == "explicit":
            for r in records:
                c.acknowledge(r, AcknowledgeType.ACCEPT)
        c._core._fetch_buffer.add_all([fetch(TIP0, 2, [b"c", b"interrupt", b"d"])])
        with pytest.raises(Interrupt):
            c.poll(1.0)
        pending = {
            o: t for tip, (_, acks) in take_acknowledged(c._core._in_flight).items()
            if tip == TIP0 for o, t in acks.items()
        }
        # Sent to the network thread, or still in the batch for the next poll: not lost.
        assert {**sent.acked(TIP0), **pending} == {0: 1, 1: 1}


def test_records_of_an_interrupted_poll_are_handed_out_by_the_next_one() -> None:
    fail = {"on": True}

    def flaky(value: bytes) -> bytes:
        if value == b"interrupt" and fail["on"]:
            raise Interrupt
        return value

    c: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=NOWHERE, group_id="g", value_deserializer=flaky,
        share_acknowledgement_mode="implicit",
    )
    with c:
        c.subscribe(["jobs"])
        sent = Recorder(c)
        # One response, two partitions: the first is delivered in full before the
        # second one's deserializer is interrupted.
        c._core._fetch_buffer.add_all(
            [fetch(TIP0, 0, [b"x", b"y"]), fetch(TIP1, 0, [b"interrupt"])]
        )
        with pytest.raises(Interrupt):
            c.poll(1.0)
        fail["on"] = False
        got = {(r.partition, r.offset) for r in c.poll(1.0)}
        # Nothing of the interrupted poll reached the application, so nothing of
        # it may be accepted: the next poll hands it all out.
        assert got == {(0, 0), (0, 1), (1, 0)}
        assert sent.acked(TIP0) == {} and sent.acked(TIP1) == {}
