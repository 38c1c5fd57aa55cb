"""ConsumerEngine with a pattern subscription, against the sans-IO fake cluster:
all-topics metadata, re-subscription by name as topics come and go, the member out
of the group while nothing matches."""

from __future__ import annotations

import re
import uuid

from kafka_share.protocol.messages import MetadataRequest
from kafka_share.share.membership import MemberState
from tests.fakes.cluster import EngineDriver, FakeCluster

_MAX_AGE_MS = 2_000


def make(*, topic_exists: bool = True, others: tuple[str, ...] = (),
         records: int = 0) -> tuple[FakeCluster, EngineDriver]:
    cluster = FakeCluster(topic="t", records_per_partition=records)
    cluster.topic_exists = topic_exists
    cluster.other_topics = {name: uuid.uuid4() for name in others}
    driver = EngineDriver(cluster, metadata_max_age_ms=_MAX_AGE_MS)
    return cluster, driver


def joins(cluster: FakeCluster) -> list[list[str] | None]:
    return [names for epoch, names in cluster.heartbeats if epoch == 0]


def test_a_pattern_asks_for_all_topics_and_joins_with_the_names_it_matches() -> None:
    cluster, driver = make(others=("t-other", "x", "__consumer_offsets"), records=30)
    driver.subscribe_pattern(r"t.*")
    driver.run_polling(3_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    assert cluster.metadata_requests and all(r is None for r in cluster.metadata_requests)
    assert joins(cluster) == [["t", "t-other"]]
    assert driver.sink.matched == [frozenset(), frozenset({"t", "t-other"})]


def test_internal_topics_are_never_subscribed_even_by_a_match_everything_pattern() -> None:
    cluster, driver = make(others=("__consumer_offsets", "__share_group_state", "a"))
    driver.subscribe_pattern(".*")
    driver.run_polling(1_000)
    assert joins(cluster) == [["a", "t"]]


def test_a_topic_created_later_joins_within_metadata_max_age() -> None:
    cluster, driver = make(topic_exists=False, others=("t-a",))
    driver.subscribe_pattern(r"t(-.*)?")
    driver.run_polling(1_000)
    assert joins(cluster) == [["t-a"]]
    assert driver.engine.consume.assigned == []
    cluster.topic_exists = True
    cluster.produce(0, 20)
    created_ms = driver.now_ms
    driver.run_polling(_MAX_AGE_MS + 1_000, until=lambda: bool(driver.engine.consume.assigned))
    # The refresh that finds the topic re-subscribes at once (a heartbeat now, not
    # a heartbeat interval later), and the answer assigns its partitions.
    assert driver.now_ms - created_ms <= _MAX_AGE_MS + 100
    assert [n for e, n in cluster.heartbeats if e > 0 and n is not None] == [["t", "t-a"]]
    driver.run_polling(2_000, until=lambda: len(cluster.partitions[0].accepted) == 20)
    assert len(cluster.partitions[0].accepted) == 20
    assert driver.sink.matched[-1] == {"t", "t-a"}


def test_a_deleted_topic_is_left_and_the_others_keep_flowing() -> None:
    cluster, driver = make(others=("t-a",), records=10)
    driver.subscribe_pattern(r"t(-.*)?")
    driver.run_polling(2_000, until=cluster.all_accepted)
    del cluster.other_topics["t-a"]
    driver.run_polling(_MAX_AGE_MS + 500)
    assert cluster.heartbeats[-1][0] > 0  # still a member, never left
    assert ["t"] in [n for _, n in cluster.heartbeats]
    assert driver.sink.matched[-1] == {"t"}
    cluster.produce(1, 40)
    driver.run_polling(2_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    assert not driver.sink.errors


def test_nothing_matching_keeps_the_member_out_of_the_group_without_spinning() -> None:
    cluster, driver = make(topic_exists=False, others=("x",))
    driver.subscribe_pattern(r"t.*")
    driver.run_polling(10_000)
    # The broker refuses a join without topic names: none is sent.
    assert cluster.heartbeats == []
    assert driver.engine.membership.state is MemberState.UNSUBSCRIBED
    assert driver.sink.matched == [frozenset()]
    # One refresh per metadata.max.age.ms, no storm.
    assert 4 <= cluster.count("MetadataRequest") <= 7
    assert not driver.sink.errors
    cluster.topic_exists = True
    driver.run_polling(_MAX_AGE_MS + 500, until=lambda: bool(cluster.heartbeats))
    assert joins(cluster) == [["t"]]


def test_every_matched_topic_deleted_the_member_leaves_and_joins_again_later() -> None:
    cluster, driver = make(records=5)
    driver.subscribe_pattern("t")
    driver.run_polling(2_000, until=cluster.all_accepted)
    cluster.topic_exists = False
    driver.run_polling(_MAX_AGE_MS + 500)
    assert cluster.heartbeats[-1] == (-1, None)
    assert driver.engine.membership.state is MemberState.UNSUBSCRIBED
    assert driver.engine.consume.assigned == []
    assert driver.sink.matched[-1] == frozenset()
    # Out of the group: no heartbeat, and never a join without names.
    sent = len(cluster.heartbeats)
    driver.run_polling(3 * _MAX_AGE_MS)
    assert len(cluster.heartbeats) == sent
    cluster.topic_exists = True
    cluster.produce(2, 7)
    driver.run_polling(_MAX_AGE_MS + 2_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    assert joins(cluster) == [["t"], ["t"]]
    assert not driver.sink.errors  # no INVALID_REQUEST for an empty join


def test_switching_from_names_to_a_pattern_that_still_matches_them_does_not_leave() -> None:
    cluster, driver = make(others=("t-a",), records=5)
    driver.subscribe()
    driver.run_for(2_000, until=cluster.all_accepted)
    driver.subscribe_pattern(r"t(-.*)?")
    driver.run_polling(1_000)
    assert all(epoch != -1 for epoch, _ in cluster.heartbeats)
    assert cluster.heartbeats[-1][1] == ["t", "t-a"] or ["t", "t-a"] in [
        n for _, n in cluster.heartbeats]
    assert driver.sink.matched == [frozenset(), frozenset({"t", "t-a"})]


def test_an_answer_by_names_is_not_taken_for_what_the_pattern_matches() -> None:
    cluster, driver = make(others=("t-a",))
    engine = driver.engine
    engine.subscribe(frozenset({"t"}))
    [request] = [r for r in engine.poll(0) if isinstance(r.request, MetadataRequest)]
    assert request.request.topics is not None
    engine.subscribe_pattern(re.compile(r"t(-.*)?"))
    response, _ = cluster.answer(request)
    request.answer(response, None, 5)
    # The by-name answer knows nothing of t-a: the full answer is asked for now.
    assert driver.sink.matched == [frozenset()]
    assert engine.cluster.needs_update(5)
    [request] = [r for r in engine.poll(500) if isinstance(r.request, MetadataRequest)]
    assert request.request.topics is None
    response, _ = cluster.answer(request)
    request.answer(response, None, 505)
    assert driver.sink.matched[-1] == {"t", "t-a"}


def test_back_to_names_or_unsubscribed_the_pattern_is_forgotten() -> None:
    cluster, driver = make(others=("t-a",))
    driver.subscribe_pattern(r"t(-.*)?")
    driver.run_polling(1_000)
    driver.engine.subscribe(frozenset({"t"}))
    before = len(cluster.metadata_requests)
    driver.run_polling(_MAX_AGE_MS + 500)
    assert cluster.metadata_requests[before:] and all(
        r == ["t"] for r in cluster.metadata_requests[before:])
    matched = list(driver.sink.matched)
    cluster.other_topics["t-b"] = uuid.uuid4()
    driver.run_polling(_MAX_AGE_MS + 500)
    assert driver.sink.matched == matched  # no pattern any more: nothing re-matched
    driver.engine.unsubscribe()
    before = len(cluster.metadata_requests)
    driver.run_for(3 * _MAX_AGE_MS)
    assert len(cluster.metadata_requests) == before
