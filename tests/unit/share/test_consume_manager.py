"""ShareConsumeManager: ShareFetch/ShareAcknowledge building and response handling (sans-IO)."""

from __future__ import annotations

import uuid
from concurrent.futures import Future
from typing import Any

import pytest

from kafka_share.cluster import BrokerInfo, ClusterMetadata, PartitionLeader, TopicMetadata
from kafka_share.errors import (
    InvalidRecordStateError,
    KafkaError,
    NetworkError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.protocol.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from kafka_share.share.ack_deferral import ACK_DEFER_MS
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.capabilities import ShareCapabilities
from kafka_share.share.consume import FetchSettings, ShareConsumeManager
from kafka_share.share.results import AcknowledgementCompletion, CompletedShareFetch
from kafka_share.share.unsent import Channel, UnsentRequest, VersionedRequest

TID = uuid.UUID(int=0x51)
TIP0 = TopicIdPartition(TID, "t", 0)  # led by node 1
TIP1 = TopicIdPartition(TID, "t", 1)  # led by node 2
ACCEPT = AcknowledgeType.ACCEPT
NOT_LEADER = 6
SHARE_SESSION_NOT_FOUND = 122


class Sink:
    def __init__(self) -> None:
        self.fetches: list[CompletedShareFetch] = []
        self.completions: list[AcknowledgementCompletion] = []
        self.errors: list[KafkaError] = []
        #: tokens of commits that ended by their deadline
        self.timed_out: list[object] = []
        self.replaced: list[tuple[int, int]] = []

    def commit_completed(self, token: object, results: Any, *, timed_out: bool) -> None:
        assert isinstance(token, Future)
        if timed_out:
            self.timed_out.append(token)
        token.set_result(results)

    def leave_completed(self) -> None:
        raise AssertionError("the consume manager never leaves")

    def subscription_changed(self, topics: frozenset[str]) -> None:
        raise AssertionError("the consume manager never subscribes")

    def session_replaced(self, node_id: int, generation: int) -> None:
        self.replaced.append((node_id, generation))

    def add_fetches(self, fetches: list[Any]) -> None:
        self.fetches.extend(fetches)

    def ack_completed(self, completion: Any) -> None:
        self.completions.append(completion)

    def error(self, error: KafkaError) -> None:
        self.errors.append(error)

    def errors_of(self, tip: TopicIdPartition) -> list[KafkaError | None]:
        return [c.error for c in self.completions if c.partition == tip]


class Env:
    def __init__(self, *, share_version: int = 2, retry_backoff_ms: int = 100) -> None:
        self.sink = Sink()
        self.cluster = ClusterMetadata([("boot", 9092)], metadata_max_age_ms=600_000)
        self.cluster.update(
            0,
            [BrokerInfo(1, "h1", 1), BrokerInfo(2, "h2", 2), BrokerInfo(3, "h3", 3)],
            [TopicMetadata("t", TID, 0, {0: PartitionLeader(1, 5), 1: PartitionLeader(2, 5)})],
        )
        self.mgr = ShareConsumeManager(
            settings=FetchSettings(
                group_id="g", max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
                max_records=100, record_limit=False, retry_backoff_ms=retry_backoff_ms,
            ),
            cluster=self.cluster,
            sink=self.sink,
            member_id="member-1",
            capabilities=lambda node: ShareCapabilities(share_version),
        )
        self.mgr.member_ready = True
        self.mgr.assigned = [TIP0, TIP1]

    def poll(self, now_ms: int = 0) -> dict[int, Sent]:
        out: dict[int, Sent] = {}
        for req in self.mgr.poll(now_ms):
            assert req.channel is Channel.SHARE
            assert req.node_id not in out, "two requests to one node in one round"
            out[req.node_id] = Sent(req, now_ms)
        return out

    def establish(self, now_ms: int = 0) -> None:
        """Open sessions on nodes 1 and 2 (epoch 0 -> 1) with empty answers."""
        self.mgr.on_fetch({})
        reqs = self.poll(now_ms)
        assert set(reqs) == {1, 2}
        for req in reqs.values():
            assert req.request.share_session_epoch == 0
            req.handler(ShareFetchResponse(), None)


class Sent:
    """A request of a round, whose answer tests give as ``handler(response, error)``:
    it arrives at the time of the round that built the request, unless given."""

    def __init__(self, req: UnsentRequest[Any], now_ms: int) -> None:
        self.unsent = req
        self.node_id = req.node_id
        self.channel = req.channel
        self.request = req.request
        self._now_ms = now_ms

    def handler(self, response: Any, error: KafkaError | None, at_ms: int | None = None) -> None:
        self.unsent.answer(response, error, self._now_ms if at_ms is None else at_ms)


def acks(*offsets: int, t: AcknowledgeType = ACCEPT) -> Acknowledgements:
    a = Acknowledgements()
    for o in offsets:
        a.add(o, t)
    return a


def fetch_ack_batches(req: ShareFetchRequest, partition: int) -> list[tuple[int, int, list[int]]]:
    return [
        (b.first_offset, b.last_offset, list(b.acknowledge_types))
        for t in req.topics for p in t.partitions if p.partition_index == partition
        for b in p.acknowledgement_batches
    ]


def ack_batches(req: ShareAcknowledgeRequest, partition: int) -> list[tuple[int, int, list[int]]]:
    return [
        (b.first_offset, b.last_offset, list(b.acknowledge_types))
        for t in req.topics for p in t.partitions if p.partition_index == partition
        for b in p.acknowledgement_batches
    ]


def ack_response(
    partition: int, error_code: int = 0, **kw: Any
) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(
        responses=[ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(
            topic_id=TID,
            partitions=[ShareAcknowledgeResponse.PartitionData(
                partition_index=partition, error_code=error_code, **kw)],
        )],
    )


def fetch_response(*parts: ShareFetchResponse.PartitionData, **kw: Any) -> ShareFetchResponse:
    return ShareFetchResponse(
        responses=[ShareFetchResponse.ShareFetchableTopicResponse(topic_id=TID,
                                                                  partitions=list(parts))],
        **kw,
    )


# -- fetching ----------------------------------------------------------------------------


def test_nothing_is_sent_before_the_member_is_ready_or_without_fetch_more() -> None:
    env = Env()
    env.mgr.member_ready = False
    env.mgr.on_fetch({})
    assert env.poll() == {}
    env.mgr.member_ready = True
    env.mgr.fetch_more = False
    assert env.poll() == {}


def test_first_fetch_opens_a_session_per_leader_with_the_fetch_limits() -> None:
    env = Env()
    env.mgr.on_fetch({})
    reqs = env.poll()
    assert set(reqs) == {1, 2}
    req = reqs[1].request
    assert isinstance(req, ShareFetchRequest)
    assert (req.group_id, req.member_id, req.share_session_epoch) == ("g", "member-1", 0)
    assert (req.max_wait_ms, req.min_bytes, req.max_bytes, req.max_records) == (
        500, 1, 1 << 20, 100)
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in req.topics] == [
        (TID, [0])]
    assert [p.partition_index for t in reqs[2].request.topics for p in t.partitions] == [1]


