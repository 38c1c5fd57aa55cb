"""Admin and the CLI against Kafka 4.1: no lag from the broker, no dead-letter queues."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from share_helpers import poll_until

from kafka_share import ShareConsumer, TopicPartition
from kafka_share.admin import Admin, NewTopic
from kafka_share.commands import cli
from kafka_share.commands.groups import LAG_UNAVAILABLE
from kafka_share.errors import InvalidConfigError
from kafka_share.testing import LocalKafkaCluster, unique_name

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka41() -> Iterator[LocalKafkaCluster]:
    cluster = LocalKafkaCluster(kafka_version="4.1.1")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_lag_is_unavailable_on_kafka_41(kafka41: LocalKafkaCluster) -> None:
    bootstrap = kafka41.bootstrap_servers
    topic, group = unique_name("t41"), unique_name("g41")
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=30)
        admin.alter_group_configs(group, {"share.auto.offset.reset": "earliest"}, timeout=30)
        helper = kafka41.admin()
        try:
            helper._wait_for_topic(topic, 1)
            helper._wait_for_group_config(group, {"share.auto.offset.reset": "earliest"})
            helper.produce(topic, [b"a", b"b", b"c"], partition=0)
        finally:
            helper.close()
        with ShareConsumer(bootstrap_servers=bootstrap, group_id=group) as c:
            c.subscribe([topic])
            assert len(poll_until(c, lambda s: len(s) >= 3, timeout_s=30)) == 3
            c.commit_sync(timeout=10.0)
        offsets = admin.list_share_group_offsets(group, timeout=30)
        info = offsets[TopicPartition(topic, 0)]
        assert info.lag is None
        assert info.start_offset is not None
    result = CliRunner().invoke(cli, ["groups", "offsets", group, "--bootstrap-server",
                                      bootstrap])
    assert result.exit_code == 0, result.output
    assert LAG_UNAVAILABLE in result.output


def test_dead_letter_queues_are_unsupported_on_kafka_41(kafka41: LocalKafkaCluster) -> None:
    bootstrap = kafka41.bootstrap_servers
    group = unique_name("g41-dlq")
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.alter_group_configs(group, {"share.auto.offset.reset": "earliest"}, timeout=30)
        settings = admin.describe_dead_letter_queue(group, timeout=30)
        assert not settings.supported and settings.topic is None
        with pytest.raises(InvalidConfigError, match=r"share\.version is 1.*Kafka 4\.4\+"):
            admin.alter_group_configs(
                group, {"errors.deadletterqueue.topic.name": "dlq.x"}, timeout=30)
