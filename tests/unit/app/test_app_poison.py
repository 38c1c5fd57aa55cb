"""Poison records stay acquired until the application had its chance (issue 10,
defect 6): the failed record's default RELEASE is not sent by the commit after
the poll that returned the good records before it; ``acknowledge_offset`` can
REJECT it after the poll that raised the error; the default only applies at the
poll after the error was raised, or the next commit after that.

The network thread has no broker; the test adds completed fetches to the fetch
buffer as it would, and records the acknowledgements the consumer hands it.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafka_share import AcknowledgeType, RecordDeserializationError, ShareConsumer
from kafka_share._handoff.events import (
    AcknowledgeAsyncEvent,
    AcknowledgeSyncEvent,
    CompletedShareFetch,
    FetchEvent,
)
from kafka_share.errors import KafkaTimeoutError
from kafka_share.models import TopicIdPartition
from kafka_share.records.builder import NewRecord, build_batch
from tests.unit.share.helpers import as_dict

NOWHERE = "127.0.0.1:9"
TIP = TopicIdPartition(uuid.UUID(int=12), "jobs", 0)
ACCEPT, RELEASE, REJECT = 1, 2, 3


def deserialize(value: bytes) -> bytes:
    if value == b"poison":
        raise ValueError("not a job")
    return value


class Harness:
    def __init__(self, mode: str = "explicit") -> None:
        self.c: ShareConsumer[Any, Any] = ShareConsumer(
            bootstrap_servers=NOWHERE, group_id="g", value_deserializer=deserialize,
            share_acknowledgement_mode=mode,
        )
        self.c.subscribe(["jobs"])
        self.events: list[Any] = []
        real = self.c._thread.submit

        def submit(event: Any) -> None:
            self.events.append(event)
            real(event)

        self.c._thread.submit = submit  # type: ignore[method-assign]

    def deliver(self, values: list[bytes]) -> None:
        data = build_batch([NewRecord(key=None, value=v) for v in values], base_offset=0)
        self.c._core._fetch_buffer.add_all(
            [CompletedShareFetch(1, TIP, memoryview(data), [(0, len(values) - 1, 1)])]
        )

    def sent(self) -> dict[int, int]:
        """Every acknowledgement handed to the network thread so far, by offset."""
        out: dict[int, int] = {}
        for e in self.events:
            kinds = (FetchEvent, AcknowledgeAsyncEvent, AcknowledgeSyncEvent)
            if isinstance(e, kinds) and TIP in e.acks:
                out.update(as_dict(e.acks[TIP].acknowledgements))
        return out

    def commit(self) -> None:
        # Nobody answers: the commit hands its acks over and times out.
        with pytest.raises(KafkaTimeoutError):
            self.c.commit_sync(timeout=0.05)


@pytest.fixture
def h() -> Any:
    harness = Harness()
    yield harness
    harness.c.close(timeout=0.1)


def test_the_commit_after_the_good_records_does_not_release_the_poison_record(h: Any) -> None:
    h.deliver([b"a", b"poison", b"b"])
    good = list(h.c.poll(1.0))
    assert [r.offset for r in good] == [0]
    h.c.acknowledge(good[0])
    h.commit()
    assert h.sent() == {0: ACCEPT}  # not yet the poison record's RELEASE
    with pytest.raises(RecordDeserializationError) as info:
        h.c.poll(1.0)
    err = info.value
    assert err.offset == 1
    # The application's chance: REJECT it by coordinates.
    h.c.acknowledge_offset(err.topic, err.partition, err.offset, AcknowledgeType.REJECT)
    h.commit()
    assert h.sent() == {0: ACCEPT, 1: REJECT}
    assert [r.offset for r in h.c.poll(1.0)] == [2]


def test_without_an_override_the_poll_after_the_error_releases_it(h: Any) -> None:
    h.deliver([b"a", b"poison", b"b"])
    h.c.acknowledge(next(iter(h.c.poll(1.0))))
    with pytest.raises(RecordDeserializationError):
        h.c.poll(1.0)
    assert 1 not in h.sent()
    rest = list(h.c.poll(1.0))
    assert [r.offset for r in rest] == [2]
    assert h.sent()[1] == RELEASE


def test_without_an_override_the_commit_after_the_error_releases_it(h: Any) -> None:
    h.deliver([b"poison", b"b"])
    with pytest.raises(RecordDeserializationError):
        h.c.poll(1.0)  # nothing before it: raised at once
    h.commit()
    assert h.sent() == {0: RELEASE}
    # Sent: it can no longer be acknowledged, and the error says so.
    with pytest.raises(Exception, match="already acknowledged"):
        h.c.acknowledge_offset("jobs", 0, 0, AcknowledgeType.REJECT)


def test_implicit_mode_releases_the_poison_record_at_the_poll_after_the_error() -> None:
    h = Harness(mode="implicit")
    try:
        h.deliver([b"a", b"poison", b"b"])
        assert [r.offset for r in h.c.poll(1.0)] == [0]
        h.commit()
        assert h.sent() == {0: ACCEPT}
        with pytest.raises(RecordDeserializationError):
            h.c.poll(1.0)
        assert [r.offset for r in h.c.poll(1.0)] == [2]
        assert h.sent()[1] == RELEASE
    finally:
        h.c.close(timeout=0.1)