def test_first_fetch_at_epoch_0_carries_no_acks_and_they_fail_with_network_error() -> None:
    env = Env()
    env.mgr.on_fetch({TIP0: (1, acks(3, 4))})
    reqs = env.poll()
    assert reqs[1].request.share_session_epoch == 0
    assert fetch_ack_batches(reqs[1].request, 0) == []
    errors = env.sink.errors_of(TIP0)
    assert len(errors) == 1 and isinstance(errors[0], NetworkError)
    assert env.sink.completions[0].offsets == frozenset({3, 4})


def test_only_one_request_per_node_is_in_flight() -> None:
    env = Env()
    env.mgr.on_fetch({})
    first = env.poll()
    assert set(first) == {1, 2}
    assert env.poll() == {}
    first[1].handler(ShareFetchResponse(), None)
    assert set(env.poll()) == {1}


def test_acks_piggyback_on_the_next_fetch_to_their_node() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({TIP0: (1, acks(3, 4)), TIP1: (2, acks(9, t=AcknowledgeType.RELEASE))})
    reqs = env.poll()
    assert reqs[1].request.share_session_epoch == 1
    assert fetch_ack_batches(reqs[1].request, 0) == [(3, 4, [1])]
    assert fetch_ack_batches(reqs[1].request, 1) == []
    assert fetch_ack_batches(reqs[2].request, 1) == [(9, 9, [2])]
    reqs[1].handler(fetch_response(ShareFetchResponse.PartitionData(partition_index=0)), None)
    assert env.sink.errors_of(TIP0) == [None]
    reqs[2].handler(fetch_response(ShareFetchResponse.PartitionData(
        partition_index=1, acknowledge_error_code=121, acknowledge_error_message="gone")), None)
    [err] = env.sink.errors_of(TIP1)
    assert isinstance(err, InvalidRecordStateError)


def test_piggybacked_ack_missing_from_the_response_fails_as_invalid_response() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({TIP0: (1, acks(3))})
    reqs = env.poll()
    reqs[1].handler(ShareFetchResponse(), None)
    [err] = env.sink.errors_of(TIP0)
    assert isinstance(err, InvalidRecordStateError)
    assert "invalid response" in str(err)


def test_response_with_acquired_records_is_delivered_and_clears_fetch_more() -> None:
    env = Env()
    env.mgr.on_fetch({})
    reqs = env.poll()
    data = b"\x00" * 8
    reqs[1].handler(
        fetch_response(
            ShareFetchResponse.PartitionData(
                partition_index=0, records=data,
                acquired_records=[ShareFetchResponse.AcquiredRecords(
                    first_offset=0, last_offset=4, delivery_count=1)],
            ),
            acquisition_lock_timeout_ms=30000,
        ),
        None,
    )
    assert env.mgr.fetch_more is False
    [fetch] = env.sink.fetches
    assert (fetch.node_id, fetch.partition) == (1, TIP0)
    assert bytes(fetch.records) == data
    assert fetch.acquired == [(0, 4, 1)]
    assert fetch.acquisition_lock_timeout_ms == 30000
    # Node 2 is still in flight; once it answers, no new fetch goes out until asked.
    reqs[2].handler(ShareFetchResponse(), None)
    assert env.poll() == {}


def test_response_without_acquired_records_keeps_fetching() -> None:
    env = Env()
    env.establish()
    assert env.mgr.fetch_more is True
    assert env.sink.fetches == []
    assert set(env.poll()) == {1, 2}


def test_fetch_ahead_round_does_not_wait_on_the_broker_and_is_not_repeated() -> None:
    env = Env()
    env.establish()  # fetch_more stays set after the empty answers: clear it first
    env.mgr.fetch_more = False
    env.mgr.on_fetch({TIP0: (1, acks(0, 1))}, ahead=True)
    reqs = env.poll()
    assert set(reqs) == {1, 2}
    for req in reqs.values():
        assert req.request.max_wait_ms == 0
        assert req.request.max_records == 100  # it does ask for records
    assert fetch_ack_batches(reqs[1].request, 0) == [(0, 1, [1])]
    # Nothing could be acquired right now: the round ends instead of repeating.
    for req in reqs.values():
        req.handler(fetch_response(ShareFetchResponse.PartitionData(partition_index=0)), None)
    assert env.mgr.fetch_more is False
    assert env.poll() == {}


