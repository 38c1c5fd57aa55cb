"""kafka_share.admin.Admin against a real broker: every method, and its errors.

Each test runs over PLAINTEXT and over the secured broker's SASL_SSL listener
(the ``target`` fixture, admin_targets.py). Authorization and authentication
failures are tested at the end, on the secured broker.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from admin_targets import TargetTest
from share_helpers import poll_until

from kafka_share import TopicPartition
from kafka_share.admin import Admin, ConfigSource, NewTopic, OffsetSpec
from kafka_share.errors import (
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    InvalidConfigError,
    InvalidPartitionsError,
    KafkaTimeoutError,
    NonEmptyGroupError,
    OffsetOutOfRangeError,
    SaslAuthenticationError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafka_share.testing import unique_name
from kafka_share.testing.secure import SecureKafkaCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(target: TargetTest) -> Iterator[Admin]:
    """An Admin over the target listener (PLAINTEXT, or SASL_SSL from the properties file)."""
    with target.on.admin() as a:
        yield a


def eventually(check: Any, timeout_s: float = 20.0) -> Any:
    """``check()``'s value once it is truthy; the share coordinator persists
    state a moment after acknowledgements complete."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(0.2)


def _consume_all(consumer: Any, topic: str, count: int) -> list[Any]:
    consumer.subscribe([topic])
    seen = poll_until(consumer, lambda s: len(s) >= count, timeout_s=30)
    consumer.commit_sync(timeout=10.0)
    return seen


def test_topics_create_list_describe_delete(admin: Admin) -> None:
    name = unique_name("admin-topic")
    admin.create_topics([NewTopic(name, 3, 1, {"retention.ms": "3600000"})], timeout=30)
    described = admin.describe_topics([name], timeout=30)[name]
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    assert name in admin.list_topics(timeout=30)
    assert "__consumer_offsets" not in admin.list_topics(timeout=30)
    with pytest.raises(TopicAlreadyExistsError, match=name):
        admin.create_topics([name], timeout=30)
    admin.delete_topics([name], timeout=30)
    with pytest.raises(UnknownTopicOrPartitionError, match=name):
        admin.delete_topics([name], timeout=30)
    with pytest.raises(UnknownTopicOrPartitionError, match="does not exist"):
        admin.describe_topics([unique_name("missing")], timeout=30)
    with pytest.raises(InvalidPartitionsError, match="bad"):
        admin.create_topics([NewTopic(unique_name("bad"), 0)], timeout=30)


def test_describe_cluster(admin: Admin) -> None:
    cluster = admin.describe_cluster(timeout=30)
    assert cluster.cluster_id
    assert len(cluster.nodes) >= 1
    assert all(n.port > 0 for n in cluster.nodes)


def test_list_offsets(admin: Admin, target: TargetTest) -> None:
    topic = target.topic(partitions=2)
    target.produce(topic, [b"a", b"b", b"c"], partition=1)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    latest = admin.list_offsets({tp0: OffsetSpec.latest(), tp1: OffsetSpec.latest()}, timeout=30)
    assert (latest[tp0].offset, latest[tp1].offset) == (0, 3)
    earliest = admin.list_offsets({tp1: OffsetSpec.earliest()}, timeout=30)
    assert earliest[tp1].offset == 0
    future = admin.list_offsets({tp1: OffsetSpec.for_timestamp(2**41)}, timeout=30)
    assert future[tp1].offset in (-1, 3)
    with pytest.raises(UnknownTopicOrPartitionError, match="no partition 5"):
        admin.list_offsets({TopicPartition(topic, 5): OffsetSpec.latest()}, timeout=30)


