"""Share requests' wire pieces: topics of acknowledgement batches, forgotten
topics, and the encode-time guard of v2-only features."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kafka_share.models import TopicIdPartition
from kafka_share.protocol.messages import ShareAcknowledgeRequest, ShareFetchRequest
from kafka_share.share.acknowledgements import AckBatch
from kafka_share.share.capabilities import ShareCapabilities, ShareFeature
from kafka_share.share.unsent import VersionedRequest

__all__ = ["ack_topics", "by_topic", "fetch_topics", "forgotten", "guard_v2_features"]


def guard_v2_features(
    request: ShareFetchRequest | ShareAcknowledgeRequest,
) -> ShareFetchRequest | ShareAcknowledgeRequest | VersionedRequest:
    """Refuse to send KIP-1222/KIP-1206 features at v1 instead of dropping them.

    ``ShareAcquireMode`` is an ignorable field, so encoding a record_limit fetch
    at v1 would silently fetch in batch_optimized mode. The version is only known
    once the connection has negotiated it, hence the deferred check.
    """
    renew = request.is_renew_ack
    record_limit = isinstance(request, ShareFetchRequest) and request.share_acquire_mode == 1
    if not (renew or record_limit):
        return request

    def build(version: int) -> ShareFetchRequest | ShareAcknowledgeRequest:
        caps = ShareCapabilities(version)
        caps.require(ShareFeature.RECORD_LIMIT if record_limit else ShareFeature.RENEW)
        return request

    return VersionedRequest(request.API_KEY, build)


_T = TypeVar("_T")
_Topic = TypeVar("_Topic")


def by_topic(items: Iterable[tuple[TopicIdPartition, _T]]) -> dict[uuid.UUID, list[_T]]:
    """Group per-partition wire entries under their topic id, in first-seen order."""
    grouped: dict[uuid.UUID, list[_T]] = {}
    for tip, item in items:
        grouped.setdefault(tip.topic_id, []).append(item)
    return grouped


def fetch_topics(
    topics: Mapping[TopicIdPartition, list[AckBatch]],
) -> list[ShareFetchRequest.FetchTopic]:
    return _acked_topics(topics, ShareFetchRequest.FetchTopic, ShareFetchRequest.FetchPartition,
                         ShareFetchRequest.AcknowledgementBatch)


def forgotten(tips: Iterable[TopicIdPartition]) -> list[ShareFetchRequest.ForgottenTopic]:
    grouped = by_topic((tip, tip.partition) for tip in tips)
    return [ShareFetchRequest.ForgottenTopic(topic_id=t, partitions=p) for t, p in grouped.items()]


def ack_topics(
    topics: Mapping[TopicIdPartition, list[AckBatch]],
) -> list[ShareAcknowledgeRequest.AcknowledgeTopic]:
    return _acked_topics(topics, ShareAcknowledgeRequest.AcknowledgeTopic,
                         ShareAcknowledgeRequest.AcknowledgePartition,
                         ShareAcknowledgeRequest.AcknowledgementBatch)


def _acked_topics(
    topics: Mapping[TopicIdPartition, list[AckBatch]],
    topic: Callable[..., _Topic],
    partition: Callable[..., Any],
    batch: Callable[..., Any],
) -> list[_Topic]:
    """The topics of a ShareFetch or ShareAcknowledge (same fields, classes of
    their own): each partition with its acknowledgement batches."""
    grouped = by_topic(
        (
            tip,
            partition(
                partition_index=tip.partition,
                acknowledgement_batches=[
                    batch(
                        first_offset=b.first_offset,
                        last_offset=b.last_offset,
                        acknowledge_types=list(b.acknowledge_types),
                    )
                    for b in batches
                ],
            ),
        )
        for tip, batches in topics.items()
    )
    return [topic(topic_id=t, partitions=p) for t, p in grouped.items()]