def test_acks_queued_behind_a_fetch_that_ends_the_round_are_not_stranded() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    env.mgr.on_fetch({}, ahead=True)
    first = env.poll(10)
    # The application polls again while that fetch is out: its acks queue for a fetch.
    env.mgr.on_fetch({TIP0: (1, acks(7))}, ahead=True)
    assert env.poll(11) == {}
    data = b"\x00" * 8
    first[1].handler(fetch_response(ShareFetchResponse.PartitionData(
        partition_index=0, records=data,
        acquired_records=[ShareFetchResponse.AcquiredRecords(
            first_offset=20, last_offset=21, delivery_count=1)],
    )), None)
    first[2].handler(ShareFetchResponse(), None)
    assert env.mgr.fetch_more is False  # records came: the round is over
    # The acks linger briefly for a fetch, then go on their own.
    assert env.poll(20) == {}
    reqs = env.poll(70)
    assert set(reqs) == {1}
    assert isinstance(reqs[1].request, ShareAcknowledgeRequest)
    assert ack_batches(reqs[1].request, 0) == [(7, 7, [1])]


def test_normal_fetch_request_overrides_a_pending_fetch_ahead() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    env.mgr.on_fetch({}, ahead=True)
    first = env.poll()
    assert first[1].request.max_wait_ms == 0
    # The application ran out of records and asks normally while the ahead round
    # is in flight: its empty answer must not end the wanted round.
    env.mgr.on_fetch({})
    for req in first.values():
        req.handler(ShareFetchResponse(), None)
    assert env.mgr.fetch_more is True
    again = env.poll()
    assert set(again) == {1, 2}
    assert all(r.request.max_wait_ms == 500 for r in again.values())


def test_fetch_ahead_while_a_normal_round_is_wanted_keeps_waiting_on_the_broker() -> None:
    env = Env()
    env.establish()
    assert env.mgr.fetch_more is True
    env.mgr.on_fetch({}, ahead=True)  # must not turn the wanted round into an ahead one
    assert all(r.request.max_wait_ms == 500 for r in env.poll().values())


def test_not_leader_with_current_leader_updates_the_cluster_leader() -> None:
    env = Env()
    env.mgr.on_fetch({})
    reqs = env.poll()
    reqs[1].handler(
        fetch_response(
            ShareFetchResponse.PartitionData(
                partition_index=0, error_code=NOT_LEADER,
                current_leader=ShareFetchResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=6),
            ),
            node_endpoints=[ShareFetchResponse.NodeEndpoint(node_id=3, host="h3", port=3)],
        ),
        None,
    )
    assert env.cluster.leader_of("t", 0) == 3
    assert env.sink.errors == [] and env.sink.fetches == []
    # The next round fetches partition 0 from its new leader.
    reqs = env.poll()
    assert 3 in reqs
    assert [p.partition_index for t in reqs[3].request.topics for p in t.partitions] == [0]


def test_transport_error_resets_the_session_and_fails_piggybacked_acks() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({TIP0: (1, acks(1))})
    reqs = env.poll()
    assert reqs[1].request.share_session_epoch == 1
    reqs[1].handler(None, NetworkError("connection reset"))
    [err] = env.sink.errors_of(TIP0)
    assert isinstance(err, NetworkError)
    assert env.cluster.needs_update(1)
    # The node is asked again only after a backoff (retry.backoff.ms, jittered):
    # a broker that is down must not get a request on every loop.
    assert 1 not in env.poll(50)
    again = env.poll(200)
    assert again[1].request.share_session_epoch == 0
    assert [p.partition_index for t in again[1].request.topics for p in t.partitions] == [0]


def test_session_not_found_resets_the_epoch_and_fails_acks_as_session_lost() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({TIP0: (1, acks(1))})
    reqs = env.poll()
    reqs[1].handler(ShareFetchResponse(error_code=SHARE_SESSION_NOT_FOUND), None)
    [err] = env.sink.errors_of(TIP0)
    assert isinstance(err, NetworkError) and "session" in str(err)
    assert env.poll()[1].request.share_session_epoch == 0


def test_disconnect_while_idle_resets_the_session() -> None:
    env = Env()
    env.establish()
    env.mgr.on_disconnect(1)
    assert env.poll()[1].request.share_session_epoch == 0


def test_acks_for_an_unassigned_partition_are_sent_ack_only() -> None:
    env = Env()
    env.establish()
    env.mgr.assigned = [TIP1]  # TIP0 was revoked
    env.mgr.on_fetch({TIP0: (1, acks(2))})
    req = env.poll()[1].request
    assert fetch_ack_batches(req, 0) == [(2, 2, [1])]
    assert [(f.topic_id, f.partitions) for f in req.forgotten_topics_data] == [(TID, [0])]


def test_renew_on_a_v1_broker_fails_with_unsupported_version() -> None:
    env = Env(share_version=1)
    env.establish()
    env.mgr.on_fetch({TIP0: (1, acks(2, t=AcknowledgeType.RENEW))})
    req = env.poll()[1].request
    assert fetch_ack_batches(req, 0) == []
    [err] = env.sink.errors_of(TIP0)
    assert isinstance(err, UnsupportedVersionError)