def test_read_log_and_delete_records(admin: Admin, target: TargetTest) -> None:
    from kafka_share.records import iter_batches

    topic = target.topic(partitions=1)
    target.produce(topic, [f"v{i}".encode() for i in range(100)], partition=0)
    tp = TopicPartition(topic, 0)

    def offsets_from(offset: int) -> list[int]:
        piece = admin.read_log(tp, offset, timeout=30)
        return [r[0] for b in iter_batches(piece.records, check_crcs=True) for r in b.records()]

    read = offsets_from(10)
    assert read[-1] == 99 and 10 in read  # whole batches: may start before offset 10
    assert admin.read_log(tp, 10, timeout=30).high_watermark == 100
    assert admin.delete_records({tp: 40}, timeout=30) == {tp: 40}
    assert admin.list_offsets({tp: OffsetSpec.earliest()}, timeout=30)[tp].offset == 40
    with pytest.raises(OffsetOutOfRangeError, match=f"fetch of {topic}-0 from offset 10"):
        admin.read_log(tp, 10, timeout=30)
    # The batch holding offset 40 comes whole (the log start falls inside it).
    assert offsets_from(40)[-1] == 99
    with pytest.raises(OffsetOutOfRangeError):
        admin.delete_records({tp: 500}, timeout=30)
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.read_log(TopicPartition(topic, 3), 0, timeout=30)


def test_group_lifecycle(admin: Admin, target: TargetTest) -> None:
    share_group = target.group()
    topic = target.topic(partitions=2)
    target.produce(topic, [b"x"] * 4, partition=0)
    target.produce(topic, [b"y"] * 6, partition=1)
    consumer = target.consumer(share_group, client_id="admin-test-member")
    assert len(_consume_all(consumer, topic, 10)) == 10

    listed = {g.group_id: g.state for g in admin.list_share_groups(timeout=30)}
    assert listed.get(share_group) == "Stable"

    desc = admin.describe_share_groups([share_group], timeout=30)[share_group]
    assert desc.state == "Stable"
    assert desc.coordinator.node_id >= 0
    (member,) = desc.members
    assert member.client_id == "admin-test-member"
    assert member.assignment == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    assert member.member_epoch > 0 and desc.group_epoch > 0

    # Every record is acknowledged: nothing is left to deliver. (The broker may
    # persist the start offset itself later; the lag counts acknowledged records.)
    tps = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    offsets = eventually(lambda: (
        o := admin.list_share_group_offsets(share_group, timeout=30)
    ) and set(o) == tps and all(i.lag == 0 for i in o.values()) and o)
    assert offsets, admin.list_share_group_offsets(share_group, timeout=30)
    starts = [offsets[tp].start_offset for tp in tps]
    assert all(s is not None and 0 <= s <= 6 for s in starts), starts

    # Altering, deleting offsets and deleting the group need an empty group.
    with pytest.raises(NonEmptyGroupError, match="admin-test-member"):
        admin.alter_share_group_offsets(share_group, {TopicPartition(topic, 0): 0}, timeout=30)
    with pytest.raises(NonEmptyGroupError, match="admin-test-member"):
        admin.delete_share_groups([share_group], timeout=30)
    consumer.close(timeout=10.0)

    admin.alter_share_group_offsets(share_group, {TopicPartition(topic, 0): 1}, timeout=30)
    offsets = admin.list_share_group_offsets(share_group, timeout=30)
    assert offsets[TopicPartition(topic, 0)].start_offset == 1
    assert offsets[TopicPartition(topic, 0)].lag == 3

    admin.delete_share_group_offsets(share_group, [topic], timeout=30)
    assert admin.list_share_group_offsets(share_group, timeout=30) == {}

    admin.delete_share_groups([share_group], timeout=30)
    with pytest.raises(GroupIdNotFoundError, match=share_group):
        admin.describe_share_groups([share_group], timeout=30)
    assert share_group not in {g.group_id for g in admin.list_share_groups(timeout=30)}


def test_unknown_group_errors(admin: Admin) -> None:
    missing = unique_name("no-such-group")
    with pytest.raises(GroupIdNotFoundError, match=missing):
        admin.describe_share_groups([missing], timeout=30)
    with pytest.raises(GroupIdNotFoundError, match=missing):
        admin.delete_share_groups([missing], timeout=30)
    with pytest.raises(GroupIdNotFoundError, match=missing):
        admin.list_share_group_offsets(missing, timeout=30)


