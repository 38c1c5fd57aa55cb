"""Dead-letter queue configs (Kafka 4.4, KIP-1191): the checks made before a request.

The rules are Kafka 4.4's (GroupConfig, GroupCoordinatorConfig, LogConfig,
ShareGroupDLQStateManager.validateDlqTopic, ShareVersion): see
``kafka_share/admin/dead_letter.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from kafka_share.admin import Admin, ConfigEntry, ConfigSource, DeadLetterQueueSettings
from kafka_share.admin.dead_letter import (
    check_dlq_values,
    dlq_problems,
    dlq_settings,
    parse_boolean,
    wanted_dlq_topic,
)
from kafka_share.commands import cli
from kafka_share.errors import InvalidConfigError

TOPIC = "errors.deadletterqueue.topic.name"
COPY = "errors.deadletterqueue.copy.record.enable"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("__dlq", "must not start with '__'"),
        ("dlq orders", "is not a legal topic name"),
        ("dlq/orders", "is not a legal topic name"),
        ("dlq.ördérs", "is not a legal topic name"),
        (".", "is not a legal topic name"),
        ("..", "is not a legal topic name"),
        ("d" * 250, "at most 249 characters, got 250"),
        (7, "a topic name is a str, got 7"),
    ],
)
def test_a_bad_topic_name_is_refused_naming_the_key(value: object, problem: str) -> None:
    with pytest.raises(InvalidConfigError, match=rf"^{TOPIC}: .*{problem}"):
        check_dlq_values({TOPIC: value})


@pytest.mark.parametrize("value", ["dlq.orders", "d" * 249, "dlq_orders-1", "", None])
def test_good_topic_names_and_clearing_pass(value: str | None) -> None:
    check_dlq_values({TOPIC: value})


@pytest.mark.parametrize("value", [True, False, "true", "FALSE", " True ", None])
def test_copy_record_takes_what_java_parses_as_a_boolean(value: object) -> None:
    check_dlq_values({COPY: value})


@pytest.mark.parametrize("value", ["yes", "1", 1, "", 0.0])
def test_copy_record_refuses_anything_else(value: object) -> None:
    with pytest.raises(InvalidConfigError, match=rf"^{COPY}: expected true or false, got"):
        check_dlq_values({COPY: value})


def test_parse_boolean() -> None:
    assert [parse_boolean(v) for v in ("true", " FALSE", True, "no", None)] == [
        True, False, True, None, None]


def test_wanted_topic() -> None:
    assert wanted_dlq_topic({TOPIC: "dlq.x"}) == "dlq.x"
    assert wanted_dlq_topic({TOPIC: ""}) is None
    assert wanted_dlq_topic({TOPIC: None}) is None
    assert wanted_dlq_topic({COPY: True}) is None


def _entries(**values: str) -> dict[str, ConfigEntry]:
    return {k.replace("_", "."): ConfigEntry(k.replace("_", "."), v, ConfigSource.GROUP_CONFIG)
            for k, v in values.items()}


def _settings(
    topic: str | None = "dlq.orders",
    *,
    share_version: int | None = 2,
    prefix: str | None = "dlq.",
    auto_create: bool | None = False,
    exists: bool | None = True,
    enabled: bool | None = True,
) -> DeadLetterQueueSettings:
    return DeadLetterQueueSettings("g", topic, False, share_version, prefix, auto_create,
                                   exists, enabled)


def test_a_working_dead_letter_queue_has_no_problems() -> None:
    assert dlq_problems(_settings()) == []
    assert dlq_problems(_settings(exists=False, enabled=None, auto_create=True)) == []
    assert dlq_problems(_settings("orders-dlq", prefix="")) == []


def test_no_topic_means_no_problems() -> None:
    assert dlq_problems(_settings(None, share_version=1, exists=None)) == []


def test_a_cluster_without_the_feature_says_how_to_upgrade() -> None:
    (problem,) = dlq_problems(_settings(share_version=1))
    assert "share.version is 1" in problem
    assert "upgrade --feature share.version=2" in problem


def test_a_name_without_the_prefix_names_the_broker_config() -> None:
    (problem,) = dlq_problems(_settings("orders-dlq", prefix="dlq."))
    assert "'orders-dlq' does not start with 'dlq.'" in problem
    assert "errors.deadletterqueue.topic.name.prefix" in problem


def test_a_topic_not_enabled_names_the_topic_config() -> None:
    (problem,) = dlq_problems(_settings(enabled=False))
    assert "not enabled as a dead-letter queue" in problem
    assert "errors.deadletterqueue.group.enable=true" in problem


def test_a_missing_topic_without_auto_create_says_both_ways_out() -> None:
    (problem,) = dlq_problems(_settings(exists=False, enabled=None))
    assert "does not exist" in problem
    assert "errors.deadletterqueue.auto.create.topics.enable=true" in problem
    assert "errors.deadletterqueue.group.enable=true" in problem


def test_unknown_facts_are_not_problems() -> None:
    assert dlq_problems(_settings(share_version=None, prefix=None, auto_create=None,
                                  exists=None, enabled=None)) == []


def test_every_problem_is_listed() -> None:
    assert len(dlq_problems(_settings("x", share_version=1, enabled=False))) == 3


def test_settings_from_config_entries() -> None:
    group = _entries(**{"errors_deadletterqueue_topic_name": "dlq.orders",
                        "errors_deadletterqueue_copy_record_enable": "true"})
    broker = _entries(**{"errors_deadletterqueue_topic_name_prefix": "dlq.",
                         "errors_deadletterqueue_auto_create_topics_enable": "false"})
    topic = _entries(**{"errors_deadletterqueue_group_enable": "false"})
    settings = dlq_settings("g", group, broker, 2, topic, True)
    assert settings == DeadLetterQueueSettings(
        "g", "dlq.orders", True, 2, "dlq.", False, True, False, settings.problems)
    assert len(settings.problems) == 1 and not settings.active


def test_settings_without_a_topic() -> None:
    settings = dlq_settings("g", _entries(errors_deadletterqueue_topic_name=""), None, None,
                            None, None)
    assert settings.topic is None and not settings.copy_record and not settings.active
    assert settings.problems == ()


def test_brokers_without_the_configs_do_not_support_it() -> None:
    from kafka_share.commands.groups import dead_letter_lines

    settings = dlq_settings("g", _entries(share_record_lock_duration_ms="15000"), None, 1,
                            None, None)
    assert not settings.supported and settings.topic is None
    (line,) = dead_letter_lines(settings)
    assert line.startswith("Dead-letter queue: not supported (the brokers have no "
                           f"{TOPIC}; Kafka 4.4+")
    assert dlq_settings("g", _entries(errors_deadletterqueue_topic_name=""), None, 2, None,
                        None).supported


def test_a_topic_without_the_enable_entry_is_not_enabled() -> None:
    settings = dlq_settings("g", _entries(errors_deadletterqueue_topic_name="dlq.x"),
                            None, 2, {}, True)
    assert settings.topic_enabled is False


def test_admin_refuses_a_bad_value_before_connecting() -> None:
    # 127.0.0.1:1 refuses connections: a request would time out, not raise this.
    with Admin(bootstrap_servers="127.0.0.1:1", default_api_timeout_ms=1000) as admin, \
            pytest.raises(InvalidConfigError, match=rf"^{TOPIC}: '__x'"):
        admin.alter_group_configs("g", {TOPIC: "__x"})


def test_cli_config_set_of_a_bad_value_is_one_line() -> None:
    result = CliRunner().invoke(cli, ["groups", "config", "g", "--set", f"{COPY}=yes",
                                      "--bootstrap-server", "127.0.0.1:1", "--timeout", "1"])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line == f"Error: {COPY}: expected true or false, got 'yes'"


def _consumed(headers: list[tuple[str, bytes | None]], value: bytes | None = None) -> Any:
    from kafka_share.models import ConsumerRecord, TimestampType

    return ConsumerRecord("dlq.orders", 0, 7, 0, TimestampType.CREATE_TIME, None, value,
                          tuple(headers), None, 1)


_PROVENANCE: list[tuple[str, bytes | None]] = [
    ("__dlq.errors.topic", b"orders"), ("__dlq.errors.partition", b"2"),
    ("__dlq.errors.offset", b"41"), ("__dlq.errors.group", b"billing"),
    ("__dlq.errors.delivery.count", b"1"),
    ("__dlq.errors.message", b"Offset rejected by client."),
]


def test_consume_shows_a_dead_letters_provenance_after_its_value() -> None:
    from kafka_share.commands.consume import render

    assert render(_consumed(_PROVENANCE, b"v"), None) == (
        "v  [dead letter from orders-2@41, group billing, delivery 1, "
        "Offset rejected by client.]")
    assert render(_consumed([], b"v"), None) == "v"
    assert render(_consumed(_PROVENANCE), "{offset} {dead_letter}") == (
        "7 [dead letter from orders-2@41, group billing, delivery 1, "
        "Offset rejected by client.]")
    assert render(_consumed([]), "{offset}:{dead_letter}") == "7:"


def test_consume_shows_a_dead_letter_with_broken_headers_without_failing() -> None:
    from kafka_share.commands.consume import render

    broken = [(k, b"x" if k == "__dlq.errors.offset" else v) for k, v in _PROVENANCE]
    assert render(_consumed(broken), None).startswith(
        "null  [dead letter, unreadable: dead-letter record dlq.orders-0@7: header "
        "'__dlq.errors.offset' is not a decimal number")


def test_describe_lines_for_a_dead_letter_queue() -> None:
    from kafka_share.commands.groups import dead_letter_lines

    assert dead_letter_lines(None) == [
        "Dead-letter queue: unknown (not authorized to describe the group's configs)"]
    (none,) = dead_letter_lines(DeadLetterQueueSettings("g", None, False))
    assert none.startswith(f"Dead-letter queue: none ({TOPIC} is not set")
    working = DeadLetterQueueSettings("g", "dlq.orders", True, 2, "dlq.", False, True, True)
    assert dead_letter_lines(working) == [
        "Dead-letter queue: dlq.orders (copy records: yes, share.version 2)"]
    broken = DeadLetterQueueSettings("g", "dlq.orders", False, 1, problems=("p1", "p2"))
    assert dead_letter_lines(broken) == [
        "Dead-letter queue: dlq.orders (copy records: no, share.version 1)",
        "  not written: p1", "  not written: p2"]
