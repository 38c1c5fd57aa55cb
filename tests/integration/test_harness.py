"""The broker harness itself, against real Kafka processes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafka_share.testing import (
    BrokerStartError,
    KafkaAdmin,
    KafkaCluster,
    LocalKafkaCluster,
)

pytestmark = pytest.mark.integration


def test_session_cluster_answers_metadata(
    kafka_cluster: KafkaCluster, kafka_admin: KafkaAdmin
) -> None:
    assert kafka_cluster.nodes
    assert set(kafka_cluster.bootstrap_servers.split(",")) == set(kafka_cluster.nodes.values())
    cluster = kafka_admin.client.describe_cluster(timeout=10)
    assert {n.node_id for n in cluster.nodes} == set(kafka_cluster.nodes)


def test_share_version_is_enabled(kafka_cluster: KafkaCluster) -> None:
    # confluent-kafka exposes no DescribeFeatures; the finalized level written at
    # format time is read from StorageTool's output. (The ApiVersions check of
    # the finalized feature belongs to the protocol layer's tests.)
    if not isinstance(kafka_cluster, LocalKafkaCluster):
        pytest.skip("format-time features are only known for the jar backend")
    assert kafka_cluster.bootstrap_features.get("share.version", 0) >= 1


def test_topic_factory_creates_partitions_and_produce_reports_offsets(
    topic_factory: Callable[..., str], kafka_admin: KafkaAdmin
) -> None:
    topic = topic_factory(partitions=4)
    described = kafka_admin.client.describe_topics([topic], timeout=10)
    assert len(described[topic].partitions) == 4
    landed = kafka_admin.produce(topic, [b"a", b"b", b"c"], partition=2, key=b"k")
    assert [(r.partition, r.offset) for r in landed] == [(2, 0), (2, 1), (2, 2)]
    again = kafka_admin.produce(topic, [b"d"], partition=2, compression="zstd")
    assert (again[0].partition, again[0].offset) == (2, 3)


def test_group_config_helper_round_trips(
    share_group_factory: Callable[..., str], kafka_admin: KafkaAdmin
) -> None:
    group = share_group_factory({"share.record.lock.duration.ms": "1000"})
    configs = kafka_admin.describe_group_config(group)
    assert configs["share.auto.offset.reset"] == "earliest"
    assert configs["share.record.lock.duration.ms"] == "1000"


def test_group_config_below_broker_minimum_is_refused(kafka_admin: KafkaAdmin) -> None:
    from kafka_share.testing import HarnessError, unique_name

    with pytest.raises(HarnessError, match=r"share\.record\.lock\.duration\.ms"):
        kafka_admin.set_group_config(unique_name("g"), {"share.record.lock.duration.ms": "500"})


@pytest.fixture
def own_cluster() -> Iterator[LocalKafkaCluster]:
    cluster = LocalKafkaCluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_kill_and_restart_keeps_data(own_cluster: LocalKafkaCluster) -> None:
    admin = own_cluster.admin()
    topic = admin.create_topic(partitions=2)
    admin.produce(topic, [b"one", b"two"], partition=1)
    old_pid = own_cluster.pids[1]

    own_cluster.restart_node(1, kill=True)

    assert own_cluster.pids[1] != old_pid
    admin = own_cluster.admin()
    assert topic in admin.list_topics()
    landed = admin.produce(topic, [b"three"], partition=1)
    # Offsets continue after the records written before the kill.
    assert landed[0].offset == 2


def test_stop_is_clean_and_removes_temporary_data() -> None:
    cluster = LocalKafkaCluster()
    cluster.start()
    pid = cluster.pids[1]
    work_dir = cluster.work_dir
    assert work_dir is not None and work_dir.is_dir()
    log_path = cluster.log_path(1)
    started = time.monotonic()
    cluster.stop()
    assert time.monotonic() - started < 20
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not work_dir.exists()
    assert not Path(log_path).exists()
    cluster.stop()  # idempotent


@pytest.mark.parametrize(
    ("extra_config", "expected"),
    [
        # Rejected by the config validation StorageTool runs at format time.
        ({"group.share.heartbeat.interval.ms": "20000"}, "StorageTool exited with"),
        # Valid to StorageTool, but the broker process dies loading it.
        ({"authorizer.class.name": "com.example.NoSuchAuthorizer"}, "exited with code"),
    ],
    ids=["format-time", "run-time"],
)
def test_bad_config_fails_with_the_log_tail(extra_config: dict[str, str], expected: str) -> None:
    cluster = LocalKafkaCluster(extra_config=extra_config, start_timeout_s=60)
    with pytest.raises(BrokerStartError) as info:
        cluster.start()
    message = str(info.value)
    assert expected in message
    # The tail names the offending setting.
    assert next(iter(extra_config.values())) in message or next(iter(extra_config)) in message
    assert cluster.work_dir is None  # the temporary directory is gone


def test_share_disabled_cluster_refuses_share_groups() -> None:
    from confluent_kafka import KafkaException, ShareConsumer

    with LocalKafkaCluster(share_enabled=False) as cluster:
        assert isinstance(cluster, LocalKafkaCluster)
        # Level 0 means no FeatureLevelRecord at all.
        assert cluster.bootstrap_features.get("share.version", 0) == 0
        assert cluster.bootstrap_features.get("metadata.version", 0) > 0
        admin = cluster.admin()
        topic = admin.create_topic()
        admin.produce(topic, [b"x"])
        consumer = ShareConsumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "no-share"}
        )
        try:
            consumer.subscribe([topic])
            # The broker answers ShareGroupHeartbeat with UNSUPPORTED_VERSION.
            with pytest.raises(KafkaException, match="UNSUPPORTED_VERSION"):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    consumer.poll(0.5)
        finally:
            consumer.close()


@pytest.mark.slow
def test_three_node_cluster_survives_losing_a_node() -> None:
    with LocalKafkaCluster(num_nodes=3) as cluster:
        assert isinstance(cluster, LocalKafkaCluster)
        assert sorted(cluster.nodes) == [1, 2, 3]
        admin = cluster.admin()
        topic = admin.create_topic(partitions=3, replication_factor=3)
        admin.produce(topic, [b"before"], partition=0)

        cluster.kill_node(2)
        # Two of three controllers and in-sync replicas remain: still writable.
        assert admin.produce(topic, [b"during"], partition=0)[0].offset == 1

        cluster.start_node(2)
        assert set(cluster.pids) == {1, 2, 3}
        assert admin.produce(topic, [b"after"], partition=0)[0].offset == 2


def test_cli_start_status_stop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kafka_share.testing import cache_root
    from kafka_share.testing.cli import broker

    # Same jars as the session (no second download), separate dev-broker state.
    jars = cache_root()
    state_root = tmp_path / "cache"
    state_root.mkdir()
    for entry in jars.iterdir():
        if entry.name.startswith("kafka_2.13-"):
            (state_root / entry.name).symlink_to(entry)
    monkeypatch.setenv("KAFKA_SHARE_CACHE_DIR", str(state_root))
    runner = CliRunner()
    started = runner.invoke(broker, ["start"])
    assert started.exit_code == 0, started.output
    bootstrap = started.output.strip().splitlines()[-1]
    try:
        again = runner.invoke(broker, ["start"])
        assert again.exit_code == 1
        assert "already running" in again.output
        status = runner.invoke(broker, ["status"])
        assert status.exit_code == 0
        assert bootstrap in status.output
        with KafkaAdmin(bootstrap) as admin:
            assert admin.create_topic(partitions=2)
    finally:
        stopped = runner.invoke(broker, ["stop"])
    assert stopped.exit_code == 0
    assert "Stopped" in stopped.output
    assert runner.invoke(broker, ["status"]).exit_code == 1
