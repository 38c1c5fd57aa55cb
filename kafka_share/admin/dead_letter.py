"""Dead-letter queue configs of share groups (KIP-1191, Kafka 4.4): pure checks.

Kafka 4.4's rules, from its jars:

- ``errors.deadletterqueue.topic.name`` (group config, STRING, default ``""``: no
  DLQ). The broker's ``GroupConfig.validate`` refuses only a name starting with
  ``__``. Everything else is checked when the broker first writes a dead letter
  (``ShareGroupDLQStateManager.ProduceRequestHandler.validateDlqTopic``): the name
  must start with the brokers' ``errors.deadletterqueue.topic.name.prefix``
  (default ``dlq.``; ``""`` allows any name); an existing topic must have
  ``errors.deadletterqueue.group.enable=true``; a missing one is created (with
  that config) only under ``errors.deadletterqueue.auto.create.topics.enable``
  (default false). A write that fails these is logged on the broker and the
  record is archived anyway, so here they are checked when the config is set.
- ``errors.deadletterqueue.copy.record.enable`` (group config, BOOLEAN, default false).
- The broker writes dead letters only while the cluster's ``share.version``
  feature is at least 2 (``ShareVersion.supportsShareGroupDLQ``); below it the
  broker accepts the configs and archives the records without a word.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from kafka_share.admin.types import ConfigEntry, DeadLetterQueueSettings
from kafka_share.errors import InvalidConfigError

__all__ = [
    "BROKER_AUTO_CREATE",
    "BROKER_TOPIC_PREFIX",
    "DEFAULT_TOPIC_PREFIX",
    "GROUP_COPY_RECORD",
    "GROUP_TOPIC_NAME",
    "SHARE_VERSION_FOR_DLQ",
    "TOPIC_ENABLE",
    "check_dlq_values",
    "dlq_keys",
    "dlq_problems",
    "dlq_settings",
    "parse_boolean",
    "wanted_dlq_topic",
]

#: The group config naming the group's dead-letter topic.
GROUP_TOPIC_NAME = "errors.deadletterqueue.topic.name"
#: The group config that copies the source record's key and value into the dead letter.
GROUP_COPY_RECORD = "errors.deadletterqueue.copy.record.enable"
#: The topic config that lets share groups write dead letters to the topic.
TOPIC_ENABLE = "errors.deadletterqueue.group.enable"
#: The broker config every dead-letter topic name must start with.
BROKER_TOPIC_PREFIX = "errors.deadletterqueue.topic.name.prefix"
#: The broker config that creates a missing dead-letter topic.
BROKER_AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"
#: The default of :data:`BROKER_TOPIC_PREFIX`.
DEFAULT_TOPIC_PREFIX = "dlq."
#: The ``share.version`` feature level from which brokers write dead letters.
SHARE_VERSION_FOR_DLQ = 2

# Kafka's Topic.validate: at most 249 characters of ASCII letters, digits, '.', '_', '-'.
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_LENGTH = 249

_UPGRADE = (
    "kafka-features.sh --bootstrap-server HOST:PORT upgrade --feature "
    f"share.version={SHARE_VERSION_FOR_DLQ}"
)


def dlq_keys(changes: Mapping[str, object | None]) -> bool:
    """Whether ``changes`` touch a dead-letter config."""
    return GROUP_TOPIC_NAME in changes or GROUP_COPY_RECORD in changes


def parse_boolean(value: object) -> bool | None:
    """A boolean config value as Java's ``ConfigDef`` reads it (trimmed, any case), or None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
    return None


def _topic_name_problem(name: str) -> str | None:
    if name in (".", ".."):
        return f"{name!r} is not a legal topic name"
    if len(name) > _MAX_TOPIC_LENGTH:
        return f"a topic name has at most {_MAX_TOPIC_LENGTH} characters, got {len(name)}"
    if _LEGAL_TOPIC.fullmatch(name) is None:
        return (f"{name!r} is not a legal topic name (ASCII letters, digits, '.', '_' "
                "and '-' only)")
    if name.startswith("__"):
        return f"{name!r}: a dead-letter topic name must not start with '__'"
    return None