def test_renew_piggybacked_on_v2_sets_is_renew_ack_and_zero_limits() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({TIP0: (1, acks(2, t=AcknowledgeType.RENEW))})
    reqs = env.poll()
    wrapped = reqs[1].request
    # v2-only features are checked at encode time, once the version is negotiated.
    assert isinstance(wrapped, VersionedRequest)
    with pytest.raises(UnsupportedVersionError, match="RENEW"):
        wrapped.build(1)
    req = wrapped.build(2)
    assert req.is_renew_ack is True
    assert (req.max_wait_ms, req.min_bytes, req.max_bytes, req.max_records) == (0, 0, 0, 0)
    reqs[1].handler(fetch_response(ShareFetchResponse.PartitionData(partition_index=0)), None)
    [c] = [c for c in env.sink.completions if c.partition == TIP0]
    assert c.error is None and c.renewed_offsets == frozenset({2})


# -- standalone acknowledgements -------------------------------------------------------


def test_async_acks_go_out_as_share_acknowledge_before_any_fetch() -> None:
    env = Env()
    env.establish()
    env.mgr.on_async({TIP0: (1, acks(5, 6))}, deadline_ms=10_000)
    reqs = env.poll()
    req = reqs[1].request
    assert isinstance(req, ShareAcknowledgeRequest)
    assert req.share_session_epoch == 1
    assert ack_batches(req, 0) == [(5, 6, [1])]
    assert isinstance(reqs[2].request, ShareFetchRequest)
    reqs[1].handler(ack_response(0), None)
    assert env.sink.errors_of(TIP0) == [None]


def test_async_acks_on_a_new_session_fail_locally() -> None:
    env = Env()
    env.mgr.on_async({TIP0: (1, acks(5))}, deadline_ms=10_000)
    assert env.poll() == {}
    [err] = env.sink.errors_of(TIP0)
    assert isinstance(err, NetworkError)


def test_async_acks_past_their_deadline_time_out() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({})
    env.poll(0)  # both nodes busy with a fetch
    env.mgr.on_async({TIP0: (1, acks(5))}, deadline_ms=100)
    assert env.poll(200) == {}
    [err] = env.sink.errors_of(TIP0)
    assert isinstance(err, RequestTimedOutError)


def test_sync_commit_completes_its_future_with_per_partition_results() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1)), TIP1: (2, acks(2))}, 10_000, future)
    reqs = env.poll()
    assert all(isinstance(r.request, ShareAcknowledgeRequest) for r in reqs.values())
    reqs[1].handler(ack_response(0), None)
    assert not future.done()
    reqs[2].handler(ack_response(1, error_code=121, error_message="lock expired"), None)
    result = future.result(timeout=0)
    assert isinstance(result, dict) and set(result) == {TIP0, TIP1}
    assert result[TIP0] is None
    assert isinstance(result[TIP1], InvalidRecordStateError)


def test_sync_commit_with_nothing_to_send_completes_at_once() -> None:
    env = Env()
    future: Future[object] = Future()
    env.mgr.on_sync({}, 10_000, future)
    assert future.result(timeout=0) == {}


def test_sync_commit_retries_retriable_partition_errors_until_success() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 10_000, future)
    first = env.poll(10)[1]
    first.handler(ack_response(0, error_code=7), None)  # REQUEST_TIMED_OUT: retriable
    assert not future.done()
    retry = env.poll(1000)[1]
    assert isinstance(retry.request, ShareAcknowledgeRequest)
    assert ack_batches(retry.request, 0) == [(1, 1, [1])]
    retry.handler(ack_response(0), None)
    assert future.result(timeout=0) == {TIP0: None}


def test_sync_commit_does_not_retry_not_leader() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 10_000, future)
    env.poll()[1].handler(ack_response(0, error_code=NOT_LEADER), None)
    result: Any = future.result(timeout=0)
    assert isinstance(result[TIP0], NotLeaderOrFollowerError)


def test_sync_commit_that_cannot_be_sent_before_its_deadline_times_out() -> None:
    env = Env()
    env.establish()
    first = env.poll(0)  # both nodes busy with a fetch
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 100, future)
    assert env.poll(50) == {}
    assert not future.done()
    env.poll(100)
    assert future.done() and env.sink.timed_out == [future]
    # Nothing was thrown away: the acknowledgement did not fail, and it goes to
    # node 1 as soon as that node is free (riding on its next fetch).
    assert env.sink.errors_of(TIP0) == []
    first[1].handler(ShareFetchResponse(), None)
    reqs = env.poll(200)
    assert fetch_ack_batches(reqs[1].request, 0) == [(1, 1, [1])]


def test_sync_commit_retried_until_the_deadline_then_times_out() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 1000, future)
    now = 0
    sent = 0
    while not future.done():
        assert now <= 1000
        for req in env.poll(now).values():
            sent += 1
            req.handler(ack_response(0, error_code=7), None)
        now += 200
    assert sent >= 2
    assert env.sink.timed_out == [future]
    # The caller got a timeout, but the acknowledgement is still pending: it is
    # sent again (here as a ShareAcknowledge of its own once the linger ends).
    assert env.sink.errors_of(TIP0) == []
    later = env.poll(now + 1000)
    assert ack_batches(later[1].request, 0) == [(1, 1, [1])]
    later[1].handler(ack_response(0), None)
    assert env.sink.errors_of(TIP0) == [None]


def test_sync_commit_on_a_new_session_fails_with_network_error() -> None:
    env = Env()
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 10_000, future)
    env.poll()
    result: Any = future.result(timeout=0)
    assert isinstance(result[TIP0], NetworkError)


