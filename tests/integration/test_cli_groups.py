"""The kafka-share command against a real broker (click's CliRunner, in process).

Each test runs over PLAINTEXT and over the secured broker's SASL_SSL listener,
the security settings given as Kafka's tools take them: ``--command-config
client.properties`` (the ``target`` fixture, admin_targets.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from admin_targets import TargetTest, secured_properties
from click.testing import CliRunner, Result
from share_helpers import poll_until

from kafka_share.commands import cli
from kafka_share.testing import unique_name
from kafka_share.testing.secure import SecureKafkaCluster

pytestmark = pytest.mark.integration


def run(target: TargetTest, *args: str) -> Result:
    """``kafka-share ARGS`` with the target's ``--bootstrap-server`` (and ``--command-config``)."""
    result = CliRunner().invoke(cli, [*args, *target.on.cli_args()])
    assert "Traceback" not in result.output, result.output
    return result


def ok(target: TargetTest, *args: str) -> str:
    result = run(target, *args)
    assert result.exit_code == 0, result.output
    return result.output


def test_groups_commands_and_reset_to_earliest(target: TargetTest) -> None:
    share_group = target.group()
    topic = target.topic(partitions=1)
    target.produce(topic, [f"m{i}".encode() for i in range(5)], partition=0)
    consumer = target.consumer(share_group, client_id="cli-test-member")
    consumer.subscribe([topic])
    assert len(poll_until(consumer, lambda s: len(s) >= 5, timeout_s=30)) == 5
    consumer.commit_sync(timeout=10.0)

    listed = json.loads(ok(target, "groups", "list", "--json"))
    assert {"group_id": share_group, "state": "Stable"} in listed
    assert share_group in ok(target, "groups", "list")

    described = json.loads(ok(target, "groups", "describe", share_group, "--json"))
    (member,) = described["members"]
    assert member["client_id"] == "cli-test-member"
    assert member["assignment"] == [{"topic": topic, "partition": 0}]
    text = ok(target, "groups", "describe", share_group)
    assert "cli-test-member" in text and f"{topic}:0" in text and "Stable" in text

    # A group with members cannot be reset; the error names the member, in one line.
    refused = run(target, "groups", "reset-offsets", share_group, "--topic", topic,
                  "--to-earliest", "--execute")
    assert refused.exit_code == 1
    (line,) = refused.output.strip().splitlines()
    assert line.startswith("Error: NON_EMPTY_GROUP") and "cli-test-member" in line
    consumer.close(timeout=10.0)

    dry = ok(target, "groups", "reset-offsets", share_group, "--topic", topic,
             "--to-earliest")
    assert "Dry run" in dry
    plan = json.loads(ok(target, "groups", "reset-offsets", share_group, "--topic",
                         topic, "--to-earliest", "--json"))
    assert plan["executed"] is False
    assert plan["partitions"] == [{"topic": topic, "partition": 0, "new_start_offset": 0}]

    done = ok(target, "groups", "reset-offsets", share_group, "--topic", topic,
              "--to-earliest", "--execute")
    assert "Reset the start offsets" in done
    offsets = json.loads(ok(target, "groups", "offsets", share_group, "--json"))
    assert offsets["partitions"][0]["start_offset"] == 0
    assert offsets["total_lag"] == 5
    assert "TOTAL" in ok(target, "groups", "offsets", share_group)

    # Acceptance: a new consumer receives the topic again from offset 0.
    again = target.consumer(share_group)
    again.subscribe([topic])
    records = poll_until(again, lambda s: len(s) >= 5, timeout_s=30)
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]
    again.close(timeout=10.0)

    assert "Reset" in ok(target, "groups", "reset-offsets", share_group, "--topic",
                         f"{topic}:0", "--to-offset", "3", "--execute")
    offsets = json.loads(ok(target, "groups", "offsets", share_group, "--json"))
    assert offsets["partitions"][0]["start_offset"] == 3
    ok(target, "groups", "reset-offsets", share_group, "--topic", topic,
       "--to-latest", "--execute")
    assert json.loads(ok(target, "groups", "offsets", share_group, "--json"))[
        "partitions"][0]["start_offset"] == 5
    ok(target, "groups", "reset-offsets", share_group, "--topic", topic,
       "--to-datetime", "2000-01-01T00:00:00+00:00", "--execute")
    assert json.loads(ok(target, "groups", "offsets", share_group, "--json"))[
        "partitions"][0]["start_offset"] == 0

    assert "Deleted the offsets" in ok(target, "groups", "delete-offsets", share_group,
                                       "--topic", topic)
    assert "has no offsets yet" in ok(target, "groups", "offsets", share_group)
    assert "Deleted share group" in ok(target, "groups", "delete", share_group)
    missing = run(target, "groups", "describe", share_group)
    assert missing.exit_code == 1
    assert "GROUP_ID_NOT_FOUND" in missing.output and share_group in missing.output


