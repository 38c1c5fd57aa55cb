"""ConsumerEngine and acquisition locks, against the sans-IO fake cluster on a
simulated clock: re-sent acquisitions, lock deadlines, share.auto.renew."""

from __future__ import annotations

from kafka_share.errors import InvalidRecordStateError, UnsupportedVersionError
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.models import AcknowledgeType
from kafka_share.share.engine import ConsumerEngine
from kafka_share.share.held import lock_expiry_ms
from tests.fakes.cluster import EngineDriver, FakeCluster

HOLD = None  # ack_type's answer for "the application keeps working on it"


def _hold_offset(target: int):  # type: ignore[no-untyped-def]
    def ack_type(partition: int, offset: int, count: int) -> AcknowledgeType | None:
        if partition == 0 and offset == target:
            return HOLD
        return AcknowledgeType.ACCEPT

    return ack_type


def _with_metrics(driver: EngineDriver, **config: object) -> ShareConsumerMetrics:
    """Rebuild the driver's engine with a metrics registry."""
    metrics = ShareConsumerMetrics()
    old = driver.engine
    driver.engine = ConsumerEngine(
        old._config, member_id="member-1", sink=driver.sink,
        share_fetch_version=lambda node: 2, metrics=metrics, random_source=lambda: 0.5,
    )
    return metrics