def test_sync_commit_transport_error_fails_with_network_error_and_resets_session() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 10_000, future)
    env.poll()[1].handler(None, NetworkError("reset"))
    result: Any = future.result(timeout=0)
    assert isinstance(result[TIP0], NetworkError)
    env.mgr.on_fetch({})
    assert env.poll()[1].request.share_session_epoch == 0


# -- close -----------------------------------------------------------------------------


def test_close_sends_share_acknowledge_at_epoch_minus_1_to_every_established_session() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({})  # a node 3 state without a session must not get a close
    env.mgr.on_async({TIP0: (1, acks(8))}, 10_000)  # pending acks ride on the close
    future: Future[object] = Future()
    env.mgr.on_close({TIP1: (2, acks(4))}, 10_000, future)
    assert env.mgr.fetch_more is False
    reqs = env.poll()
    assert set(reqs) == {1, 2}
    for req in reqs.values():
        assert isinstance(req.request, ShareAcknowledgeRequest)
        assert req.request.share_session_epoch == -1
    assert ack_batches(reqs[1].request, 0) == [(8, 8, [1])]
    assert ack_batches(reqs[2].request, 1) == [(4, 4, [1])]
    reqs[1].handler(ack_response(0), None)
    assert not env.mgr.close_done
    reqs[2].handler(ack_response(1), None)
    assert env.mgr.close_done
    assert future.result(timeout=0) == {TIP0: None, TIP1: None}
    # Nothing follows a close.
    env.mgr.on_fetch({})
    assert env.poll() == {}


def test_close_without_any_session_completes_at_once() -> None:
    env = Env()
    future: Future[object] = Future()
    env.mgr.on_close({}, 10_000, future)
    assert future.result(timeout=0) == {}
    assert env.mgr.close_done
    assert env.poll() == {}


def test_close_waits_for_an_in_flight_fetch_then_closes() -> None:
    env = Env()
    env.establish()
    fetches = env.poll()
    future: Future[object] = Future()
    env.mgr.on_close({}, 10_000, future)
    assert env.poll() == {}
    fetches[1].handler(ShareFetchResponse(), None)
    reqs = env.poll()
    assert set(reqs) == {1}
    assert reqs[1].request.share_session_epoch == -1


def test_close_past_its_deadline_completes_with_timeouts() -> None:
    env = Env()
    env.establish()
    env.poll(0)  # fetches in flight: the close cannot go out
    future: Future[object] = Future()
    env.mgr.on_close({TIP0: (1, acks(3))}, 100, future)
    env.poll(100)
    result: Any = future.result(timeout=0)
    assert isinstance(result[TIP0], RequestTimedOutError)
    assert env.mgr.close_done


@pytest.mark.parametrize("error_code", [0, SHARE_SESSION_NOT_FOUND])
def test_close_response_marks_the_session_closed(error_code: int) -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_close({}, 10_000, future)
    reqs = env.poll()
    for req in reqs.values():
        req.handler(ShareAcknowledgeResponse(error_code=error_code), None)
    assert future.done() and env.mgr.close_done

def test_sync_commit_in_flight_at_its_deadline_reports_request_timed_out() -> None:
    """Regression: _expire_commit resolves the future with ``commit.results`` but only fails
    the acks still in ``per_node``; acks already sent (in flight) get no entry, so
    commit_sync returns ``{}`` for a partition it did try to acknowledge. Expected
    (module docstring, Java): every unanswered partition completes with
    RequestTimedOutError.
    """
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 100, future)
    reqs = env.poll(0)
    assert set(reqs) == {1}  # the ShareAcknowledge is in flight
    env.poll(100)
    # The call times out (the driver raises KafkaTimeoutError); the acknowledgement
    # in flight is not failed locally: its answer, when it comes, is what counts.
    assert env.sink.timed_out == [future]
    assert env.sink.errors_of(TIP0) == []
    reqs[1].handler(ack_response(0), None)
    assert env.sink.errors_of(TIP0) == [None]


def test_retriable_partition_error_is_retried_after_retry_backoff() -> None:
    """Regression: after a retriable partition error the ack handler sets
    ``state.not_before_ms = 0`` ("after backoff below", but there is none), so the
    retry goes out on the very next round: a tight request loop against a broker
    that is e.g. loading. Expected (Java AcknowledgeRequestState): wait
    ``retry.backoff.ms`` before resending.
    """
    env = Env(retry_backoff_ms=100)
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 10_000, future)
    env.poll(1000)[1].handler(ack_response(0, error_code=7), None)
    assert env.poll(1000) == {}, "retried immediately, without backoff"
    assert set(env.poll(1100)) == {1}


# -- lingering acknowledgements, commit sweep, leaving -----------------------------


def test_lingering_acks_wait_then_go_out_alone_when_no_fetch_comes() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    env.mgr.on_async({TIP0: (1, acks(5, 6))}, deadline_ms=10_000, linger_until_ms=50)
    assert env.poll(10) == {}, "sent before the linger ended"
    assert env.mgr.time_until_next_ms(10) == 40
    reqs = env.poll(50)
    req = reqs[1].request
    assert isinstance(req, ShareAcknowledgeRequest)
    assert ack_batches(req, 0) == [(5, 6, [1])]


