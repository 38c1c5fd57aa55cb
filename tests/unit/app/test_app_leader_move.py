"""One partition's records from two nodes in a row (a fetch ahead across a
leader move): a poll hands out the first node's records only, the next poll the
second node's, and every acknowledgement goes to the node that delivered the
record (issue 10, defect 3). Never half a batch, never a record accepted that
the application did not see.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafka_share import ShareConsumer
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
TIP = TopicIdPartition(uuid.UUID(int=13), "jobs", 0)
OTHER = TopicIdPartition(uuid.UUID(int=13), "jobs", 1)
OLD_LEADER, NEW_LEADER = 1, 2
ACCEPT, GAP = 1, 0


def fetch(
    node: int, base: int, n: int, tip: TopicIdPartition = TIP, acquired_extra: int = 0
) -> CompletedShareFetch:
    data = build_batch(
        [NewRecord(key=None, value=f"v{base + i}".encode()) for i in range(n)], base_offset=base
    )
    return CompletedShareFetch(
        node, tip, memoryview(data), [(base, base + n - 1 + acquired_extra, 1)]
    )


class Harness:
    def __init__(self, mode: str) -> None:
        self.c: ShareConsumer[Any, Any] = ShareConsumer(
            bootstrap_servers=NOWHERE, group_id="g", share_acknowledgement_mode=mode
        )
        self.c.subscribe(["jobs"])
        self.events: list[Any] = []
        real = self.c._thread.submit

        def submit(event: Any) -> None:
            self.events.append(event)
            real(event)

        self.c._thread.submit = submit  # type: ignore[method-assign]

    def sent(self, tip: TopicIdPartition = TIP) -> list[tuple[int, dict[int, int]]]:
        """(node, acks) of every acknowledgement batch handed to the network thread."""
        out = []
        for e in self.events:
            kinds = (FetchEvent, AcknowledgeAsyncEvent, AcknowledgeSyncEvent)
            if isinstance(e, kinds) and tip in e.acks:
                node_acks = e.acks[tip]
                out.append((node_acks.node_id, as_dict(node_acks.acknowledgements)))
        return out

    def by_node(self, tip: TopicIdPartition = TIP) -> dict[int, dict[int, int]]:
        merged: dict[int, dict[int, int]] = {}
        for node, acks in self.sent(tip):
            merged.setdefault(node, {}).update(acks)
        return merged


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_records_of_one_partition_from_two_nodes_go_out_in_two_polls(mode: str) -> None:
    h = Harness(mode)
    with h.c:
        # Both responses are queued when the poll starts; the new leader's also
        # acquired an offset without a record (a GAP).
        h.c._core._fetch_buffer.add_all([fetch(OLD_LEADER, 0, 2)])
        h.c._core._fetch_buffer.add_all(
            [fetch(NEW_LEADER, 2, 2, acquired_extra=1), fetch(NEW_LEADER, 0, 1, tip=OTHER)]
        )
        first = list(h.c.poll(1.0))
        assert [(r.partition, r.offset) for r in first] == [(0, 0), (0, 1)]
        if mode == "explicit":
            for r in first:
                h.c.acknowledge(r)
        second = list(h.c.poll(1.0))
        assert sorted((r.partition, r.offset) for r in second) == [(0, 2), (0, 3), (1, 0)]
        if mode == "explicit":
            for r in second:
                h.c.acknowledge(r)
        with pytest.raises(KafkaTimeoutError):  # nobody answers: handed over, then timed out
            h.c.commit_sync(timeout=0.05)
        assert h.by_node() == {
            OLD_LEADER: {0: ACCEPT, 1: ACCEPT},
            NEW_LEADER: {2: ACCEPT, 3: ACCEPT, 4: GAP},
        }
        assert h.by_node(OTHER) == {NEW_LEADER: {0: ACCEPT}}


def test_new_leader_records_wait_while_the_old_leader_holds_a_failed_record() -> None:
    def deserialize(value: bytes) -> bytes:
        if value == b"v1":
            raise ValueError("poison")
        return value

    c: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=NOWHERE, group_id="g", value_deserializer=deserialize
    )
    with c:
        c.subscribe(["jobs"])
        c._core._fetch_buffer.add_all([fetch(OLD_LEADER, 0, 2)])
        c._core._fetch_buffer.add_all([fetch(NEW_LEADER, 2, 2)])
        assert [r.offset for r in c.poll(1.0)] == [0]
        from kafka_share import RecordDeserializationError

        with pytest.raises(RecordDeserializationError):
            c.poll(1.0)
        # The failed record of the old leader is settled (RELEASE) by this poll,
        # then the new leader's records are handed out.
        got: list[int] = []
        for _ in range(3):
            got.extend(r.offset for r in c.poll(0.2))
        assert got == [2, 3]
