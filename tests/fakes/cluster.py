"""A sans-IO Kafka cluster for engine unit tests, and a driver that runs the
engine against it on a simulated clock.

:class:`FakeCluster` answers the engine's :class:`UnsentRequest` objects at the
message level (Metadata, FindCoordinator, ShareGroupHeartbeat, ShareFetch,
ShareAcknowledge) with just enough broker behaviour to exercise the engine's
policy: brokers that are down, partition leaders that move (with CurrentLeader
hints), brokers that restart and forget their share sessions, members that are
fenced, and share-partitions that hand out each offset once until it is
acknowledged (RELEASE makes it available again with a higher delivery count).

:class:`EngineDriver` plays the network thread's part on a simulated clock:
answers arrive after a latency (an empty ShareFetch after its ``max_wait_ms``,
as a broker long-polls), the clock jumps to the next answer or to the engine's
own next deadline, and the "application" acknowledges what it receives. Nothing
sleeps and nothing touches a socket, so a 10-second scenario runs in
milliseconds, and a busy loop shows up as a count, not as a hung test.
"""

from __future__ import annotations

import heapq
import itertools
import re
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs

from kafka_share.config import parse_config
from kafka_share.errors import KafkaError, NetworkError, UnsupportedVersionError
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.protocol.api_keys import ApiKey
from kafka_share.protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GetTelemetrySubscriptionsRequest,
    MetadataRequest,
    MetadataResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.engine import ConsumerEngine
from kafka_share.share.results import AcknowledgementCompletion, CompletedShareFetch, LocksLost
from kafka_share.share.unsent import AckResults, UnsentRequest, VersionedRequest

__all__ = ["EngineDriver", "FakeCluster"]

_NOT_LEADER = 6
_FENCED_MEMBER_EPOCH = 110
_SHARE_SESSION_NOT_FOUND = 122
_INVALID_SHARE_SESSION_EPOCH = 123
_UNKNOWN_MEMBER_ID = 25


@attrs.define
class _Partition:
    leader: int
    leader_epoch: int = 0
    #: offsets produced so far are 0 .. log_end - 1
    log_end: int = 0
    #: offset -> delivery count, for offsets acquired and not yet acknowledged
    acquired: dict[int, int] = attrs.field(factory=dict)
    #: offsets available again (released), with their last delivery count
    released: dict[int, int] = attrs.field(factory=dict)
    #: next never-delivered offset
    next_offset: int = 0
    accepted: set[int] = attrs.field(factory=set)
    #: offset -> when its acquisition lock ends (simulated clock)
    lock_deadline: dict[int, int] = attrs.field(factory=dict)