def test_lingering_acks_ride_on_the_next_fetch_to_their_node() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    env.mgr.on_async({TIP0: (1, acks(5, 6))}, deadline_ms=10_000, linger_until_ms=50)
    env.mgr.on_fetch({TIP0: (1, acks(7))})
    reqs = env.poll(10)
    fetch = reqs[1].request
    assert isinstance(fetch, ShareFetchRequest)
    assert fetch_ack_batches(fetch, 0) == [(5, 7, [1])]
    reqs[1].handler(fetch_response(ShareFetchResponse.PartitionData(partition_index=0)), None)
    assert env.sink.errors_of(TIP0) == [None]
    assert env.poll(100).keys() <= {1, 2}
    assert all(isinstance(r.request, ShareFetchRequest) for r in env.poll(200).values())


def test_commit_sync_takes_acks_still_waiting_for_a_fetch() -> None:
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    env.mgr.on_async({TIP0: (1, acks(1, 2))}, deadline_ms=10_000, linger_until_ms=1_000)
    env.mgr.on_fetch({TIP1: (2, acks(9))})
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(3))}, 10_000, future)
    reqs = env.poll(10)
    assert ack_batches(reqs[1].request, 0) == [(1, 3, [1])]
    assert ack_batches(reqs[2].request, 1) == [(9, 9, [1])]
    reqs[1].handler(ack_response(0), None)
    reqs[2].handler(ack_response(1), None)
    assert future.result(timeout=0) == {TIP0: None, TIP1: None}


def test_leaving_closes_established_sessions_and_reopens_them_later() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({TIP0: (1, acks(4))})  # waiting to ride on a fetch
    env.mgr.close_sessions()
    assert not env.mgr.member_ready and not env.mgr.fetch_more
    reqs = env.poll(0)
    assert set(reqs) == {1, 2}
    close1, close2 = reqs[1].request, reqs[2].request
    assert isinstance(close1, ShareAcknowledgeRequest) and close1.share_session_epoch == -1
    assert ack_batches(close1, 0) == [(4, 4, [1])]
    assert isinstance(close2, ShareAcknowledgeRequest) and close2.share_session_epoch == -1
    reqs[1].handler(ack_response(0), None)
    reqs[2].handler(ShareAcknowledgeResponse(), None)
    assert env.sink.errors_of(TIP0) == [None]
    # Rejoined: the next fetch opens new sessions at epoch 0.
    env.mgr.member_ready = True
    env.mgr.on_fetch({})
    again = env.poll(10)
    assert {n: r.request.share_session_epoch for n, r in again.items()} == {1: 0, 2: 0}


def test_failed_acknowledgements_are_logged_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Records whose acknowledgement failed come back to the group: with default
    logging (WARNING) that must be visible, naming the partition and the reason."""
    env = Env()
    env.establish()
    env.mgr.on_fetch({TIP0: (1, acks(1, 2, 3))})
    reqs = env.poll()
    with caplog.at_level("WARNING", logger="kafka_share"):
        reqs[1].handler(None, NetworkError("connection reset"))
    [record] = [r for r in caplog.records if "acknowledging" in r.getMessage()]
    assert record.levelname == "WARNING"
    assert "3 record(s) of t-0" in record.getMessage()
    assert "connection reset" in record.getMessage()


def _acks_of_session(generation: int, *offsets: int) -> Acknowledgements:
    a = acks(*offsets)
    a.session_generation = generation
    return a


def test_acks_of_records_from_a_replaced_session_fail_locally_and_are_not_sent() -> None:
    """Records acquired by a share session that has since been replaced (a broker
    restart, a cut connection) hold no lock in the new session: their acks would
    fail on the broker (INVALID_RECORD_STATE) or settle the same offsets acquired
    again by the new session. They fail here, as session lost."""
    env = Env()
    env.establish()  # node 1's first session: generation 1
    reqs = env.poll()
    reqs[1].handler(None, NetworkError("connection reset"))  # that session is gone
    again = env.poll(500)
    assert again[1].request.share_session_epoch == 0  # generation 2 starts
    assert env.sink.replaced == [(1, 2)]  # the application drops what gen. 1 fetched
    again[1].handler(ShareFetchResponse(), None)
    old = _acks_of_session(1, 7, 8)
    env.mgr.on_fetch({TIP0: (1, old)})
    [err] = env.sink.errors_of(TIP0)
    assert isinstance(err, NetworkError) and "session" in str(err)
    nxt = env.poll(600)
    assert fetch_ack_batches(nxt[1].request, 0) == []
    # Acks of the current session's records go as usual.
    env.mgr.on_fetch({TIP0: (1, _acks_of_session(2, 9))})
    nxt[1].handler(ShareFetchResponse(), None)
    assert fetch_ack_batches(env.poll(700)[1].request, 0) == [(9, 9, [1])]


def test_fetched_records_carry_the_generation_of_the_session_that_acquired_them() -> None:
    env = Env()
    env.establish()
    reqs = env.poll()
    reqs[1].handler(fetch_response(ShareFetchResponse.PartitionData(
        partition_index=0, records=b"x",
        acquired_records=[ShareFetchResponse.AcquiredRecords(
            first_offset=0, last_offset=0, delivery_count=1)],
    )), None)
    [fetched] = env.sink.fetches
    assert fetched.session_generation == 1


# -- acknowledgements held back while the answers are a trickle -------------------


def _trickle(env: Env, now_ms: int, first: int, last: int) -> None:
    """A round on node 1 (node 2 idle) answered at ``now_ms`` with records
    ``first``..``last`` of TIP0: a caught-up consumer's answer."""
    env.mgr.fetch_more = True
    reqs = env.poll(now_ms)
    reqs[1].handler(fetch_response(ShareFetchResponse.PartitionData(
        partition_index=0, records=b"\x00" * 8,
        acquired_records=[ShareFetchResponse.AcquiredRecords(
            first_offset=first, last_offset=last, delivery_count=1)],
    )), None)


