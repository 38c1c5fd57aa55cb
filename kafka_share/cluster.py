"""Cluster metadata cache: brokers, topic names and ids, partition leaders.

Sans-IO: the network thread feeds it Metadata responses and the leader hints
carried by ShareFetch/ShareAcknowledge responses (CurrentLeader plus
NodeEndpoints); everything else reads from it. Time comes in as ``now_ms``.

Bootstrap servers get negative node ids (-1, -2, ...) so they never collide
with real broker ids; they are only used until the first Metadata answer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence

import attrs

from kafka_share._reprs import attrs_repr

__all__ = ["BrokerInfo", "ClusterMetadata", "PartitionLeader"]

log = logging.getLogger("kafka_share.metadata")


@attrs_repr
@attrs.frozen(repr=False)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@attrs_repr
@attrs.frozen(repr=False)
class PartitionLeader:
    leader_id: int
    leader_epoch: int


@attrs_repr
@attrs.frozen(repr=False)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    error_code: int
    #: partition index -> leader (leader_id -1 when unknown)
    partitions: dict[int, PartitionLeader]


class ClusterMetadata:
    """What the consumer knows about the cluster. Owned by the network thread."""

    def __init__(self, bootstrap: Sequence[tuple[str, int]], *, metadata_max_age_ms: int) -> None:
        if not bootstrap:
            raise ValueError("at least one bootstrap server is required")
        self._bootstrap = {
            -(i + 1): BrokerInfo(-(i + 1), h, p) for i, (h, p) in enumerate(bootstrap)
        }
        self._max_age_ms = metadata_max_age_ms
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id: int = -1
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.leaders: dict[tuple[str, int], PartitionLeader] = {}
        self._last_update_ms: int | None = None
        self._update_requested = True
        self._bootstrap_cursor = 0
        #: Bumped on every update, so callers can notice changes cheaply.
        self.version = 0

    # -- addresses ---------------------------------------------------------

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        info = self.brokers.get(node_id) or self._bootstrap.get(node_id)
        return (info.host, info.port) if info is not None else None

    def any_node(self) -> int:
        """A node to send cluster-wide requests to: a known broker, else a bootstrap server."""
        candidates = sorted(self.brokers) or sorted(self._bootstrap, reverse=True)
        node = candidates[self._bootstrap_cursor % len(candidates)]
        return node

    def rebootstrap(self) -> None:
        """Forget the brokers learned from metadata and start again from the
        bootstrap servers (``metadata.recovery.strategy=rebootstrap``): every known
        broker may have been replaced (a cluster rebuilt behind the same names)."""
        self.brokers = {}
        self._bootstrap_cursor = 0
        self.request_update()

    def rotate_node(self) -> None:
        """Try another node next time (after a failure to reach one)."""
        self._bootstrap_cursor += 1

    # -- freshness ---------------------------------------------------------------

    def request_update(self) -> None:
        self._update_requested = True

    def needs_update(self, now_ms: int) -> bool:
        if self._update_requested or self._last_update_ms is None:
            return True
        return now_ms - self._last_update_ms >= self._max_age_ms

    def time_to_next_update_ms(self, now_ms: int) -> int:
        if self.needs_update(now_ms):
            return 0
        assert self._last_update_ms is not None
        return self._last_update_ms + self._max_age_ms - now_ms

    # -- updates -------------------------------------------------------------------

    def update(
        self,
        now_ms: int,
        brokers: Iterable[BrokerInfo],
        topics: Iterable[TopicMetadata],
        controller_id: int = -1,
    ) -> None:
        """Replace the cache with a Metadata response's content."""
        self.brokers = {b.node_id: b for b in brokers}
        self.controller_id = controller_id
        self.topics = {}
        self.topic_ids = {}
        self.topic_names = {}
        self.leaders = {}
        for t in topics:
            self.topics[t.name] = t
            if t.error_code == 0 and t.topic_id.int != 0:
                self.topic_ids[t.name] = t.topic_id
                self.topic_names[t.topic_id] = t.name
                for p, leader in t.partitions.items():
                    self.leaders[(t.name, p)] = leader
        self._last_update_ms = now_ms
        self._update_requested = False
        self.version += 1

    def update_leader(
        self, topic: str, partition: int, leader: PartitionLeader, endpoints: Iterable[BrokerInfo]
    ) -> bool:
        """Apply a CurrentLeader hint; only a newer epoch wins. Returns True if applied."""
        for b in endpoints:
            self.brokers.setdefault(b.node_id, b)
        if leader.leader_id < 0 or leader.leader_epoch < 0:
            self.request_update()
            return False
        current = self.leaders.get((topic, partition))
        if current is not None and current.leader_epoch >= leader.leader_epoch:
            return False
        self.leaders[(topic, partition)] = leader
        self.version += 1
        if leader.leader_id not in self.brokers:
            self.request_update()
        return True

    def leader_of(self, topic: str, partition: int) -> int | None:
        leader = self.leaders.get((topic, partition))
        if leader is None or leader.leader_id < 0:
            return None
        return leader.leader_id

    def forget_topic_id(self, topic_id: uuid.UUID) -> None:
        name = self.topic_names.pop(topic_id, None)
        if name is not None and self.topic_ids.get(name) == topic_id:
            del self.topic_ids[name]
        self.request_update()
