"""Share-group dead-letter queues (KIP-1191) on a real Kafka 4.4 broker.

Dead letters need the cluster feature ``share.version=2``, which the shared
session broker does not have (it is pinned at 1): this module starts its own
broker at level 2, and uses the shared one for the broker without the feature.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from share_helpers import poll_until

from kafka_share import AcknowledgeType, DeadLetter, ShareConsumer
from kafka_share.admin import Admin
from kafka_share.commands import cli
from kafka_share.dead_letter import DELIVERY_COUNT_EXCEEDED_MESSAGE, REJECTED_MESSAGE
from kafka_share.errors import InvalidConfigError
from kafka_share.testing import KafkaAdmin, LocalKafkaCluster
from kafka_share.testing.admin import unique_name
from kafka_share.testing.errors import UnsupportedKafkaVersionError

pytestmark = pytest.mark.integration

DLQ_TOPIC = "errors.deadletterqueue.topic.name"
DLQ_COPY = "errors.deadletterqueue.copy.record.enable"
DLQ_ENABLE = "errors.deadletterqueue.group.enable"


@pytest.fixture(scope="module")
def dlq_cluster() -> Iterator[LocalKafkaCluster]:
    try:
        cluster = LocalKafkaCluster(share_version=2)
    except UnsupportedKafkaVersionError as exc:  # KAFKA_SHARE_KAFKA_VERSION before 4.4
        pytest.skip(f"dead-letter queues need Kafka 4.4+: {exc}")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def dlq_admin(dlq_cluster: LocalKafkaCluster) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(dlq_cluster.bootstrap_servers) as admin:
        yield admin


def _dlq_topic(admin: KafkaAdmin, *, enabled: bool = True) -> str:
    config = {DLQ_ENABLE: "true"} if enabled else {}
    return admin.create_topic(unique_name("dlq.test"), config=config)


def _group(admin: KafkaAdmin, dlq: str, **configs: str) -> str:
    group = unique_name("dlq-group")
    # Through Admin.alter_group_configs: the dead-letter topic is checked before it is set.
    admin.set_group_config(group, {"share.auto.offset.reset": "earliest", DLQ_TOPIC: dlq,
                                   **configs})
    return group


def _dead_letters(bootstrap: str, dlq: str, count: int) -> list[DeadLetter[Any, Any]]:
    """Read ``count`` records of ``dlq`` with a share group of its own."""
    reader_group = unique_name("dlq-reader")
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.alter_group_configs(reader_group, {"share.auto.offset.reset": "earliest"})
    with ShareConsumer(bootstrap_servers=bootstrap, group_id=reader_group) as reader:
        reader.subscribe([dlq])
        seen = poll_until(reader, lambda got: len(got) >= count, timeout_s=60)
    letters = [DeadLetter.from_record(r) for r in seen]
    assert None not in letters, "a record of the dead-letter topic is not a dead letter"
    return sorted((x for x in letters if x is not None), key=lambda x: x.offset)


def test_rejected_records_arrive_in_the_dlq_with_their_provenance_and_copies(
    dlq_cluster: LocalKafkaCluster, dlq_admin: KafkaAdmin
) -> None:
    source = dlq_admin.create_topic(partitions=1)
    dlq = _dlq_topic(dlq_admin)
    group = _group(dlq_admin, dlq, **{DLQ_COPY: "true"})
    dlq_admin.produce(source, [b"v0", b"v1", b"v2"], partition=0, key=b"k")
    with ShareConsumer(bootstrap_servers=dlq_cluster.bootstrap_servers, group_id=group,
                       share_acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([source])
        got = poll_until(consumer, lambda seen: len(seen) >= 3,
                         on_batch=lambda batch: [consumer.acknowledge(r, AcknowledgeType.REJECT)
                                                 for r in batch])
        consumer.commit_sync(timeout=10)
    assert [r.offset for r in got] == [0, 1, 2]
    letters = _dead_letters(dlq_cluster.bootstrap_servers, dlq, 3)
    assert letters == [
        DeadLetter(source, 0, offset, group, 1, REJECTED_MESSAGE, b"k", f"v{offset}".encode())
        for offset in range(3)
    ]
    assert all(x.rejected for x in letters)


def test_records_over_the_delivery_limit_arrive_in_the_dlq_without_copies(
    dlq_cluster: LocalKafkaCluster, dlq_admin: KafkaAdmin
) -> None:
    source = dlq_admin.create_topic(partitions=1)
    dlq = _dlq_topic(dlq_admin)
    group = _group(dlq_admin, dlq, **{"share.delivery.count.limit": "2"})
    dlq_admin.produce(source, [b"poison"], partition=0)
    deliveries: list[int] = []
    with ShareConsumer(bootstrap_servers=dlq_cluster.bootstrap_servers, group_id=group,
                       share_acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([source])

        def release(batch: list[Any]) -> None:
            for r in batch:
                deliveries.append(r.delivery_count)
                consumer.acknowledge(r, AcknowledgeType.RELEASE)
            if batch:
                consumer.commit_sync(timeout=10)

        poll_until(consumer, lambda seen: len(seen) >= 2, on_batch=release)
        # The limit reached, the record is gone from the group.
        assert poll_until(consumer, bool, timeout_s=3) == []
    assert deliveries == [1, 2]
    (letter,) = _dead_letters(dlq_cluster.bootstrap_servers, dlq, 1)
    assert letter == DeadLetter(source, 0, 0, group, 2, DELIVERY_COUNT_EXCEEDED_MESSAGE,
                                None, None)
    assert letter.delivery_limit_exceeded


def test_records_whose_locks_time_out_past_the_limit_arrive_in_the_dlq(
    dlq_cluster: LocalKafkaCluster, dlq_admin: KafkaAdmin
) -> None:
    """A record whose acquisition lock runs out on its last allowed delivery is
    dead-lettered, like one released that often: on Kafka 4.4 the lock's timer task
    (``SharePartition.releaseAcquisitionLockOnTimeout``) moves an acquired record at
    the limit to ARCHIVING instead of AVAILABLE (``InFlightState.tryUpdateState``),
    and once that state is written it calls ``initiateDLQAndArchive`` with
    ``DELIVERY_COUNT_EXCEEDED``, as the acknowledgement path does for RELEASE.

    Each delivery goes to a consumer that takes the record and then neither
    acknowledges nor polls again (explicit mode: closed only at the end, when the
    record is no longer its own, so the RELEASE its close sends is refused); only the
    lock's timeout ends each delivery. The next test is the one-consumer form.
    """
    lock_ms = 1000  # the test brokers' group.share.min.record.lock.duration.ms
    source = dlq_admin.create_topic(partitions=1)
    dlq = _dlq_topic(dlq_admin)
    group = _group(dlq_admin, dlq, **{"share.delivery.count.limit": "2",
                                      "share.record.lock.duration.ms": str(lock_ms)})
    dlq_admin.produce(source, [b"poison"], partition=0)
    bootstrap = dlq_cluster.bootstrap_servers
    with ShareConsumer(bootstrap_servers=bootstrap, group_id=group,
                       share_acknowledgement_mode="explicit") as first, \
            ShareConsumer(bootstrap_servers=bootstrap, group_id=group,
                          share_acknowledgement_mode="explicit") as second:
        first.subscribe([source])
        (taken,) = poll_until(first, bool)
        # The second member gets the record only once the first one's lock has run out.
        second.subscribe([source])
        (again,) = poll_until(second, bool)
        assert [(r.offset, r.delivery_count) for r in (taken, again)] == [(0, 1), (0, 2)]
        # Neither polls again: the second lock runs out at the limit.
        (letter,) = _dead_letters(bootstrap, dlq, 1)
    assert letter == DeadLetter(source, 0, 0, group, 2, DELIVERY_COUNT_EXCEEDED_MESSAGE,
                                None, None)
    assert letter.delivery_limit_exceeded
    # Archived: the group never delivers it again.
    with ShareConsumer(bootstrap_servers=bootstrap, group_id=group) as third:
        third.subscribe([source])
        assert poll_until(third, bool, timeout_s=3 * lock_ms / 1000) == []


def test_a_stuck_implicit_consumer_s_late_accepts_do_not_keep_a_record_from_the_dlq(
    dlq_cluster: LocalKafkaCluster, dlq_admin: KafkaAdmin
) -> None:
    """One implicit-mode consumer whose work outlasts the lock every time. Its next
    poll's implicit ACCEPT of the expired delivery must ride on the fetch that would
    acquire the record again (the broker applies it first, and refuses it): held
    back, as a caught-up consumer's acknowledgements used to be, it reached the
    broker after that fetch had acquired the record for the same member, and, an
    acknowledgement naming an offset and not a delivery, accepted the new delivery:
    the record ended ACKNOWLEDGED and never reached the dead-letter queue."""
    lock_ms = 1000
    source = dlq_admin.create_topic(partitions=1)
    dlq = _dlq_topic(dlq_admin)
    group = _group(dlq_admin, dlq, **{"share.delivery.count.limit": "2",
                                      "share.record.lock.duration.ms": str(lock_ms)})
    dlq_admin.produce(source, [b"slow"], partition=0)
    deliveries: list[int] = []
    with ShareConsumer(bootstrap_servers=dlq_cluster.bootstrap_servers,
                       group_id=group) as consumer:
        consumer.subscribe([source])
        deadline = time.monotonic() + 60
        while len(deliveries) < 2 and time.monotonic() < deadline:
            batch = consumer.poll(timeout=1.0)
            deliveries.extend(r.delivery_count for r in batch)
            if batch:
                time.sleep(2 * lock_ms / 1000)  # the work outlasts the lock
        assert deliveries == [1, 2]
        (letter,) = _dead_letters(dlq_cluster.bootstrap_servers, dlq, 1)
    assert (letter.topic, letter.offset, letter.delivery_count) == (source, 0, 2)
    assert letter.delivery_limit_exceeded


def test_describe_dead_letter_queue_reports_a_working_queue(
    dlq_cluster: LocalKafkaCluster, dlq_admin: KafkaAdmin
) -> None:
    dlq = _dlq_topic(dlq_admin)
    group = _group(dlq_admin, dlq)
    settings = dlq_admin.client.describe_dead_letter_queue(group)
    assert (settings.topic, settings.copy_record, settings.share_version) == (dlq, False, 2)
    assert (settings.topic_prefix, settings.auto_create_topics) == ("dlq.", False)
    assert (settings.topic_exists, settings.topic_enabled) == (True, True)
    assert settings.active and settings.problems == ()


def test_a_topic_not_enabled_as_a_dlq_is_refused_saying_what_to_set(
    dlq_admin: KafkaAdmin,
) -> None:
    dlq = _dlq_topic(dlq_admin, enabled=False)
    with pytest.raises(InvalidConfigError, match=rf"set {DLQ_ENABLE}=true on it"):
        dlq_admin.client.alter_group_configs(unique_name("g"), {DLQ_TOPIC: dlq})
    dlq_admin.client.alter_topic_configs(dlq, {DLQ_ENABLE: True})
    deadline = time.monotonic() + 10
    while True:  # the brokers apply the topic config a moment after the controller
        try:
            dlq_admin.client.alter_group_configs(unique_name("g"), {DLQ_TOPIC: dlq})
            break
        except InvalidConfigError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_name_without_the_prefix_and_a_missing_topic_are_refused(
    dlq_admin: KafkaAdmin,
) -> None:
    with pytest.raises(InvalidConfigError,
                       match=r"does not start with 'dlq.', the brokers' "
                             r"errors.deadletterqueue.topic.name.prefix"):
        dlq_admin.client.alter_group_configs(unique_name("g"), {DLQ_TOPIC: "orders-dead"})
    with pytest.raises(InvalidConfigError,
                       match=r"does not exist and the brokers' "
                             r"errors.deadletterqueue.auto.create.topics.enable is false"):
        dlq_admin.client.alter_group_configs(unique_name("g"), {DLQ_TOPIC: "dlq.missing"})


def test_a_broker_without_the_feature_is_refused_saying_what_to_change(
    kafka_cluster: Any, kafka_admin: KafkaAdmin
) -> None:
    # The shared broker is pinned at share.version=1 (and may run a release before 4.4).
    dlq = unique_name("dlq.test")
    group = unique_name("g")
    with pytest.raises(InvalidConfigError) as raised:
        kafka_admin.client.alter_group_configs(group, {DLQ_TOPIC: dlq})
    message = str(raised.value)
    assert message.startswith(f"{DLQ_TOPIC}={dlq} for group {group!r} would not work")
    assert "share.version is 1" in message
    assert "upgrade --feature share.version=2" in message
    result = CliRunner().invoke(cli, ["groups", "config", group, "--set", f"{DLQ_TOPIC}={dlq}",
                                      "--bootstrap-server", kafka_cluster.bootstrap_servers])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: ") and "share.version=2" in line
    # Nothing was set.
    assert kafka_admin.describe_group_config(group).get(DLQ_TOPIC, "") == ""


def test_the_poison_example_sends_rejected_records_to_its_dead_letter_topic(
    dlq_cluster: LocalKafkaCluster, dlq_admin: KafkaAdmin
) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    source = dlq_admin.create_topic(partitions=1)
    dlq = _dlq_topic(dlq_admin)
    group = unique_name("poison-example")
    dlq_admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
    jobs = [json.dumps({"n": n, "poison": n in (2, 5)}).encode() for n in range(8)]
    dlq_admin.produce(source, [*jobs, b"not json"], partition=0)
    example = Path(__file__).resolve().parents[2] / "examples" / "explicit_poison.py"
    proc = subprocess.run(
        [sys.executable, str(example), "--bootstrap-servers", dlq_cluster.bootstrap_servers,
         "--group", group, "--topic", source, "--max-records", "9", "--timeout", "60",
         "--max-attempts", "2", "--dead-letter-topic", dlq],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    letters = sorted(line for line in proc.stdout.splitlines()
                     if line.startswith("dead letter "))
    reason = repr(REJECTED_MESSAGE)
    assert letters == [
        f"dead letter partition=0 offset=2 delivery_count=2 reason={reason} value={jobs[2]!r}",
        f"dead letter partition=0 offset=5 delivery_count=2 reason={reason} value={jobs[5]!r}",
        f"dead letter partition=0 offset=8 delivery_count=1 reason={reason} value=b'not json'",
    ]


def test_the_poison_example_refuses_a_topic_that_is_not_a_dead_letter_queue(
    dlq_cluster: LocalKafkaCluster, dlq_admin: KafkaAdmin
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    source = dlq_admin.create_topic(partitions=1)
    dlq = _dlq_topic(dlq_admin, enabled=False)
    example = Path(__file__).resolve().parents[2] / "examples" / "explicit_poison.py"
    proc = subprocess.run(
        [sys.executable, str(example), "--bootstrap-servers", dlq_cluster.bootstrap_servers,
         "--group", unique_name("g"), "--topic", source, "--timeout", "5",
         "--dead-letter-topic", dlq],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode != 0
    assert f"set {DLQ_ENABLE}=true on it" in proc.stderr


def test_cli_consume_and_describe_show_the_dead_letter_queue(
    dlq_cluster: LocalKafkaCluster, dlq_admin: KafkaAdmin
) -> None:
    bootstrap = ["--bootstrap-server", dlq_cluster.bootstrap_servers]
    source = dlq_admin.create_topic(partitions=1)
    dlq = _dlq_topic(dlq_admin)
    group = _group(dlq_admin, dlq)
    dlq_admin.produce(source, [b"bad"], partition=0)
    rejected = CliRunner().invoke(cli, ["consume", "--topic", source, "--group", group,
                                        "--ack", "reject", "--max-messages", "1",
                                        "--timeout", "30", *bootstrap])
    assert rejected.exit_code == 0, rejected.output
    assert rejected.stdout.splitlines() == ["bad"]

    described = CliRunner().invoke(cli, ["groups", "describe", group, *bootstrap])
    assert described.exit_code == 0, described.output
    assert f"Dead-letter queue: {dlq} (copy records: no, share.version 2)" in described.stdout
    as_json = CliRunner().invoke(cli, ["groups", "describe", group, "--json", *bootstrap])
    import json

    queue = json.loads(as_json.stdout)["dead_letter_queue"]
    assert (queue["topic"], queue["topic_enabled"], queue["problems"]) == (dlq, True, [])

    shown = CliRunner().invoke(cli, ["consume", "--topic", dlq, "--group", unique_name("r"),
                                     "--from-beginning", "--max-messages", "1",
                                     "--timeout", "60", *bootstrap])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == [
        f"null  [dead letter from {source}-0@0, group {group}, delivery 1, "
        f"{REJECTED_MESSAGE}]"]