def _established_on_node_1() -> Env:
    env = Env()
    env.mgr.assigned = [TIP0]
    env.mgr.on_fetch({})
    env.poll(0)[1].handler(ShareFetchResponse(), None)
    return env


def test_acks_are_held_back_from_long_polling_fetches_while_answers_are_a_trickle() -> None:
    """The broker holds the answer to a fetch carrying acks until it has written
    them: a caught-up consumer's fetches go without them for ACK_DEFER_MS, and
    wait no longer than that window, so the acks are at most that late."""
    env = _established_on_node_1()
    _trickle(env, 0, 0, 0)
    env.mgr.on_fetch({TIP0: (1, acks(0))})
    fetch = env.poll(10)[1]
    assert fetch_ack_batches(fetch.request, 0) == []
    assert fetch.request.max_wait_ms == ACK_DEFER_MS
    fetch.handler(fetch_response(ShareFetchResponse.PartitionData(
        partition_index=0, records=b"\x00" * 8,
        acquired_records=[ShareFetchResponse.AcquiredRecords(
            first_offset=1, last_offset=1, delivery_count=1)],
    )), None)
    assert env.sink.completions == []
    env.mgr.on_fetch({TIP0: (1, acks(1))})
    fetch = env.poll(20)[1]
    assert fetch_ack_batches(fetch.request, 0) == []
    assert fetch.request.max_wait_ms == 10 + ACK_DEFER_MS - 20
    fetch.handler(fetch_response(ShareFetchResponse.PartitionData(
        partition_index=0, records=b"\x00" * 8,
        acquired_records=[ShareFetchResponse.AcquiredRecords(
            first_offset=2, last_offset=2, delivery_count=1)],
    )), None)
    # The window has ended: every held ack rides on the next fetch, which long-polls.
    env.mgr.on_fetch({TIP0: (1, acks(2))})
    reqs = env.poll(10 + ACK_DEFER_MS)
    assert set(reqs) == {1}
    fetch = reqs[1]
    assert isinstance(fetch.request, ShareFetchRequest)
    assert fetch_ack_batches(fetch.request, 0) == [(0, 2, [1])]
    assert fetch.request.max_wait_ms == 500
    fetch.handler(fetch_response(ShareFetchResponse.PartitionData(partition_index=0)), None)
    assert env.sink.errors_of(TIP0) == [None]


def _trickle_locked(env: Env, now_ms: int, offset: int, lock_ms: int) -> None:
    """As ``_trickle``, one record under a lock of ``lock_ms``."""
    env.mgr.fetch_more = True
    env.poll(now_ms)[1].handler(fetch_response(ShareFetchResponse.PartitionData(
        partition_index=0, records=b"\x00" * 8,
        acquired_records=[ShareFetchResponse.AcquiredRecords(
            first_offset=offset, last_offset=offset, delivery_count=1)],
    ), acquisition_lock_timeout_ms=lock_ms), None)


@pytest.mark.parametrize("acked_at_ms", [
    5_000,                              # the lock has run out
    5_000 - 50 - ACK_DEFER_MS // 2,     # it runs out within the hold window
])
def test_acks_of_a_record_whose_lock_ran_out_are_never_held_back(acked_at_ms: int) -> None:
    """This fetch may acquire the record again, and the broker takes an ack by
    offset: held back, the late ACCEPT would settle the new delivery. Riding on
    the fetch, the broker applies it first (and refuses it), as with Java."""
    env = _established_on_node_1()
    _trickle_locked(env, 0, 0, 5_000)   # lock 5 s (its conservative end: 4,950 ms)
    _trickle_locked(env, 10, 1, 30_000)  # a trickle: acks would be held back
    env.mgr.on_fetch({TIP0: (1, acks(0))})
    fetch = env.poll(acked_at_ms)[1]
    assert fetch_ack_batches(fetch.request, 0) == [(0, 0, [1])]


def test_acks_of_records_well_inside_their_locks_are_still_held_back() -> None:
    env = _established_on_node_1()
    _trickle_locked(env, 0, 0, 5_000)
    _trickle_locked(env, 10, 1, 30_000)
    env.mgr.on_fetch({TIP0: (1, acks(0, 1))})
    fetch = env.poll(4_000)[1]
    assert fetch_ack_batches(fetch.request, 0) == []


def test_acks_ride_on_the_fetch_after_an_empty_or_a_large_answer() -> None:
    env = _established_on_node_1()  # the last answer was empty
    env.mgr.on_fetch({TIP0: (1, acks(7))})
    fetch = env.poll(0)[1].request
    assert fetch_ack_batches(fetch, 0) == [(7, 7, [1])]
    assert fetch.max_wait_ms == 500

    env = _established_on_node_1()
    _trickle(env, 0, 0, 99)  # max_records (100): the consumer is behind
    env.mgr.on_fetch({TIP0: (1, acks(*range(100)))})
    assert fetch_ack_batches(env.poll(1)[1].request, 0) == [(0, 99, [1])]


def test_held_acks_past_their_window_ride_on_the_fetch_not_a_share_acknowledge() -> None:
    env = _established_on_node_1()
    _trickle(env, 0, 0, 0)
    env.mgr.on_fetch({TIP0: (1, acks(0))})
    fetch = env.poll(0)[1]
    fetch.handler(fetch_response(ShareFetchResponse.PartitionData(partition_index=0)), None)
    # the fetch came back empty at the end of the window; the round goes on
    assert env.mgr.fetch_more
    reqs = env.poll(ACK_DEFER_MS)
    assert set(reqs) == {1}
    assert isinstance(reqs[1].request, ShareFetchRequest)
    assert fetch_ack_batches(reqs[1].request, 0) == [(0, 0, [1])]


