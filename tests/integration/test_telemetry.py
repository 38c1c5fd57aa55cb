"""Client telemetry (KIP-714) against a real Kafka 4.4 broker.

A broker pushes nothing anywhere unless a metrics reporter receives client
telemetry: this module compiles one (``telemetry_reporter/FileTelemetryReporter.java``,
a few lines against the broker's jars), starts a broker of its own with it, and
reads what the consumers pushed back from the files it writes, with the official
OTLP classes. The shared session broker, which has no such reporter, is the
cluster that does not offer telemetry.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.metrics.v1 import metrics_pb2
from share_helpers import poll_until

from kafka_share import AsyncShareConsumer, ShareConsumer
from kafka_share.admin import Admin
from kafka_share.errors import IllegalStateError, UnsupportedVersionError
from kafka_share.testing import KafkaAdmin, LocalKafkaCluster
from kafka_share.testing.admin import unique_name
from kafka_share.testing.java import find_java
from kafka_share.testing.maven import ensure_kafka_libs
from kafka_share.testing.versions import parse_kafka_version

pytestmark = pytest.mark.integration

REPORTER = Path(__file__).parent / "telemetry_reporter" / "FileTelemetryReporter.java"
SHARE_PREFIX = "org.apache.kafka.consumer.share."
CONSUMED_TOTAL = SHARE_PREFIX + "fetch.manager.records.consumed.total"
PUSH_INTERVAL_MS = 500


def _compile_reporter(out_dir: Path, version: str) -> None:
    libs = ensure_kafka_libs(parse_kafka_version(version))
    javac = str(Path(find_java()).resolve().with_name("javac"))
    subprocess.run(
        [javac, "-cp", libs.classpath, "-d", str(out_dir), str(REPORTER)],
        check=True, capture_output=True, timeout=120,
    )


@pytest.fixture(scope="module")
def telemetry_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    """A broker whose metrics reporter writes every pushed payload to ``telemetry_dir``."""
    classes = tmp_path_factory.mktemp("reporter-classes")
    pushed = tmp_path_factory.mktemp("pushed")
    cluster = LocalKafkaCluster(
        extra_config={"metric.reporters": "FileTelemetryReporter",
                      "telemetry.test.dir": str(pushed)},
        extra_classpath=[classes],
    )
    version = parse_kafka_version(cluster.kafka_version or "")
    if (version.major, version.minor) < (4, 2):  # KAFKA_SHARE_KAFKA_VERSION set lower
        pytest.skip(f"the test's reporter implements ClientTelemetryExporterProvider, "
                    f"Kafka 4.2+; this run uses {version}")
    _compile_reporter(classes, cluster.kafka_version or "")
    cluster.start()
    cluster.telemetry_dir = pushed  # type: ignore[attr-defined]
    try:
        with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.alter_client_metrics("share-consumers", {
                "metrics": [SHARE_PREFIX], "interval.ms": PUSH_INTERVAL_MS,
            })
            entries = admin.describe_client_metrics("share-consumers")
            assert entries["metrics"].value == SHARE_PREFIX
        yield cluster
    finally:
        cluster.stop()


def _kafka_uuid(instance_id: uuid.UUID) -> str:
    """How Kafka's ``Uuid.toString`` writes an id (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(instance_id.bytes).decode().rstrip("=")


def _pushes(cluster: LocalKafkaCluster, instance_id: uuid.UUID) -> list[tuple[str, bytes]]:
    """(kind, OTLP bytes) of every payload the client pushed, in order."""
    pushed_dir = Path(cluster.telemetry_dir)  # type: ignore[attr-defined]
    found = sorted(pushed_dir.glob(f"*-{_kafka_uuid(instance_id)}-*.otlp"))
    return [(p.name.split("-")[-2], p.read_bytes()) for p in found]


def _wait_for_pushes(
    cluster: LocalKafkaCluster, instance_id: uuid.UUID, count: int, timeout_s: float = 20
) -> list[tuple[str, bytes]]:
    deadline = time.monotonic() + timeout_s
    while True:
        pushes = _pushes(cluster, instance_id)
        if len(pushes) >= count or time.monotonic() > deadline:
            return pushes
        time.sleep(0.1)