class FakeCluster:
    """Brokers ``1..n``, one topic, one share group, answering at message level."""

    def __init__(
        self,
        *,
        brokers: int = 3,
        topic: str = "t",
        leaders: dict[int, int] | None = None,
        coordinator: int = 1,
        records_per_partition: int = 0,
        max_records_per_fetch: int = 50,
        lock_ms: int = 30_000,
    ) -> None:
        self.brokers = list(range(1, brokers + 1))
        self.topic = topic
        self.topic_id = uuid.UUID(int=0x7E57)
        leaders = leaders or {p: self.brokers[p % brokers] for p in range(brokers)}
        self.partitions = {
            p: _Partition(leader=node, log_end=records_per_partition)
            for p, node in leaders.items()
        }
        self.coordinator = coordinator
        self.max_records_per_fetch = max_records_per_fetch
        #: nodes that refuse every request (the driver fails them as a transport would)
        self.down: set[int] = set()
        #: node -> the leader it claims for every partition it answers for with
        #: NOT_LEADER_OR_FOLLOWER (a lying broker: hints that point in a circle)
        self.false_hints: dict[int, int] = {}
        #: a ShareFetch sent now gets no answer for this long, then fails as a
        #: request timeout does (0: answered as usual)
        self.stall_share_fetch_ms = 0
        self.member_epoch = 0
        self.fence_next_heartbeat = False
        #: (node, member) -> the epoch the next request must carry
        self.sessions: dict[tuple[int, str], int] = {}
        #: (node, member) -> the partitions in that share session
        self.session_partitions: dict[tuple[int, str], set[int]] = {}
        #: every request, as (node, api name)
        self.received: list[tuple[int, str]] = []
        #: (partition, offset) -> how often it was delivered
        self.deliveries: Counter[tuple[int, int]] = Counter()
        #: the acquisition lock duration (group share.record.lock.duration.ms)
        self.lock_ms = lock_ms
        #: the simulated time (the driver sets it); locks run out on it
        self.now_ms = 0
        #: the group's share.renew.acknowledge.enable
        self.renew_enabled = True
        #: answer every ShareFetch with all records the member holds too, as
        #: librdkafka's mock cluster does (same delivery count: a resend)
        self.resend_held = False
        #: (partition, offset) -> how often its lock was renewed
        self.renewals: Counter[tuple[int, int]] = Counter()
        #: the topic whose records are fetched exists (False: created later, or deleted)
        self.topic_exists = True
        #: more topics in the metadata, one partition each, never assigned
        self.other_topics: dict[str, uuid.UUID] = {}
        #: the topic names of each Metadata request (None: all topics)
        self.metadata_requests: list[list[str] | None] = []
        #: (member epoch, SubscribedTopicNames) of each heartbeat
        self.heartbeats: list[tuple[int, list[str] | None]] = []
        #: the topics the member subscribed to, as the broker knows them
        self.member_topics: set[str] = set()

    # -- scenario controls --------------------------------------------------------

    def produce(self, partition: int, count: int) -> None:
        self.partitions[partition].log_end += count

    def move_leader(self, partition: int, to_node: int) -> None:
        p = self.partitions[partition]
        p.leader = to_node
        p.leader_epoch += 1

    def restart(self, node: int) -> None:
        """The broker restarts: its share sessions are gone, its locks released."""
        for key in [k for k in self.sessions if k[0] == node]:
            del self.sessions[key]
            self.session_partitions.pop(key, None)
        for p in self.partitions.values():
            if p.leader == node:
                p.released.update(p.acquired)
                p.acquired.clear()

    def count(self, api: str, node: int | None = None) -> int:
        return sum(1 for n, a in self.received if a == api and (node is None or n == node))

    @property
    def tips(self) -> list[TopicIdPartition]:
        return [TopicIdPartition(self.topic_id, self.topic, p) for p in sorted(self.partitions)]

    def all_accepted(self) -> bool:
        return all(len(p.accepted) == p.log_end for p in self.partitions.values())

    # -- answering ------------------------------------------------------------------

    def _expire_locks(self) -> None:
        for p in self.partitions.values():
            for offset in [o for o, t in p.lock_deadline.items() if t <= self.now_ms]:
                del p.lock_deadline[offset]
                count = p.acquired.pop(offset, None)
                if count is not None:
                    p.released[offset] = count

    def answer(self, req: UnsentRequest[Any]) -> tuple[Any, KafkaError | None]:
        self._expire_locks()
        request = req.request
        if isinstance(request, VersionedRequest):
            request = request.build(6 if request.api_key == ApiKey.FIND_COORDINATOR else 2)
        if isinstance(request, GetTelemetrySubscriptionsRequest):
            # As a broker without a telemetry reporter: it does not offer the API
            # (the connection refuses to encode the request). Not in `received`.
            return None, UnsupportedVersionError("GetTelemetrySubscriptions: not advertised")
        self.received.append((req.node_id, type(request).__name__))
        if req.node_id in self.down:
            return None, NetworkError(f"connection to node {req.node_id} refused")
        if isinstance(request, MetadataRequest):
            self.metadata_requests.append(
                None if request.topics is None else [t.name or "" for t in request.topics]
            )
            return self._metadata(all_topics=request.topics is None), None
        if isinstance(request, FindCoordinatorRequest):
            return FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
                key="g", node_id=self.coordinator, host=f"b{self.coordinator}", port=9092,
            )]), None
        if isinstance(request, ShareGroupHeartbeatRequest):
            return self._heartbeat(req.node_id, request), None
        if isinstance(request, ShareFetchRequest):
            return self._share_fetch(req.node_id, request), None
        if isinstance(request, ShareAcknowledgeRequest):
            return self._share_acknowledge(req.node_id, request), None
        raise AssertionError(f"unexpected request {request!r}")

    def _metadata(self, *, all_topics: bool = False) -> MetadataResponse:
        topics = []
        if self.topic_exists:
            topics.append(MetadataResponse.MetadataResponseTopic(
                name=self.topic, topic_id=self.topic_id,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        partition_index=i, leader_id=p.leader, leader_epoch=p.leader_epoch
                    )
                    for i, p in sorted(self.partitions.items())
                ],
            ))
        if all_topics:
            for name, topic_id in sorted(self.other_topics.items()):
                topics.append(MetadataResponse.MetadataResponseTopic(
                    name=name, topic_id=topic_id, is_internal=name.startswith("__"),
                    partitions=[MetadataResponse.MetadataResponsePartition(
                        partition_index=0, leader_id=self.brokers[0], leader_epoch=0
                    )],
                ))
        return MetadataResponse(
            brokers=[
                MetadataResponse.MetadataResponseBroker(node_id=n, host=f"b{n}", port=9092)
                for n in self.brokers
            ],
            topics=topics,
        )

    def _heartbeat(
        self, node: int, request: ShareGroupHeartbeatRequest
    ) -> ShareGroupHeartbeatResponse:
        if node != self.coordinator:
            return ShareGroupHeartbeatResponse(error_code=16)  # NOT_COORDINATOR
        names = request.subscribed_topic_names
        self.heartbeats.append((request.member_epoch, None if names is None else list(names)))
        if request.member_epoch == -1:
            self.member_topics = set()
            return ShareGroupHeartbeatResponse(member_epoch=-1)
        if request.member_epoch == 0 and not names:
            # The broker's check (GroupCoordinatorService): a join names its topics.
            return ShareGroupHeartbeatResponse(
                error_code=42, error_message="SubscribedTopicNames must be set in first request."
            )
        if names is not None:
            self.member_topics = set(names)
        if self.fence_next_heartbeat and request.member_epoch > 0:
            self.fence_next_heartbeat = False
            return ShareGroupHeartbeatResponse(error_code=_FENCED_MEMBER_EPOCH)
        self.member_epoch += 1
        return ShareGroupHeartbeatResponse(
            member_id=request.member_id,
            member_epoch=self.member_epoch,
            heartbeat_interval_ms=1000,
            assignment=ShareGroupHeartbeatResponse.Assignment(topic_partitions=[
                ShareGroupHeartbeatResponse.TopicPartitions(
                    topic_id=self.topic_id, partitions=sorted(self.partitions)
                )
            ] if self.topic_exists and self.topic in self.member_topics else []),
        )

    def _check_session(self, node: int, member: str, epoch: int) -> int:
        key = (node, member)
        if epoch == 0:
            self.sessions[key] = 1
            self.session_partitions[key] = set()
            return 0
        if epoch == -1:
            if key not in self.sessions:
                return _SHARE_SESSION_NOT_FOUND
            del self.sessions[key]
            self.session_partitions.pop(key, None)
            return 0
        expected = self.sessions.get(key)
        if expected is None:
            return _SHARE_SESSION_NOT_FOUND
        if expected != epoch:
            return _INVALID_SHARE_SESSION_EPOCH
        self.sessions[key] = epoch + 1 if epoch < 2**31 - 1 else 1
        return 0

    def _apply_acks(self, partition: int, batches: list[Any]) -> int:
        p = self.partitions[partition]
        error = 0
        for b in batches:
            types = list(b.acknowledge_types)
            for i, offset in enumerate(range(b.first_offset, b.last_offset + 1)):
                kind = types[0] if len(types) == 1 else types[i]
                if offset not in p.acquired:
                    error = 121  # INVALID_RECORD_STATE
                    continue
                if kind == 4:  # RENEW
                    if not self.renew_enabled:
                        error = 121
                        continue
                    p.lock_deadline[offset] = self.now_ms + self.lock_ms
                    self.renewals[(partition, offset)] += 1
                    continue
                count = p.acquired.pop(offset)
                p.lock_deadline.pop(offset, None)
                if kind in (1, 0):  # ACCEPT, or a GAP
                    p.accepted.add(offset)
                elif kind == 2:  # RELEASE
                    p.released[offset] = count
                elif kind == 3:  # REJECT: archived
                    p.accepted.add(offset)
        return error

    def _share_fetch(self, node: int, request: ShareFetchRequest) -> ShareFetchResponse:
        key = (node, request.member_id or "")
        code = self._check_session(node, key[1], request.share_session_epoch)
        if code:
            return ShareFetchResponse(error_code=code)
        # The session's partitions: those added now or earlier, less the forgotten.
        in_session = self.session_partitions.setdefault(key, set())
        for forgotten in request.forgotten_topics_data:
            in_session.difference_update(forgotten.partitions)
        acked: dict[int, int] = {}
        for t in request.topics:
            for fp in t.partitions:
                in_session.add(fp.partition_index)
                if fp.acknowledgement_batches:
                    acked[fp.partition_index] = self._apply_acks(
                        fp.partition_index, fp.acknowledgement_batches
                    )
        parts = []
        for index in sorted(in_session | set(acked)):
            p = self.partitions[index]
            data = ShareFetchResponse.PartitionData(
                partition_index=index, acknowledge_error_code=acked.get(index, 0)
            )
            if node in self.false_hints or p.leader != node:
                data.error_code = _NOT_LEADER
                data.current_leader = ShareFetchResponse.LeaderIdAndEpoch(
                    leader_id=self.false_hints.get(node, p.leader), leader_epoch=p.leader_epoch
                )
            elif request.max_records > 0 and index in in_session:
                held = sorted(p.acquired.items()) if self.resend_held else []
                data.acquired_records = self._acquire(index, p) + [
                    ShareFetchResponse.AcquiredRecords(
                        first_offset=o, last_offset=o, delivery_count=c)
                    for o, c in held
                ]
                if data.acquired_records:
                    data.records = b"records"
            if data.error_code or data.acquired_records or index in acked:
                parts.append(data)
        topics = [ShareFetchResponse.ShareFetchableTopicResponse(
            topic_id=self.topic_id, partitions=parts
        )] if parts else []
        endpoints = [
            ShareFetchResponse.NodeEndpoint(node_id=n, host=f"b{n}", port=9092)
            for n in self.brokers
        ]
        return ShareFetchResponse(
            acquisition_lock_timeout_ms=self.lock_ms, responses=topics, node_endpoints=endpoints
        )

    def _acquire(self, index: int, p: _Partition) -> list[ShareFetchResponse.AcquiredRecords]:
        out: list[ShareFetchResponse.AcquiredRecords] = []
        budget = self.max_records_per_fetch
        for offset in sorted(p.released)[:budget]:
            count = p.released.pop(offset) + 1
            p.acquired[offset] = count
            p.lock_deadline[offset] = self.now_ms + self.lock_ms
            self.deliveries[(index, offset)] += 1
            out.append(ShareFetchResponse.AcquiredRecords(
                first_offset=offset, last_offset=offset, delivery_count=count))
            budget -= 1
        first = p.next_offset
        last = min(p.log_end, first + budget) - 1
        if last >= first:
            for offset in range(first, last + 1):
                p.acquired[offset] = 1
                p.lock_deadline[offset] = self.now_ms + self.lock_ms
                self.deliveries[(index, offset)] += 1
            p.next_offset = last + 1
            out.append(ShareFetchResponse.AcquiredRecords(
                first_offset=first, last_offset=last, delivery_count=1))
        return out

    def _share_acknowledge(
        self, node: int, request: ShareAcknowledgeRequest
    ) -> ShareAcknowledgeResponse:
        code = self._check_session(node, request.member_id or "", request.share_session_epoch)
        if code:
            return ShareAcknowledgeResponse(error_code=code)
        topics = []
        for t in request.topics:
            parts = [
                ShareAcknowledgeResponse.PartitionData(
                    partition_index=ap.partition_index,
                    error_code=self._apply_acks(ap.partition_index, ap.acknowledgement_batches),
                )
                for ap in t.partitions
            ]
            topics.append(ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(
                topic_id=t.topic_id, partitions=parts
            ))
        return ShareAcknowledgeResponse(
            responses=topics, acquisition_lock_timeout_ms=self.lock_ms
        )