def test_held_acks_go_alone_when_no_fetch_takes_them() -> None:
    env = _established_on_node_1()
    _trickle(env, 0, 0, 0)
    env.mgr.on_fetch({TIP0: (1, acks(0))})
    env.poll(0)[1].handler(fetch_response(ShareFetchResponse.PartitionData(
        partition_index=0, records=b"\x00" * 8,
        acquired_records=[ShareFetchResponse.AcquiredRecords(
            first_offset=1, last_offset=1, delivery_count=1)],
    )), None)
    assert not env.mgr.fetch_more  # the application has not asked again
    assert env.poll(ACK_DEFER_MS - 1) == {}
    assert env.mgr.time_until_next_ms(ACK_DEFER_MS - 1) == 1
    reqs = env.poll(ACK_DEFER_MS)
    assert isinstance(reqs[1].request, ShareAcknowledgeRequest)
    assert ack_batches(reqs[1].request, 0) == [(0, 0, [1])]


def test_held_acks_past_their_window_do_not_spin_the_network_loop() -> None:
    """While the fetch that would carry them is in flight past their window,
    held acks set no deadline at all, not a wait of 0 (a busy loop): they cannot
    go before that fetch answers (one request per node), and its answer wakes
    the loop; then, with no fetch taking them, they go on their own."""
    env = _established_on_node_1()
    _trickle(env, 0, 0, 0)
    env.mgr.on_fetch({TIP0: (1, acks(0))})
    fetch = env.poll(0)[1]
    assert fetch_ack_batches(fetch.request, 0) == []
    assert env.mgr.time_until_next_ms(ACK_DEFER_MS + 5) == 5000  # idle until the answer
    fetch.handler(fetch_response(ShareFetchResponse.PartitionData(partition_index=0)), None)
    env.mgr.fetch_more = False
    reqs = env.poll(ACK_DEFER_MS + 5)
    assert isinstance(reqs[1].request, ShareAcknowledgeRequest)
    assert ack_batches(reqs[1].request, 0) == [(0, 0, [1])]


def test_commit_sync_sends_held_acks_at_once() -> None:
    env = _established_on_node_1()
    _trickle(env, 0, 0, 0)
    env.mgr.on_fetch({TIP0: (1, acks(0))})
    fetch = env.poll(0)[1]
    assert fetch_ack_batches(fetch.request, 0) == []
    fetch.handler(fetch_response(ShareFetchResponse.PartitionData(partition_index=0)), None)
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({}, 10_000, future)
    req = env.poll(1)[1]
    assert isinstance(req.request, ShareAcknowledgeRequest)
    assert ack_batches(req.request, 0) == [(0, 0, [1])]
    req.handler(ack_response(0), None)
    assert future.result(timeout=0) == {TIP0: None}


def test_an_answer_with_all_a_pace_capped_fetch_asked_for_is_not_a_trickle() -> None:
    env = _established_on_node_1()
    env.mgr.on_fetch({}, max_records=2)  # a slow application: its pace caps the fetch
    reqs = env.poll(0)
    assert reqs[1].request.max_records == 2
    reqs[1].handler(fetch_response(ShareFetchResponse.PartitionData(
        partition_index=0, records=b"\x00" * 8,
        acquired_records=[ShareFetchResponse.AcquiredRecords(
            first_offset=0, last_offset=1, delivery_count=1)],
    )), None)
    env.mgr.on_fetch({TIP0: (1, acks(0, 1))}, max_records=2)
    assert fetch_ack_batches(env.poll(1)[1].request, 0) == [(0, 1, [1])]


# -- a fetch round bounded by the poll that asked (record_limit) ------------------------


def test_a_round_with_an_end_cuts_the_wait_and_stops_fetching_after_it() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({}, until_ms=1_200)
    reqs = env.poll(1_000)
    # The broker may not hold the fetch past the poll's deadline.
    assert {r.request.max_wait_ms for r in reqs.values()} == {200}
    for req in reqs.values():
        req.handler(ShareFetchResponse(), None, 1_200)  # empty: nothing came
    # The poll gave up: no more long polls that would lock records for nobody.
    assert env.poll(1_200) == {}
    assert env.mgr.fetch_more is False
    assert env.poll(5_000) == {}


def test_a_round_without_an_end_keeps_fetching_until_records_come() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({})
    for req in env.poll(1_000).values():
        assert req.request.max_wait_ms == 500
        req.handler(ShareFetchResponse(), None, 1_500)
    assert set(env.poll(1_500)) == {1, 2}


def test_a_round_whose_end_has_passed_still_sends_one_fetch() -> None:
    # poll(0): the deadline is now, yet its fetch goes out (answered at once),
    # and the round is over after it.
    env = Env()
    env.establish()
    env.mgr.on_fetch({}, until_ms=1_000)
    reqs = env.poll(1_000)
    assert {r.request.max_wait_ms for r in reqs.values()} == {0}
    for req in reqs.values():
        req.handler(ShareFetchResponse(), None, 1_001)
    assert env.poll(1_001) == {}


def test_a_capped_round_asks_for_at_most_its_records() -> None:
    env = Env()
    env.establish()
    env.mgr.on_fetch({}, max_records=7)
    assert {r.request.max_records for r in env.poll(1_000).values()} == {7}
