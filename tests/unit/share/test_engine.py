"""ConsumerEngine against a sans-IO fake cluster: the policies that keep a consumer
correct and quiet through failures (unreachable brokers, a dead leader, leader
moves, broker restarts, fencing), on a simulated clock."""

from __future__ import annotations

import pytest

from kafka_share.models import AcknowledgeType
from tests.fakes.cluster import EngineDriver, FakeCluster


def test_consumes_every_record_once_from_three_leaders() -> None:
    cluster = FakeCluster(records_per_partition=120)
    driver = EngineDriver(cluster)
    driver.subscribe()
    driver.run_for(5_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    assert max(cluster.deliveries.values()) == 1
    assert {f.node_id for f in driver.sink.fetches} == {1, 2, 3}


def test_every_broker_unreachable_the_engine_backs_off_instead_of_spinning() -> None:
    cluster = FakeCluster()
    cluster.down = {1, 2, 3}
    driver = EngineDriver(cluster, bootstrap_servers="b1:9092,b2:9092")
    cluster.down |= {-1, -2}  # the bootstrap servers too
    driver.subscribe()
    driver.run_for(10_000)
    # retry.backoff.ms 100 doubling to retry.backoff.max.ms 1000: about a dozen tries.
    assert 5 <= cluster.count("MetadataRequest") <= 16
    assert cluster.count("FindCoordinatorRequest") <= 16
    assert driver.loops <= 100, f"{driver.loops} engine loops in 10 s: a busy loop"


def test_one_dead_leader_does_not_cause_a_metadata_storm() -> None:
    cluster = FakeCluster(records_per_partition=60)
    driver = EngineDriver(cluster)
    driver.subscribe()
    driver.run_for(2_000, until=cluster.all_accepted)
    cluster.produce(0, 1000)
    cluster.produce(1, 1000)
    cluster.produce(2, 1000)
    cluster.down = {3}  # partition 2's leader dies; the controller has not noticed yet
    metadata_before = cluster.count("MetadataRequest")
    fetches_before = cluster.count("ShareFetchRequest", node=3)
    driver.run_for(10_000)
    metadata = cluster.count("MetadataRequest") - metadata_before
    to_dead = cluster.count("ShareFetchRequest", node=3) - fetches_before
    # Every failed fetch asks for metadata; the refresh policy turns that into a
    # backed-off trickle, and the dead node is retried with its own backoff.
    assert metadata <= 16, f"{metadata} Metadata requests in 10 s"
    assert to_dead <= 16, f"{to_dead} ShareFetch requests to the dead node in 10 s"
    # The live partitions kept flowing meanwhile.
    assert len(cluster.partitions[0].accepted) == 1060
    assert len(cluster.partitions[1].accepted) == 1060


def test_a_leader_move_follows_the_current_leader_hint_and_acks_stay_with_the_old_node() -> None:
    cluster = FakeCluster(records_per_partition=0)
    driver = EngineDriver(cluster)
    driver.subscribe()
    driver.run_for(1_000)
    cluster.produce(0, 50)
    # The fetch that acquires these is answered by node 1; the records are acked there.
    driver.run_for(400, until=lambda: bool(cluster.partitions[0].acquired))
    cluster.move_leader(0, 2)
    cluster.produce(0, 50)
    driver.run_for(5_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    nodes = [f.node_id for f in driver.sink.fetches if f.partition.partition == 0]
    assert nodes[0] == 1 and nodes[-1] == 2
    assert all(c.error is None for c in driver.sink.completions)


def test_leader_hints_in_a_circle_are_followed_with_backoff_not_in_a_busy_loop() -> None:
    cluster = FakeCluster(brokers=2, leaders={0: 1}, records_per_partition=0)
    driver = EngineDriver(cluster)
    driver.subscribe()
    driver.run_for(1_000)
    # Node 1 says node 2 leads, node 2 says node 1 does; metadata says node 1.
    cluster.false_hints = {1: 2, 2: 1}
    cluster.produce(0, 30)
    fetches, metadata = cluster.count("ShareFetchRequest"), cluster.count("MetadataRequest")
    loops = driver.loops
    driver.run_for(10_000)
    fetches = cluster.count("ShareFetchRequest") - fetches
    metadata = cluster.count("MetadataRequest") - metadata
    assert fetches <= 40, f"{fetches} ShareFetch requests in 10 s between lying brokers"
    assert metadata <= 16, f"{metadata} Metadata requests in 10 s"
    assert driver.loops - loops <= 200, f"{driver.loops - loops} engine loops in 10 s"
    # The brokers stop lying: the records come.
    cluster.false_hints = {}
    driver.run_for(10_000, until=cluster.all_accepted)
    assert cluster.all_accepted()


def test_acks_waiting_behind_an_unanswered_fetch_do_not_spin_the_loop() -> None:
    """A ShareFetch whose answer never comes (a truncated or stalled response)
    holds the node until the request times out; acknowledgements made meanwhile
    wait for it, and so does the loop, instead of waking every millisecond."""
    cluster = FakeCluster(brokers=1, leaders={0: 1, 1: 1, 2: 1}, records_per_partition=20)
    driver = EngineDriver(cluster, ack_type=lambda partition, offset, count: None)
    driver.subscribe()
    driver.run_for(2_000, until=lambda: len(driver.withheld) >= 60)
    cluster.stall_share_fetch_ms = 4_000
    cluster.produce(0, 10)
    driver.run_for(600)  # the next ShareFetch goes out, and hangs
    driver.ack_withheld()  # commit_async while it hangs
    loops = driver.loops
    driver.run_for(3_000)
    assert driver.loops - loops <= 100, f"{driver.loops - loops} engine loops in 3 s"
    # The broker answers again: every record is accepted in the end (those whose
    # acks were lost with the session come back when their locks run out).
    cluster.stall_share_fetch_ms = 0
    driver.ack_type = lambda partition, offset, count: AcknowledgeType.ACCEPT
    driver.run_for(60_000, until=cluster.all_accepted)
    assert cluster.all_accepted()


def test_a_broker_restart_resets_the_share_session_and_consumption_goes_on() -> None:
    cluster = FakeCluster(records_per_partition=40)
    driver = EngineDriver(cluster)
    driver.subscribe()
    driver.run_for(3_000, until=cluster.all_accepted)
    cluster.restart(1)
    cluster.produce(0, 40)
    driver.run_for(5_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    # The next fetch to node 1 failed with SHARE_SESSION_NOT_FOUND; a new session
    # (epoch 0) was opened and fetching went on.
    assert cluster.sessions[(1, "member-1")] >= 1


def test_a_fenced_member_rejoins_at_epoch_zero_and_keeps_consuming() -> None:
    cluster = FakeCluster(records_per_partition=30)
    driver = EngineDriver(cluster)
    driver.subscribe()
    driver.run_for(3_000, until=cluster.all_accepted)
    epoch_before = cluster.member_epoch
    cluster.fence_next_heartbeat = True
    driver.run_for(3_000)
    assert not cluster.fence_next_heartbeat  # the fencing happened
    assert cluster.member_epoch > epoch_before  # it rejoined
    cluster.produce(1, 30)
    driver.run_for(5_000, until=cluster.all_accepted)
    assert cluster.all_accepted()


def test_released_records_come_back_with_delivery_count_two() -> None:
    cluster = FakeCluster(records_per_partition=10)

    def release_first_delivery(partition: int, offset: int, count: int) -> AcknowledgeType:
        return AcknowledgeType.RELEASE if count == 1 else AcknowledgeType.ACCEPT

    driver = EngineDriver(cluster, ack_type=release_first_delivery)
    driver.subscribe()
    driver.run_for(5_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    assert set(cluster.deliveries.values()) == {2}


@pytest.mark.parametrize("down", [{1}, {2}, {1, 2, 3}])
def test_time_until_next_is_never_zero_while_nothing_can_be_done(down: set[int]) -> None:
    cluster = FakeCluster(records_per_partition=0)
    driver = EngineDriver(cluster)
    driver.subscribe()
    driver.run_for(1_000)
    cluster.down = down
    loops = driver.loops
    driver.run_for(10_000)
    assert driver.loops - loops <= 150


@pytest.mark.parametrize(("strategy", "expect_bootstrap"), [("rebootstrap", True), ("none", False)])
def test_metadata_recovery_rebootstraps_when_no_known_broker_answers(
    strategy: str, expect_bootstrap: bool
) -> None:
    cluster = FakeCluster(records_per_partition=0)
    driver = EngineDriver(
        cluster, metadata_recovery_strategy=strategy,
        metadata_recovery_rebootstrap_trigger_ms=3_000,
    )
    driver.subscribe()
    driver.run_for(1_000)
    cluster.down = {1, 2, 3}  # every broker the metadata named is gone
    driver.engine.cluster.request_update()
    before = len(cluster.received)
    driver.run_for(10_000)
    to_bootstrap = [n for n, api in cluster.received[before:]
                    if api == "MetadataRequest" and n < 0]
    assert bool(to_bootstrap) is expect_bootstrap


def test_group_authorization_failure_names_the_group() -> None:
    from kafka_share.errors import GroupAuthorizationFailedError
    from kafka_share.protocol.messages import ShareGroupHeartbeatResponse

    cluster = FakeCluster()
    cluster._heartbeat = (  # type: ignore[method-assign]
        lambda node, request: ShareGroupHeartbeatResponse(error_code=30)
    )
    driver = EngineDriver(cluster)
    driver.subscribe()
    driver.run_for(2_000, until=lambda: bool(driver.sink.errors))
    error, fatal = driver.sink.errors[0]
    assert isinstance(error, GroupAuthorizationFailedError) and fatal
    assert "not authorized to access group 'g'" in str(error)


def test_an_authentication_failure_reaches_the_application() -> None:
    from kafka_share.errors import SaslAuthenticationError
    from kafka_share.share.unsent import Channel

    driver = EngineDriver(FakeCluster())
    failure = SaslAuthenticationError("SASL PLAIN authentication to broker b1:9092 failed")
    driver.engine.on_disconnect(1, Channel.CONTROL, failure)
    assert driver.sink.errors == [(failure, False)]


def test_the_coordinator_is_looked_up_before_subscribing_so_the_first_heartbeat_goes_at_once(
) -> None:
    """Java's network thread and librdkafka look the group coordinator up from
    the start; subscribing then heartbeats in its first round, not a
    FindCoordinator round trip later."""
    cluster = FakeCluster(records_per_partition=0)
    driver = EngineDriver(cluster)
    driver.run_for(1_000)
    assert [api for _, api in cluster.received] == ["FindCoordinatorRequest"]
    assert driver.engine.coordinator.known
    driver.subscribe()
    before = len(cluster.received)
    driver.run_for(1, stop_at_end=True)  # one round, no answer yet
    assert "ShareGroupHeartbeatRequest" in [api for _, api in cluster.received[before:]]
    assert cluster.count("FindCoordinatorRequest") == 1


def test_an_unsubscribed_consumer_tries_the_early_lookup_once() -> None:
    """Before a subscription the lookup is an optimisation: it is not retried
    (a consumer never subscribed stays quiet); subscribing looks up again."""
    cluster = FakeCluster(records_per_partition=0)
    cluster.down = {-1}  # the bootstrap server
    driver = EngineDriver(cluster)
    driver.run_for(30_000)
    assert cluster.count("FindCoordinatorRequest") == 1  # failed, and not tried again
    assert not driver.engine.coordinator.known
    assert driver.loops <= 40, f"{driver.loops} engine loops in 30 s"
    cluster.down = set()
    driver.run_for(30_000)
    assert cluster.count("FindCoordinatorRequest") == 1
    driver.subscribe()
    driver.run_for(2_000, until=lambda: driver.engine.coordinator.known)
    assert driver.engine.coordinator.known
