"""``kafka-share consume``: a console share consumer (like kafka-console-share-consumer.sh)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from kafka_share.admin import Admin
from kafka_share.commands.common import connection_options_without_timeout, settings
from kafka_share.dead_letter import DeadLetter
from kafka_share.errors import CorruptMessageError, GroupIdNotFoundError
from kafka_share.models import AcknowledgeType, ConsumerRecord

__all__ = ["consume"]

#: Fields a --format template may use.
FORMAT_FIELDS = ("topic", "partition", "offset", "key", "value", "headers", "delivery_count",
                 "timestamp", "dead_letter")
#: The template without --format; a dead letter's line also gets its provenance.
DEFAULT_TEMPLATE = "{value}"
#: How often the rate line goes to stderr.
RATE_EVERY_S = 5.0


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def dead_letter_text(record: ConsumerRecord[bytes | None, bytes | None]) -> str:
    """The provenance of a dead-lettered record (KIP-1191) in one line; "" for other records."""
    try:
        letter = DeadLetter.from_record(record)
    except CorruptMessageError as exc:
        return f"[dead letter, unreadable: {exc}]"
    if letter is None:
        return ""
    parts = [f"from {letter.topic}-{letter.partition}@{letter.offset}",
             f"group {letter.group}"]
    if letter.delivery_count is not None:
        parts.append(f"delivery {letter.delivery_count}")
    if letter.message is not None:
        parts.append(letter.message)
    return "[dead letter " + ", ".join(parts) + "]"


def render(record: ConsumerRecord[bytes | None, bytes | None], template: str | None) -> str:
    """``record`` formatted with ``template`` (str.format with FORMAT_FIELDS).

    Without a template a record shows its value, and a dead letter its
    provenance after it.
    """
    headers = ",".join(f"{k}:{_text(v)}" for k, v in record.headers)
    dead_letter = dead_letter_text(record)
    if template is None:
        template = DEFAULT_TEMPLATE + ("  {dead_letter}" if dead_letter else "")
    return template.format(
        topic=record.topic, partition=record.partition, offset=record.offset,
        key=_text(record.key), value=_text(record.value), headers=headers,
        delivery_count=record.delivery_count, timestamp=record.timestamp,
        dead_letter=dead_letter,
    )


def _check_format(template: str) -> None:
    sample: dict[str, Any] = dict.fromkeys(FORMAT_FIELDS, "")
    try:
        template.format(**sample)
    except (KeyError, IndexError, ValueError) as exc:
        raise click.BadParameter(
            f"{template!r} is not a valid template ({exc}); use fields "
            + ", ".join("{" + f + "}" for f in FORMAT_FIELDS), param_hint="--format",
        ) from None


def _from_beginning(admin: Admin, group: str) -> str:
    """Set share.auto.offset.reset=earliest if the group has no offsets yet; say what happened."""
    try:
        has_offsets = bool(admin.list_share_group_offsets(group))
    except GroupIdNotFoundError:
        has_offsets = False
    if has_offsets:
        return (f"--from-beginning ignored: share group {group!r} already has offsets "
                "(use `kafka-share groups reset-offsets` to move them)")
    admin.alter_group_configs(group, {"share.auto.offset.reset": "earliest"})
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        entry = admin.describe_group_configs(group).get("share.auto.offset.reset")
        if entry is not None and entry.value == "earliest":
            break
        time.sleep(0.1)
    return f"set share.auto.offset.reset=earliest on share group {group!r} (it had no offsets)"


@click.command()
@click.option("--topic", "topics", multiple=True, required=True, help="Topic; repeatable.")
@click.option("--group", required=True, help="The share group to join.")
@click.option("--from-beginning", is_flag=True,
              help="Start at the earliest offset if the group has no offsets yet.")
@click.option("--ack", "ack", type=click.Choice(["accept", "release", "reject"]),
              default="accept", show_default=True, help="How to acknowledge each record.")
@click.option("--max-messages", type=click.IntRange(min=1), default=None,
              help="Exit after this many records.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=None,
              help="Exit after this many seconds without a record.")
@click.option("--format", "template", default=None,
              help="Output template (default: {value}, and a dead letter's provenance); "
              "fields: " + ", ".join(FORMAT_FIELDS) + " (a dead-lettered record's "
              "provenance, empty for other records).")
@connection_options_without_timeout
def consume(
    topics: tuple[str, ...], group: str, from_beginning: bool, ack: str,
    max_messages: int | None, timeout_s: float | None, template: str | None,
    bootstrap_server: str | None, command_config: Path | None,
) -> None:
    """Print records of a share group to stdout; a rate line goes to stderr."""
    from kafka_share.consumer import ShareConsumer  # noqa: PLC0415 (heavier import)

    if template is not None:
        _check_format(template)
    connection = settings(bootstrap_server, command_config)
    with connection.admin() as admin:
        # A missing topic is an error here, not an endless wait for records
        # (raises UnknownTopicOrPartitionError naming the topic).
        admin.describe_topics(topics)
        if from_beginning:
            click.echo(_from_beginning(admin, group), err=True)
    ack_type = AcknowledgeType[ack.upper()]
    consumer: ShareConsumer[bytes | None, bytes | None] = ShareConsumer(connection.config(
        **{"group.id": group, "share.acknowledgement.mode": "explicit"}
    ))
    count = 0
    started = last_rate = last_record = time.monotonic()
    try:
        consumer.subscribe(list(topics))
        while max_messages is None or count < max_messages:
            records = consumer.poll(0.5)
            now = time.monotonic()
            for record in records:
                if max_messages is not None and count >= max_messages:
                    consumer.acknowledge(record, AcknowledgeType.RELEASE)
                    continue
                click.echo(render(record, template))
                consumer.acknowledge(record, ack_type)
                count += 1
                last_record = now
            if now - last_rate >= RATE_EVERY_S:
                rate = count / max(now - started, 1e-9)
                click.echo(f"{count} records, {rate:.1f}/s", err=True)
                last_rate = now
            if timeout_s is not None and now - last_record >= timeout_s:
                break
        consumer.commit_sync(timeout=10.0)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close(timeout=10.0)
        sys.stdout.flush()
    click.echo(f"Processed a total of {count} messages", err=True)