class RecordingSink:
    """The engine's results, kept for assertions."""

    def __init__(self) -> None:
        self.fetches: list[CompletedShareFetch] = []
        self.completions: list[AcknowledgementCompletion] = []
        self.commits: list[tuple[object, AckResults, bool]] = []
        self.errors: list[tuple[KafkaError, bool]] = []
        self.leaves = 0
        self.replaced: list[tuple[int, int]] = []
        self.lost: list[LocksLost] = []
        #: each set of topics a pattern subscription matched
        self.matched: list[frozenset[str]] = []

    def add_fetches(self, fetches: list[CompletedShareFetch]) -> None:
        self.fetches.extend(fetches)

    def ack_completed(self, completion: AcknowledgementCompletion) -> None:
        self.completions.append(completion)

    def commit_completed(self, token: object, results: AckResults, *, timed_out: bool) -> None:
        self.commits.append((token, results, timed_out))

    def session_replaced(self, node_id: int, generation: int) -> None:
        self.replaced.append((node_id, generation))

    def locks_lost(self, lost: LocksLost) -> None:
        self.lost.append(lost)

    def leave_completed(self) -> None:
        self.leaves += 1

    def subscription_changed(self, topics: frozenset[str]) -> None:
        self.matched.append(topics)

    def error(self, error: KafkaError, *, fatal: bool = False) -> None:
        self.errors.append((error, fatal))


