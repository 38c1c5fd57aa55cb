"""The kafka-share command against a real broker (click's CliRunner, in process)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result
from share_helpers import poll_until

from kafka_share.commands import cli

pytestmark = pytest.mark.integration


def run(bootstrap: str, *args: str) -> Result:
    result = CliRunner().invoke(cli, [*args, "--bootstrap-server", bootstrap])
    assert "Traceback" not in result.output, result.output
    return result


def ok(bootstrap: str, *args: str) -> str:
    result = run(bootstrap, *args)
    assert result.exit_code == 0, result.output
    return result.output


def test_groups_commands_and_reset_to_earliest(
    kafka_bootstrap: str, topic_factory: Any, share_group: str, kafka_produce: Any,
    consumer_factory: Any,
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"m{i}".encode() for i in range(5)], partition=0)
    consumer = consumer_factory(share_group, client_id="cli-test-member")
    consumer.subscribe([topic])
    assert len(poll_until(consumer, lambda s: len(s) >= 5, timeout_s=30)) == 5
    consumer.commit_sync(timeout=10.0)

    listed = json.loads(ok(kafka_bootstrap, "groups", "list", "--json"))
    assert {"group_id": share_group, "state": "Stable"} in listed
    assert share_group in ok(kafka_bootstrap, "groups", "list")

    described = json.loads(ok(kafka_bootstrap, "groups", "describe", share_group, "--json"))
    (member,) = described["members"]
    assert member["client_id"] == "cli-test-member"
    assert member["assignment"] == [{"topic": topic, "partition": 0}]
    text = ok(kafka_bootstrap, "groups", "describe", share_group)
    assert "cli-test-member" in text and f"{topic}:0" in text and "Stable" in text

    # A group with members cannot be reset; the error names the member, in one line.
    refused = run(kafka_bootstrap, "groups", "reset-offsets", share_group, "--topic", topic,
                  "--to-earliest", "--execute")
    assert refused.exit_code == 1
    (line,) = refused.output.strip().splitlines()
    assert line.startswith("Error: NON_EMPTY_GROUP") and "cli-test-member" in line
    consumer.close(timeout=10.0)

    dry = ok(kafka_bootstrap, "groups", "reset-offsets", share_group, "--topic", topic,
             "--to-earliest")
    assert "Dry run" in dry
    plan = json.loads(ok(kafka_bootstrap, "groups", "reset-offsets", share_group, "--topic",
                         topic, "--to-earliest", "--json"))
    assert plan["executed"] is False
    assert plan["partitions"] == [{"topic": topic, "partition": 0, "new_start_offset": 0}]

    done = ok(kafka_bootstrap, "groups", "reset-offsets", share_group, "--topic", topic,
              "--to-earliest", "--execute")
    assert "Reset the start offsets" in done
    offsets = json.loads(ok(kafka_bootstrap, "groups", "offsets", share_group, "--json"))
    assert offsets["partitions"][0]["start_offset"] == 0
    assert offsets["total_lag"] == 5
    assert "TOTAL" in ok(kafka_bootstrap, "groups", "offsets", share_group)

    # Acceptance: a new consumer receives the topic again from offset 0.
    again = consumer_factory(share_group)
    again.subscribe([topic])
    records = poll_until(again, lambda s: len(s) >= 5, timeout_s=30)
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]
    again.close(timeout=10.0)

    assert "Reset" in ok(kafka_bootstrap, "groups", "reset-offsets", share_group, "--topic",
                         f"{topic}:0", "--to-offset", "3", "--execute")
    offsets = json.loads(ok(kafka_bootstrap, "groups", "offsets", share_group, "--json"))
    assert offsets["partitions"][0]["start_offset"] == 3
    ok(kafka_bootstrap, "groups", "reset-offsets", share_group, "--topic", topic,
       "--to-latest", "--execute")
    assert json.loads(ok(kafka_bootstrap, "groups", "offsets", share_group, "--json"))[
        "partitions"][0]["start_offset"] == 5
    ok(kafka_bootstrap, "groups", "reset-offsets", share_group, "--topic", topic,
       "--to-datetime", "2000-01-01T00:00:00+00:00", "--execute")
    assert json.loads(ok(kafka_bootstrap, "groups", "offsets", share_group, "--json"))[
        "partitions"][0]["start_offset"] == 0

    assert "Deleted the offsets" in ok(kafka_bootstrap, "groups", "delete-offsets", share_group,
                                       "--topic", topic)
    assert "has no offsets yet" in ok(kafka_bootstrap, "groups", "offsets", share_group)
    assert "Deleted share group" in ok(kafka_bootstrap, "groups", "delete", share_group)
    missing = run(kafka_bootstrap, "groups", "describe", share_group)
    assert missing.exit_code == 1
    assert "GROUP_ID_NOT_FOUND" in missing.output and share_group in missing.output


def test_groups_config(kafka_bootstrap: str, share_group: str) -> None:
    shown = json.loads(ok(kafka_bootstrap, "groups", "config", share_group, "--json"))
    assert shown["share.auto.offset.reset"] == {"value": "earliest", "source": "GROUP_CONFIG"}
    assert "share.record.lock.duration.ms" in ok(kafka_bootstrap, "groups", "config",
                                                 share_group)
    changed = ok(kafka_bootstrap, "groups", "config", share_group, "--set",
                 "share.delivery.count.limit=3", "--delete", "share.auto.offset.reset")
    assert "share.delivery.count.limit=3" in changed
    bad = run(kafka_bootstrap, "groups", "config", share_group, "--set",
              "share.record.lock.duration.ms=5")
    assert bad.exit_code == 1
    (line,) = bad.output.strip().splitlines()
    assert "INVALID_CONFIG" in line and "share.record.lock.duration.ms must be between" in line


def test_errors_for_missing_things(kafka_bootstrap: str) -> None:
    result = run(kafka_bootstrap, "groups", "offsets", "no-such-group-xyz")
    assert result.exit_code == 1 and "GROUP_ID_NOT_FOUND" in result.output
    result = run(kafka_bootstrap, "groups", "reset-offsets", "g", "--topic", "no-such-topic-xyz",
                 "--to-earliest")
    assert result.exit_code == 1
    assert "topic 'no-such-topic-xyz' does not exist" in result.output


def test_consume_from_beginning_and_top(
    kafka_bootstrap: str, topic_factory: Any, kafka_produce: Any
) -> None:
    from kafka_share.testing import unique_name

    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"hello", b"world"], partition=0, key=b"k")
    group = unique_name("cli-consume")
    result = CliRunner().invoke(cli, [
        "consume", "--topic", topic, "--group", group, "--from-beginning",
        "--max-messages", "2", "--timeout", "20",
        "--format", "{partition}:{offset}:{key}:{value}:{delivery_count}",
        "--bootstrap-server", kafka_bootstrap,
    ])
    assert result.exit_code == 0, result.output
    assert "0:0:k:hello:1" in result.stdout and "0:1:k:world:1" in result.stdout
    assert "set share.auto.offset.reset=earliest" in result.stderr
    assert "Processed a total of 2 messages" in result.stderr

    frame = ok(kafka_bootstrap, "top", group, "--iterations", "1")
    assert f"share group {group}" in frame and topic in frame and "START-OFFSET" in frame

    again = CliRunner().invoke(cli, [
        "consume", "--topic", topic, "--group", group, "--from-beginning", "--timeout", "2",
        "--bootstrap-server", kafka_bootstrap,
    ])
    assert again.exit_code == 0, again.output
    assert "--from-beginning ignored" in again.stderr
    assert "Processed a total of 0 messages" in again.stderr
