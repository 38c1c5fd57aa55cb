"""Acknowledgements on their way out: merging a poll's acks, and what explicit
mode says about records left unacknowledged."""

from __future__ import annotations

from collections.abc import Mapping

from kafka_share._handoff.events import AcksByPartition
from kafka_share.models import TopicIdPartition


def _unacknowledged_message(left: Mapping[TopicIdPartition, int]) -> str:
    """Java's message, with what is missing: how many records, from where."""
    total = sum(left.values())
    shown = sorted(left.items(), key=lambda item: (item[0].topic, item[0].partition))
    where = ", ".join(f"{tip.topic}-{tip.partition}: {n}" for tip, n in shown[:10])
    if len(shown) > 10:
        where += f", and {len(shown) - 10} more partitions"
    return (
        "All records must be acknowledged in explicit acknowledgement mode: "
        f"{total} record{'s' if total != 1 else ''} of the last poll "
        f"{'are' if total != 1 else 'is'} not ({where}). Call acknowledge() for each "
        "(ACCEPT, RELEASE, REJECT or RENEW) before the next poll"
    )


def _merge_acks(
    first: AcksByPartition, second: AcksByPartition
) -> tuple[AcksByPartition, AcksByPartition]:
    """``second`` merged into ``first`` where both go to the same node, and the
    acks of ``second`` bound for another node than ``first``'s for that partition
    (records delivered by a new leader after a leader move): those go apart."""
    if not second:
        return first, {}
    merged = dict(first)
    elsewhere: AcksByPartition = {}
    for tip, node_acks in second.items():
        existing = merged.get(tip)
        if existing is None:
            merged[tip] = node_acks
        elif existing.node_id != node_acks.node_id:
            elsewhere[tip] = node_acks
        else:
            existing.acknowledgements.merge(node_acks.acknowledgements)
    return merged, elsewhere