def test_groups_config(target: TargetTest) -> None:
    share_group = target.group()
    shown = json.loads(ok(target, "groups", "config", share_group, "--json"))
    assert shown["share.auto.offset.reset"] == {"value": "earliest", "source": "GROUP_CONFIG"}
    assert "share.record.lock.duration.ms" in ok(target, "groups", "config",
                                                 share_group)
    changed = ok(target, "groups", "config", share_group, "--set",
                 "share.delivery.count.limit=3", "--delete", "share.auto.offset.reset")
    assert "share.delivery.count.limit=3" in changed
    bad = run(target, "groups", "config", share_group, "--set",
              "share.record.lock.duration.ms=5")
    assert bad.exit_code == 1
    (line,) = bad.output.strip().splitlines()
    assert "INVALID_CONFIG" in line and "share.record.lock.duration.ms must be between" in line


def test_errors_for_missing_things(target: TargetTest) -> None:
    result = run(target, "groups", "offsets", "no-such-group-xyz")
    assert result.exit_code == 1 and "GROUP_ID_NOT_FOUND" in result.output
    result = run(target, "groups", "reset-offsets", "g", "--topic", "no-such-topic-xyz",
                 "--to-earliest")
    assert result.exit_code == 1
    assert "topic 'no-such-topic-xyz' does not exist" in result.output
    # A console consumer of a missing topic says so instead of waiting for records.
    result = run(target, "consume", "--topic", "no-such-topic-xyz", "--group", "g",
                 "--timeout", "30")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: UNKNOWN_TOPIC_OR_PARTITION (error code 3): topic 'no-such-topic-xyz' does "
        "not exist"]
    # A bad group config value: one line naming the key and the allowed range.
    result = run(target, "groups", "config", "g", "--set", "share.delivery.count.limit=0")
    (line,) = result.output.strip().splitlines()
    assert result.exit_code == 1 and "share.delivery.count.limit must be between" in line


def test_consume_from_beginning_and_top(target: TargetTest) -> None:
    topic = target.topic(partitions=1)
    target.produce(topic, [b"hello", b"world"], partition=0, key=b"k")
    group = unique_name("cli-consume")
    result = CliRunner().invoke(cli, [
        "consume", "--topic", topic, "--group", group, "--from-beginning",
        "--max-messages", "2", "--timeout", "20",
        "--format", "{partition}:{offset}:{key}:{value}:{delivery_count}",
        *target.on.cli_args(),
    ])
    assert result.exit_code == 0, result.output
    assert "0:0:k:hello:1" in result.stdout and "0:1:k:world:1" in result.stdout
    assert "set share.auto.offset.reset=earliest" in result.stderr
    assert "Processed a total of 2 messages" in result.stderr

    frame = ok(target, "top", group, "--iterations", "1")
    assert f"share group {group}" in frame and topic in frame and "START-OFFSET" in frame

    again = CliRunner().invoke(cli, [
        "consume", "--topic", topic, "--group", group, "--from-beginning", "--timeout", "2",
        *target.on.cli_args(),
    ])
    assert again.exit_code == 0, again.output
    assert "--from-beginning ignored" in again.stderr
    assert "Processed a total of 0 messages" in again.stderr


def one_error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: "), line
    return line


def test_rights_and_credentials_errors_are_one_line(
    secure_kafka: SecureKafkaCluster, tmp_path: Path
) -> None:
    # bootstrap.servers comes from the file here: no --bootstrap-server at all.
    wrong = secured_properties(secure_kafka, tmp_path / "wrong.properties",
                               password="not-the-password")
    line = one_error_line(CliRunner().invoke(
        cli, ["groups", "list", "--command-config", str(wrong)]))
    assert "SCRAM-SHA-512 authentication to broker" in line and "invalid credentials" in line
    assert "not-the-password" not in line

    group = unique_name("cli-acl")
    mallory = secured_properties(secure_kafka, tmp_path / "mallory.properties", user="mallory")
    line = one_error_line(CliRunner().invoke(
        cli, ["groups", "describe", group, "--command-config", str(mallory)]))
    assert "GROUP_AUTHORIZATION_FAILED" in line and f"DESCRIBE on GROUP '{group}'" in line
    carol = secured_properties(secure_kafka, tmp_path / "carol.properties", user="carol")
    line = one_error_line(CliRunner().invoke(
        cli, ["groups", "config", group, "--set", "share.delivery.count.limit=3",
              "--command-config", str(carol)]))
    assert "GROUP_AUTHORIZATION_FAILED" in line and f"ALTER_CONFIGS on GROUP '{group}'" in line