def test_records_a_broker_sends_again_while_held_are_not_delivered_twice() -> None:
    """librdkafka's mock cluster answers each ShareFetch with every record the
    member holds; the engine must drop those resends (same node, session and
    delivery count), or the application gets them twice and acks them twice."""
    cluster = FakeCluster(brokers=1, leaders={0: 1}, records_per_partition=30)
    cluster.resend_held = True
    driver = EngineDriver(cluster, ack_type=_hold_offset(5))
    metrics = _with_metrics(driver)
    driver.subscribe()
    driver.run_for(2_000, until=lambda: len(cluster.partitions[0].accepted) == 29)
    cluster.produce(0, 20)
    driver.run_for(2_000, until=lambda: len(cluster.partitions[0].accepted) == 49)
    driver.ack_withheld()
    driver.run_for(2_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    handed = [(p, o) for p, o, _c in driver.handed_out]
    assert len(handed) == len(set(handed)) == 50, "a record was handed out twice"
    assert all(c.error is None for c in driver.sink.completions)
    assert metrics.snapshot(driver.now_ms)["records-dropped-resent-total"] >= 1


def test_each_fetch_carries_the_conservative_end_of_its_lock() -> None:
    cluster = FakeCluster(brokers=1, leaders={0: 1}, records_per_partition=10, lock_ms=1_000)
    driver = EngineDriver(cluster, latency_ms=3, ack_type=lambda p, o, c: HOLD)
    driver.subscribe()
    driver.run_for(1_000, until=lambda: bool(driver.sink.fetches))
    fetch = driver.sink.fetches[0]
    broker_deadline = cluster.partitions[0].lock_deadline[0]  # acquired + 1000
    # Arrival (3 ms after the broker acquired them) + lock - 50 ms of margin: a
    # little before the broker's deadline, never after it.
    assert fetch.lock_expires_ms == lock_expiry_ms(broker_deadline - 1_000 + 3, 1_000)
    assert fetch.lock_expires_ms < broker_deadline


def test_without_auto_renewal_a_held_record_is_redelivered_after_its_lock() -> None:
    cluster = FakeCluster(brokers=1, leaders={0: 1}, records_per_partition=10, lock_ms=1_000)
    driver = EngineDriver(cluster, ack_type=_hold_offset(3))
    driver.subscribe()
    driver.run_for(3_000)
    assert cluster.deliveries[(0, 3)] >= 2  # the contrast for the test below
    assert cluster.renewals[(0, 3)] == 0


def test_auto_renewal_holds_a_record_for_ten_lock_durations_then_it_is_accepted() -> None:
    cluster = FakeCluster(brokers=1, leaders={0: 1}, records_per_partition=10, lock_ms=1_000)
    driver = EngineDriver(cluster, ack_type=_hold_offset(3), share_auto_renew=True)
    metrics = _with_metrics(driver)
    driver.subscribe()
    driver.run_for(10_000)
    assert cluster.deliveries[(0, 3)] == 1, "the lock ran out and the record came back"
    # About one renewal per half lock, not one per loop.
    assert 10 <= cluster.renewals[(0, 3)] <= 30
    # The others were accepted at once and never renewed.
    assert sum(cluster.renewals.values()) == cluster.renewals[(0, 3)]
    assert driver.loops <= 400, f"{driver.loops} engine loops in 10 s"
    driver.ack_withheld()
    driver.run_for(1_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    assert not driver.sink.errors
    # Renewals never reach the application (no completion, no records again).
    assert all(not c.renewed_offsets for c in driver.sink.completions)
    assert len(driver.handed_out) == 10
    snapshot = metrics.snapshot(driver.now_ms)
    assert snapshot["acquisition-lock-renewals-total"] == cluster.renewals[(0, 3)]
    assert snapshot["acquisition-lock-renewal-errors-total"] == 0


def test_auto_renewal_renews_records_still_buffered() -> None:
    """Records handed to the application side but not delivered by poll yet
    (here: none acknowledged at all) are renewed like those being worked on."""
    cluster = FakeCluster(brokers=1, leaders={0: 1}, records_per_partition=10, lock_ms=1_000)
    driver = EngineDriver(cluster, ack_type=lambda p, o, c: HOLD, share_auto_renew=True)
    driver.subscribe()
    driver.run_for(5_000)
    assert set(cluster.deliveries.values()) == {1}
    assert len(cluster.renewals) == 10


def test_auto_renewal_stops_at_its_limit_and_reports_the_lost_locks() -> None:
    cluster = FakeCluster(brokers=1, leaders={0: 1}, records_per_partition=10, lock_ms=1_000)
    driver = EngineDriver(
        cluster, ack_type=_hold_offset(3), share_auto_renew=True, share_auto_renew_max_ms=3_000
    )
    driver.subscribe()
    driver.run_for(6_000)
    assert cluster.deliveries[(0, 3)] >= 2  # the broker took it back after the limit
    # Renewed for 3 s of each acquisition (about every 0.5 s), not for 6 s.
    assert cluster.renewals[(0, 3)] <= 14
    lost = [o for event in driver.sink.lost for o in event.offsets]
    assert 3 in lost
    # Why, for the application that holds it (told at its next poll).
    assert "share.auto.renew.max.ms (3000 ms)" in driver.sink.lost[0].reason


def test_a_group_that_refuses_renewal_gets_a_clear_fatal_error() -> None:
    cluster = FakeCluster(brokers=1, leaders={0: 1}, records_per_partition=10, lock_ms=1_000)
    cluster.renew_enabled = False
    driver = EngineDriver(cluster, ack_type=_hold_offset(3), share_auto_renew=True)
    driver.subscribe()
    driver.run_for(3_000, until=lambda: bool(driver.sink.errors))
    [(error, fatal)] = driver.sink.errors
    assert fatal and isinstance(error, InvalidRecordStateError)
    assert "share.renew.acknowledge.enable" in str(error)
    assert [o for event in driver.sink.lost for o in event.offsets] == [3]
    assert "the broker refused to renew their locks" in driver.sink.lost[0].reason
    renewals = sum(cluster.renewals.values()) + cluster.count("ShareAcknowledgeRequest")
    driver.run_for(3_000)
    # It stopped trying (no RENEW per loop against a group that refuses them).
    assert sum(cluster.renewals.values()) + cluster.count("ShareAcknowledgeRequest") <= (
        renewals + 1
    )


def test_auto_renewal_against_kafka_41_fails_clearly() -> None:
    driver = EngineDriver(FakeCluster(), share_auto_renew=True)
    driver.engine.on_share_fetch_versions(1)
    [(error, fatal)] = driver.sink.errors
    assert fatal and isinstance(error, UnsupportedVersionError)
    assert "share.auto.renew" in str(error) and "4.2" in str(error)


def test_a_long_polling_fetch_does_not_delay_a_renewal() -> None:
    """With nothing new to fetch the broker holds a ShareFetch for fetch.max.wait.ms;
    one request per node is in flight, so the fetch must not outlast the next renewal."""
    cluster = FakeCluster(brokers=1, leaders={0: 1}, records_per_partition=5, lock_ms=1_000)
    driver = EngineDriver(
        cluster, ack_type=_hold_offset(0), share_auto_renew=True, fetch_max_wait_ms=5_000,
        request_timeout_ms=30_000,
    )
    driver.subscribe()
    driver.run_for(8_000)
    assert cluster.deliveries[(0, 0)] == 1


def test_holding_records_after_leaving_the_group_does_not_spin() -> None:
    cluster = FakeCluster(brokers=1, leaders={0: 1}, records_per_partition=10, lock_ms=1_000)
    driver = EngineDriver(cluster, ack_type=_hold_offset(3), share_auto_renew=True)
    driver.subscribe()
    driver.run_for(2_000)
    driver.engine.unsubscribe()  # the sessions close; held locks are released
    loops = driver.loops
    driver.run_for(5_000)
    assert driver.loops - loops <= 60, f"{driver.loops - loops} engine loops in 5 s"
    assert not driver.engine.consume.held