class EngineDriver:
    """Runs a :class:`ConsumerEngine` against a :class:`FakeCluster` on a simulated clock.

    The application part: every delivered record is acknowledged with
    ``ack_type(partition, offset, delivery_count)`` (ACCEPT by default) on the
    next fetch, sent to the node that delivered it, as the consumer does.
    """

    def __init__(
        self,
        cluster: FakeCluster,
        *,
        latency_ms: int = 1,
        ack_type: Callable[[int, int, int], AcknowledgeType | None] | None = None,
        **config: object,
    ) -> None:
        self.cluster = cluster
        self.sink = RecordingSink()
        settings: dict[str, object] = {
            "bootstrap_servers": "boot:9092", "group_id": "g", "fetch_max_wait_ms": 500,
        }
        settings.update(config)
        self.engine = ConsumerEngine(
            parse_config(None, **settings),
            member_id="member-1",
            sink=self.sink,
            share_fetch_version=lambda node: 2,
            random_source=lambda: 0.5,  # no jitter: deterministic backoffs
        )
        self.now_ms = 0
        self.latency_ms = latency_ms
        self.ack_type = ack_type or (lambda p, o, c: AcknowledgeType.ACCEPT)
        self._answers: list[tuple[int, int, UnsentRequest[Any], Any, KafkaError | None]] = []
        self._seq = itertools.count()
        self._delivered = 0
        #: engine loop iterations (each a poll and a wait)
        self.loops = 0
        #: records the application holds (ack_type said None): (partition, offset) ->
        #: (node, tip, delivery count)
        self.withheld: dict[tuple[int, int], tuple[int, TopicIdPartition, int]] = {}
        #: every (partition, offset, delivery count) handed to the application
        self.handed_out: list[tuple[int, int, int]] = []

    def subscribe(self) -> None:
        self.engine.subscribe(frozenset({self.cluster.topic}))
        self.engine.on_app_poll(self.now_ms)
        self.engine.fetch({})

    def subscribe_pattern(self, pattern: str) -> None:
        self.engine.subscribe_pattern(re.compile(pattern))
        self.engine.on_app_poll(self.now_ms)
        self.engine.fetch({})

    def run_polling(self, duration_ms: int, *, every_ms: int = 100,
                    until: Callable[[], bool] | None = None) -> None:
        """:meth:`run_for`, the application polling every ``every_ms`` meanwhile
        (a waiting poll refreshes its poll event as often)."""
        end = self.now_ms + duration_ms
        while self.now_ms < end and not (until is not None and until()):
            self.engine.on_app_poll(self.now_ms)
            self.engine.fetch({})
            self.run_for(min(every_ms, end - self.now_ms), until=until, stop_at_end=True)

    def _acks_for_new_deliveries(self) -> dict[TopicIdPartition, tuple[int, Acknowledgements]]:
        acks: dict[TopicIdPartition, tuple[int, Acknowledgements]] = {}
        for fetch in self.sink.fetches[self._delivered:]:
            a = Acknowledgements()
            a.session_generation = fetch.session_generation
            for first, last, count in fetch.acquired:
                for offset in range(first, last + 1):
                    partition = fetch.partition.partition
                    self.handed_out.append((partition, offset, count))
                    kind = self.ack_type(partition, offset, count)
                    if kind is None:
                        self.withheld[(partition, offset)] = (fetch.node_id, fetch.partition,
                                                              count)
                    else:
                        a.add(offset, kind)
            if not a:
                continue
            existing = acks.get(fetch.partition)
            if existing is not None and existing[0] == fetch.node_id:
                existing[1].merge(a)
            else:
                acks[fetch.partition] = (fetch.node_id, a)
        self._delivered = len(self.sink.fetches)
        return acks

    def ack_withheld(self, kind: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """The application acknowledges every record it held (as a commit_async)."""
        acks: dict[TopicIdPartition, tuple[int, Acknowledgements]] = {}
        for (_partition, offset), (node, tip, _count) in sorted(self.withheld.items()):
            acks.setdefault(tip, (node, Acknowledgements()))[1].add(offset, kind)
        self.withheld.clear()
        self.engine.acknowledge_async(acks, self.now_ms + 60_000, 0)

    def run_for(self, duration_ms: int, *, until: Callable[[], bool] | None = None,
                stop_at_end: bool = False) -> None:
        """Drive the engine until ``duration_ms`` of simulated time have passed
        (or ``until`` holds); ``stop_at_end``: the clock stops there even if the
        engine would sleep longer (the application acts then)."""
        end = self.now_ms + duration_ms
        while self.now_ms < end:
            if until is not None and until():
                return
            self.loops += 1
            # Answers due now run their handlers (the engine's I/O callbacks).
            while self._answers and self._answers[0][0] <= self.now_ms:
                _, _, req, response, error = heapq.heappop(self._answers)
                req.answer(response, error, self.now_ms)
            if len(self.sink.fetches) > self._delivered:
                self.engine.on_app_poll(self.now_ms)
                self.engine.fetch(self._acks_for_new_deliveries())
            for req in self.engine.poll(self.now_ms):
                self.cluster.now_ms = self.now_ms
                response, error = self.cluster.answer(req)
                delay = self.latency_ms
                if (
                    isinstance(response, ShareFetchResponse)
                    and isinstance(req.request, ShareFetchRequest)
                    and not any(p.acquired_records for t in response.responses
                                for p in t.partitions)
                ):
                    delay = max(delay, req.request.max_wait_ms)  # the broker long-polls
                if isinstance(req.request, ShareFetchRequest) and self.cluster.stall_share_fetch_ms:
                    delay = self.cluster.stall_share_fetch_ms
                    response, error = None, NetworkError("no response within the request timeout")
                heapq.heappush(
                    self._answers, (self.now_ms + delay, next(self._seq), req, response, error)
                )
            wake = self.now_ms + max(0, self.engine.time_until_next_ms(self.now_ms))
            if self._answers:
                wake = min(wake, self._answers[0][0])
            # A driver that would wake at once with nothing to answer is spinning;
            # count it but move the clock so the test ends.
            self.now_ms = max(wake, self.now_ms + 1) if wake <= self.now_ms else wake
            if stop_at_end:
                self.now_ms = min(self.now_ms, end)