def check_dlq_values(changes: Mapping[str, object | None]) -> None:
    """Check the dead-letter configs among ``changes`` on their own, before any request.

    Raises:
        InvalidConfigError: naming the key and what is wrong with its value.
    """
    if GROUP_TOPIC_NAME in changes:
        name = changes[GROUP_TOPIC_NAME]
        if name is not None and not isinstance(name, str):
            raise InvalidConfigError(f"{GROUP_TOPIC_NAME}: a topic name is a str, got {name!r}")
        problem = _topic_name_problem(name) if name else None
        if problem:
            raise InvalidConfigError(f"{GROUP_TOPIC_NAME}: {problem}")
    if GROUP_COPY_RECORD in changes:
        value = changes[GROUP_COPY_RECORD]
        if value is not None and parse_boolean(value) is None:
            raise InvalidConfigError(f"{GROUP_COPY_RECORD}: expected true or false, got {value!r}")


def wanted_dlq_topic(changes: Mapping[str, object | None]) -> str | None:
    """The dead-letter topic ``changes`` set (None when they set none, or clear it)."""
    name = changes.get(GROUP_TOPIC_NAME)
    return name if isinstance(name, str) and name else None


def dlq_settings(
    group_id: str,
    group: Mapping[str, ConfigEntry],
    broker: Mapping[str, ConfigEntry] | None,
    share_version: int | None,
    topic: Mapping[str, ConfigEntry] | None,
    topic_exists: bool | None,
) -> DeadLetterQueueSettings:
    """Put what the cluster said together (``None``: could not be read, e.g. not authorized)."""
    name_entry = group.get(GROUP_TOPIC_NAME)
    copy_entry = group.get(GROUP_COPY_RECORD)
    prefix = broker.get(BROKER_TOPIC_PREFIX) if broker is not None else None
    auto = broker.get(BROKER_AUTO_CREATE) if broker is not None else None
    enabled = topic.get(TOPIC_ENABLE) if topic is not None else None
    settings = DeadLetterQueueSettings(
        group_id=group_id,
        topic=(name_entry.value or None) if name_entry is not None else None,
        copy_record=bool(copy_entry is not None and parse_boolean(copy_entry.value)),
        share_version=share_version,
        topic_prefix=prefix.value if prefix is not None else None,
        auto_create_topics=parse_boolean(auto.value) if auto is not None else None,
        topic_exists=topic_exists,
        topic_enabled=(parse_boolean(enabled.value) if enabled is not None
                       else (False if topic is not None else None)),
    )
    return attrs.evolve(settings, problems=tuple(dlq_problems(settings)),
                        supported=name_entry is not None)


def dlq_problems(settings: DeadLetterQueueSettings) -> list[str]:
    """What stops the broker from writing ``settings.topic`` dead letters, and what to change.

    Empty when the group has no dead-letter topic, or when nothing known stops it
    (a fact that could not be read is not a problem).
    """
    topic = settings.topic
    if topic is None:
        return []
    problems = []
    level = settings.share_version
    if level is not None and level < SHARE_VERSION_FOR_DLQ:
        problems.append(
            f"the cluster's share.version is {level}; brokers write dead letters only from "
            f"share.version={SHARE_VERSION_FOR_DLQ} (Kafka 4.4+): {_UPGRADE}"
        )
    prefix = settings.topic_prefix
    if prefix and not topic.startswith(prefix):
        problems.append(
            f"{topic!r} does not start with {prefix!r}, the brokers' {BROKER_TOPIC_PREFIX}: "
            f"name the topic {prefix}..., or change {BROKER_TOPIC_PREFIX} "
            "(\"\" allows any name)"
        )
    if settings.topic_exists and settings.topic_enabled is False:
        problems.append(
            f"topic {topic!r} is not enabled as a dead-letter queue: set {TOPIC_ENABLE}=true "
            "on it (Admin.alter_topic_configs, or kafka-configs.sh --alter --entity-type "
            f"topics --entity-name {topic} --add-config {TOPIC_ENABLE}=true)"
        )
    if settings.topic_exists is False and settings.auto_create_topics is False:
        problems.append(
            f"topic {topic!r} does not exist and the brokers' {BROKER_AUTO_CREATE} is false: "
            f"create it with {TOPIC_ENABLE}=true, or set {BROKER_AUTO_CREATE}=true"
        )
    return problems
