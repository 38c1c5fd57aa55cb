"""Moving a consumer group's workload to a share group, against a real broker.

A classic consumer group (confluent-kafka) consumes part of a topic and
commits; ``kafka-share groups reset-offsets --from-consumer-group --execute``
(or ``--from-file``) then makes a share group start exactly there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from share_helpers import poll_until

from kafka_share import ShareConsumer, TopicPartition
from kafka_share.admin import Admin
from kafka_share.commands import cli
from kafka_share.errors import GroupIdNotFoundError
from kafka_share.testing import unique_name
from kafka_share.testing.admin import KafkaAdmin

pytestmark = pytest.mark.integration

PER_PARTITION = 10


@pytest.fixture
def topic(kafka_admin: KafkaAdmin) -> Iterator[str]:
    """A topic with 3 partitions of PER_PARTITION records each."""
    name = kafka_admin.create_topic(None, 3)
    for partition in range(3):
        kafka_admin.produce(name, [f"p{partition}-{i}".encode() for i in range(PER_PARTITION)],
                           partition=partition)
    yield name
    kafka_admin.delete_topic(name)


def commit_as_classic_group(bootstrap: str, group: str, topic: str,
                            consumed: dict[int, int]) -> None:
    """Consume ``consumed[p]`` records of partition p with a classic consumer group, commit."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([CkTopicPartition(topic, p, 0) for p in consumed])
        left = dict(consumed)
        while any(left.values()):
            msg = consumer.poll(10.0)
            assert msg is not None, f"no record within 10 s; still to read: {left}"
            assert msg.error() is None, msg.error()
            if left[msg.partition()]:
                left[msg.partition()] -= 1
                if not left[msg.partition()]:
                    consumer.pause([CkTopicPartition(topic, msg.partition())])
        consumer.commit(offsets=[CkTopicPartition(topic, p, n) for p, n in consumed.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def share_group(kafka_admin: KafkaAdmin) -> str:
    group = unique_name("migrated")
    kafka_admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
    return group


def run(bootstrap: str, *args: str) -> Result:
    result = CliRunner().invoke(cli, [*args, "--bootstrap-server", bootstrap])
    assert "Traceback" not in result.output, result.output
    return result


def first_offsets(bootstrap: str, group: str, topic: str, expected: int) -> dict[int, list[int]]:
    """The offsets a share consumer of ``group`` gets, per partition (all acknowledged)."""
    consumer: ShareConsumer[Any, Any] = ShareConsumer(bootstrap_servers=bootstrap,
                                                      group_id=group)
    try:
        consumer.subscribe([topic])
        seen = poll_until(consumer, lambda s: len(s) >= expected, timeout_s=60)
        consumer.commit_sync(timeout=10.0)
    finally:
        consumer.close(timeout=10.0)
    out: dict[int, list[int]] = {}
    for record in seen:
        out.setdefault(record.partition, []).append(record.offset)
    return {p: sorted(offsets) for p, offsets in sorted(out.items())}


def test_share_group_starts_at_the_consumer_groups_committed_offsets(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, topic: str
) -> None:
    consumer_group = unique_name("classic")
    commit_as_classic_group(kafka_bootstrap, consumer_group, topic, {0: 4, 1: 7})
    with Admin(bootstrap_servers=kafka_bootstrap) as admin:
        assert admin.list_consumer_group_offsets(consumer_group, [topic]) == {
            TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 7,
        }
    group = share_group(kafka_admin)

    dry = run(kafka_bootstrap, "groups", "reset-offsets", group, "--topic", topic,
              "--from-consumer-group", consumer_group)
    assert dry.exit_code == 0, dry.output
    assert "Dry run: nothing was changed" in dry.output
    assert (f"Left unchanged (consumer group {consumer_group!r} has no committed offset "
            f"for them): {topic}-2") in dry.output

    done = run(kafka_bootstrap, "groups", "reset-offsets", group, "--topic", topic,
               "--from-consumer-group", consumer_group, "--execute", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["partitions"] == [
        {"topic": topic, "partition": 0, "new_start_offset": 4},
        {"topic": topic, "partition": 1, "new_start_offset": 7},
    ]
    # Partition 2 was left to share.auto.offset.reset (earliest).
    assert first_offsets(kafka_bootstrap, group, topic, 6 + 3 + PER_PARTITION) == {
        0: list(range(4, PER_PARTITION)),
        1: list(range(7, PER_PARTITION)),
        2: list(range(PER_PARTITION)),
    }


def test_share_group_starts_at_the_offsets_of_a_file(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, topic: str, tmp_path: Path
) -> None:
    group = share_group(kafka_admin)
    path = tmp_path / "offsets.csv"
    path.write_text(f"{topic},0,2\n{topic},1,9\n{topic},2,{PER_PARTITION + 50}\n")
    done = run(kafka_bootstrap, "groups", "reset-offsets", group, "--from-file", str(path),
               "--execute")
    assert done.exit_code == 0, done.output
    assert f"{topic}-2: offset {PER_PARTITION + 50} is outside the log; moved to " \
           f"{PER_PARTITION}" in done.output
    assert first_offsets(kafka_bootstrap, group, topic, 8 + 1) == {
        0: list(range(2, PER_PARTITION)), 1: [9],
    }

    bad = tmp_path / "bad.csv"
    bad.write_text(f"{topic},0,2\n{topic},7,1\n")
    refused = run(kafka_bootstrap, "groups", "reset-offsets", group, "--from-file", str(bad))
    assert refused.exit_code == 1
    assert f"{bad}:2: topic {topic!r} has no partition 7 (it has 3: 0-2)" in refused.output


def test_a_share_group_with_members_is_refused(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, topic: str
) -> None:
    consumer_group = unique_name("classic")
    commit_as_classic_group(kafka_bootstrap, consumer_group, topic, {0: 3})
    group = share_group(kafka_admin)
    member: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group, client_id="still-running")
    try:
        member.subscribe([topic])
        poll_until(member, lambda s: len(s) > 0, timeout_s=30)
        refused = run(kafka_bootstrap, "groups", "reset-offsets", group, "--topic", topic,
                      "--from-consumer-group", consumer_group, "--execute")
    finally:
        member.close(timeout=10.0)
    assert refused.exit_code == 1
    (line,) = refused.output.strip().splitlines()
    assert line.startswith("Error: NON_EMPTY_GROUP") and "still-running" in line


def test_unknown_and_share_groups_are_not_consumer_groups(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, topic: str
) -> None:
    group = share_group(kafka_admin)
    member: ShareConsumer[Any, Any] = ShareConsumer(bootstrap_servers=kafka_bootstrap,
                                                    group_id=group)
    try:
        member.subscribe([topic])
        poll_until(member, lambda s: len(s) > 0, timeout_s=30)
    finally:
        member.close(timeout=10.0)
    with Admin(bootstrap_servers=kafka_bootstrap) as admin:
        with pytest.raises(GroupIdNotFoundError, match=r"consumer group 'no-such-\S+' does not"):
            admin.list_consumer_group_offsets(unique_name("no-such"))
        with pytest.raises(GroupIdNotFoundError, match="is a share group, not a consumer group"):
            admin.list_consumer_group_offsets(group)
