"""Records staged already: what a read slot drops when the group hands them out again.

A slot stages what it acquired, then ACCEPTs it (:mod:`._slots`). An attempt
that dies between the two (its executor killed, its Python worker gone), or
whose ACCEPT fails because the records' locks ran out, leaves records that are
in their batch (every later attempt of the slot replays the chunk) but that the
broker never saw accepted: once the dead member's connection closes, or the
locks run out, it hands them out again, with a higher delivery count. Read
again, they would be in two batches, or twice in one.

So a slot looks up each record it acquires with a delivery count above 1 among
the chunks staged in this query run: the running batch's (every slot's, since
another slot of the batch may have staged it) and the last committed batches'
(the driver keeps :data:`RETAINED_BATCHES` of them). A record staged there with
a lower delivery count is in a batch already: the slot ACCEPTs it and neither
stages nor yields it. A record the broker released for another reason (a lost
race's records, given back at the end of a slot; a task that died before
staging) is in no chunk, and is read as usual.

The broker re-acquires a released record on the next fetch from its partition
(records are acquired in offset order), so in a running query within the same
batch or the next; after a restart, in the first batch. A record handed out
again only after more committed batches than are kept is read twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka_share.spark._staging import Span

__all__ = ["RETAINED_BATCHES", "StagedIndex"]

#: Committed batches whose chunks the driver keeps for this lookup.
RETAINED_BATCHES = 10


class StagedIndex:
    """The staged spans of some chunks, looked up by record."""

    def __init__(self) -> None:
        #: (topic, partition) -> [(first offset, last offset, delivery count)]
        self._spans: dict[tuple[str, int], list[tuple[int, int, int]]] = {}

    def add(self, spans: Iterable[Span]) -> None:
        for topic, partition, first, last, count in spans:
            self._spans.setdefault((topic, partition), []).append((first, last, count))

    def staged_before(self, topic: str, partition: int, offset: int, delivery_count: int) -> bool:
        """Whether the record was staged with a lower delivery count than
        ``delivery_count``: it was handed out before and is in a batch."""
        # Only records delivered more than once are looked up, rarely many: a
        # scan of the partition's spans (a few hundred at most) is enough.
        return any(
            first <= offset <= last and count < delivery_count
            for first, last, count in self._spans.get((topic, partition), ())
        )