def _points(payload: bytes) -> dict[str, list[metrics_pb2.Metric]]:
    data = metrics_pb2.MetricsData.FromString(payload)
    out: dict[str, list[metrics_pb2.Metric]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out.setdefault(metric.name, []).append(metric)
    return out


def _resource(payload: bytes) -> dict[str, str]:
    data = metrics_pb2.MetricsData.FromString(payload)
    return {kv.key: kv.value.string_value for kv in data.resource_metrics[0].resource.attributes}


def _setup_group(cluster: LocalKafkaCluster, records: int) -> tuple[str, str]:
    with KafkaAdmin(cluster.bootstrap_servers) as admin:
        topic = admin.create_topic(unique_name("telemetry"))
        group = unique_name("telemetry-group")
        admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
        admin.produce(topic, [f"v{i}".encode() for i in range(records)])
    return topic, group


def test_a_consumer_pushes_its_share_metrics_and_a_last_push_at_close(
    telemetry_cluster: LocalKafkaCluster,
) -> None:
    topic, group = _setup_group(telemetry_cluster, 25)
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=telemetry_cluster.bootstrap_servers, group_id=group, client_rack="r1",
    )
    with consumer:
        instance_id = consumer.client_instance_id(timeout=10)
        assert isinstance(instance_id, uuid.UUID) and instance_id.int != 0
        consumer.subscribe([topic])
        got = poll_until(consumer, lambda r: len(r) >= 25, timeout_s=30)
        assert len(got) == 25
        consumer.commit_sync()
        # The first push comes 0.5-1.5 intervals after the subscription, then one
        # per interval: a few seconds see several.
        assert len(_wait_for_pushes(telemetry_cluster, instance_id, 3)) >= 3
        assert consumer.client_instance_id(timeout=0) == instance_id
        member_id = consumer.member_id
    pushes = _wait_for_pushes(telemetry_cluster, instance_id, len(_pushes(
        telemetry_cluster, instance_id)) + 1, timeout_s=5)
    kinds = [kind for kind, _ in pushes]
    assert kinds[-1] == "terminating" and kinds.count("terminating") == 1, kinds

    resource = _resource(pushes[0][1])
    assert resource["group_id"] == group
    assert resource["client_rack"] == "r1"
    assert resource["group_member_id"] == member_id
    # Only the subscribed prefix, under Java's names.
    names = set().union(*(_points(p) for _, p in pushes))
    assert names and all(n.startswith(SHARE_PREFIX) for n in names), names
    assert {SHARE_PREFIX + "poll.idle.ratio.avg", SHARE_PREFIX + "coordinator.heartbeat.rate",
            CONSUMED_TOTAL} <= names
    # The counters are sums of deltas (the broker asks for delta temporality):
    # over every push they add up to the records consumed.
    consumed = 0.0
    for _, payload in pushes:
        for metric in _points(payload).get(CONSUMED_TOTAL, []):
            assert metric.WhichOneof("data") == "sum"
            assert metric.sum.is_monotonic
            assert metric.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
            consumed += sum(dp.as_double for dp in metric.sum.data_points)
    assert consumed == 25


def test_the_asyncio_consumer_reports_the_same_instance_id_the_broker_files_under(
    telemetry_cluster: LocalKafkaCluster,
) -> None:
    topic, group = _setup_group(telemetry_cluster, 3)

    async def main() -> uuid.UUID | None:
        async with AsyncShareConsumer(
            bootstrap_servers=telemetry_cluster.bootstrap_servers, group_id=group,
        ) as consumer:
            first = await consumer.client_instance_id(timeout=10)
            await consumer.subscribe([topic])
            deadline = time.monotonic() + 30
            seen = 0
            while seen < 3 and time.monotonic() < deadline:
                seen += len(await consumer.poll(timeout=0.5))
            assert seen == 3
            assert await consumer.client_instance_id(timeout=0) == first
            return first

    instance_id = asyncio.run(main())
    assert instance_id is not None
    pushes = _wait_for_pushes(telemetry_cluster, instance_id, 1, timeout_s=5)
    assert pushes and pushes[-1][0] == "terminating"


def test_with_metrics_push_off_nothing_is_pushed_and_the_id_is_refused(
    telemetry_cluster: LocalKafkaCluster,
) -> None:
    topic, group = _setup_group(telemetry_cluster, 3)
    pushed_dir = Path(telemetry_cluster.telemetry_dir)  # type: ignore[attr-defined]
    before = set(pushed_dir.iterdir())
    with ShareConsumer(
        bootstrap_servers=telemetry_cluster.bootstrap_servers, group_id=group,
        enable_metrics_push=False,
    ) as consumer:
        with pytest.raises(IllegalStateError, match=r"enable\.metrics\.push"):
            consumer.client_instance_id(timeout=1)
        consumer.subscribe([topic])
        assert len(poll_until(consumer, lambda r: len(r) >= 3, timeout_s=30)) == 3
        time.sleep(3 * PUSH_INTERVAL_MS / 1000)
    assert set(pushed_dir.iterdir()) == before


def test_a_cluster_without_a_telemetry_reporter_gets_nothing_and_nothing_alarms(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, caplog: pytest.LogCaptureFixture
) -> None:
    topic = kafka_admin.create_topic(unique_name("no-telemetry"))
    group = unique_name("no-telemetry-group")
    kafka_admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
    kafka_admin.produce(topic, [b"a", b"b"])
    caplog.set_level(logging.DEBUG, logger="kafka_share")
    with ShareConsumer(bootstrap_servers=kafka_bootstrap, group_id=group) as consumer:
        consumer.subscribe([topic])
        assert len(poll_until(consumer, lambda r: len(r) >= 2, timeout_s=30)) == 2
        started = time.monotonic()
        with pytest.raises(UnsupportedVersionError, match="does not offer client telemetry"):
            consumer.client_instance_id(timeout=10)
        assert time.monotonic() - started < 2  # known already: no wait for the timeout
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [], [r.getMessage() for r in loud]
    assert any("does not offer client telemetry" in r.getMessage() for r in caplog.records
               if r.levelno == logging.DEBUG)