def test_group_configs(admin: Admin) -> None:
    group = unique_name("cfg-group")
    admin.alter_group_configs(
        group, {"share.record.lock.duration.ms": 20000, "share.auto.offset.reset": "earliest"},
        timeout=30,
    )
    deadline = time.monotonic() + 30
    while True:
        configs = admin.describe_group_configs(group, timeout=30)
        if configs["share.record.lock.duration.ms"].value == "20000":
            break
        assert time.monotonic() < deadline, configs
        time.sleep(0.1)
    assert configs["share.record.lock.duration.ms"].source is ConfigSource.GROUP_CONFIG
    assert configs["share.auto.offset.reset"].value == "earliest"

    admin.alter_group_configs(group, {"share.record.lock.duration.ms": None}, timeout=30)
    deadline = time.monotonic() + 30
    while admin.describe_group_configs(group)["share.record.lock.duration.ms"].value == "20000":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert admin.describe_group_configs(group)["share.auto.offset.reset"].value == "earliest"

    with pytest.raises(InvalidConfigError, match=r"share\.record\.lock\.duration\.ms.*between"):
        admin.alter_group_configs(group, {"share.record.lock.duration.ms": 5}, timeout=30)
    with pytest.raises(InvalidConfigError, match=r"share\.no\.such\.key"):
        admin.alter_group_configs(group, {"share.no.such.key": "1"}, timeout=30)


def test_timeout_names_the_call_and_last_error() -> None:
    with Admin(bootstrap_servers="127.0.0.1:1", reconnect_backoff_ms=20) as a, \
            pytest.raises(KafkaTimeoutError, match="describe the cluster did not complete"):
        a.describe_cluster(timeout=0.5)


# ---------------------------------------------------------------- rights and credentials
# On the secured broker: mallory has no rights, carol may READ every group but no topic.


def test_missing_rights_name_the_operation_and_resource(
    secure_kafka: SecureKafkaCluster,
) -> None:
    group = unique_name("acl-group")
    topic = unique_name("acl-topic")
    with Admin(bootstrap_servers=secure_kafka.bootstrap_servers) as root:  # super user
        root.create_topics([topic], timeout=30)
    mallory = Admin(secure_kafka.client_config("SASL_SSL", user="mallory"))
    carol = Admin(secure_kafka.client_config("SASL_SSL", user="carol"))
    with mallory, carol:
        with pytest.raises(GroupAuthorizationFailedError,
                           match=f"describe share group '{group}' needs DESCRIBE on GROUP"):
            mallory.describe_share_groups([group], timeout=30)
        with pytest.raises(GroupAuthorizationFailedError, match=f"DELETE on GROUP '{group}'"):
            mallory.delete_share_groups([group], timeout=30)
        with pytest.raises(GroupAuthorizationFailedError, match=f"DESCRIBE on GROUP '{group}'"):
            mallory.list_share_group_offsets(group, timeout=30)
        with pytest.raises(TopicAuthorizationFailedError,
                           match=f"topic '{topic}'.*needs DESCRIBE on TOPIC '{topic}'"):
            mallory.describe_topics([topic], timeout=30)
        with pytest.raises(TopicAuthorizationFailedError, match="CREATE on the CLUSTER"):
            mallory.create_topics([unique_name("acl-topic")], timeout=30)
        # Listings leave out what the principal may not see, as in Java.
        assert topic not in mallory.list_topics(timeout=30)
        with pytest.raises(GroupAuthorizationFailedError,
                           match=f"ALTER_CONFIGS on GROUP '{group}'"):
            carol.alter_group_configs(group, {"share.delivery.count.limit": 3}, timeout=30)
        with pytest.raises(GroupAuthorizationFailedError,
                           match=f"DESCRIBE_CONFIGS on GROUP '{group}'"):
            carol.describe_group_configs(group, timeout=30)
        with pytest.raises(TopicAuthorizationFailedError, match=f"DESCRIBE on TOPIC .{topic}."):
            carol.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}, timeout=30)


def test_wrong_password_is_an_authentication_error(secure_kafka: SecureKafkaCluster) -> None:
    config = {**secure_kafka.client_config("SASL_SSL"), "sasl.password": "not-the-password"}
    started = time.monotonic()
    with Admin(config) as a, pytest.raises(SaslAuthenticationError,
                                           match=r"SCRAM-SHA-512.*invalid credentials"):
        a.describe_cluster(timeout=30)
    assert time.monotonic() - started < 10  # not retried until the deadline
