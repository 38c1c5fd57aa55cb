"""``kafka-share groups``: list, describe and steer share groups (like kafka-share-groups.sh)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
import click

from kafka_share._reprs import attrs_repr
from kafka_share.admin import (
    Admin,
    DeadLetterQueueSettings,
    OffsetSpec,
    SharePartitionOffsetInfo,
)
from kafka_share.admin.dead_letter import GROUP_TOPIC_NAME
from kafka_share.commands.common import (
    connection_options,
    emit_json,
    json_option,
    print_table,
    settings,
)
from kafka_share.commands.offset_sources import (
    FileOffset,
    OffsetsFileError,
    ResetPlan,
    parse_offsets_file,
    plan_reset,
)
from kafka_share.errors import (
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    UnknownTopicOrPartitionError,
)
from kafka_share.models import TopicPartition

__all__ = ["groups"]

LAG_UNAVAILABLE = (
    "lag unavailable: the broker does not report it (it does from Kafka 4.2: "
    "DescribeShareGroupOffsets v1, KIP-1226)"
)


@click.group()
def groups() -> None:
    """Share groups: list, describe, offsets, reset-offsets, delete-offsets, delete, config."""


def _admin(bootstrap_server: str | None, command_config: Path | None) -> Admin:
    return settings(bootstrap_server, command_config).admin()


@groups.command("list")
@connection_options
@json_option
def list_groups(bootstrap_server: str | None, command_config: Path | None, as_json: bool) -> None:
    """List every share group with its state."""
    with _admin(bootstrap_server, command_config) as admin:
        listings = admin.list_share_groups()
    if as_json:
        emit_json([{"group_id": g.group_id, "state": g.state} for g in listings])
        return
    print_table(["GROUP", "STATE"], [(g.group_id, g.state) for g in listings])


@groups.command()
@click.argument("group")
@connection_options
@json_option
def describe(
    group: str, bootstrap_server: str | None, command_config: Path | None, as_json: bool
) -> None:
    """Describe GROUP: state, epochs, coordinator, each member's assignment, dead-letter queue."""
    with _admin(bootstrap_server, command_config) as admin:
        d = admin.describe_share_groups([group])[group]
        dlq = _dead_letter_queue(admin, group)
    if as_json:
        emit_json({
            "group_id": d.group_id,
            "state": d.state,
            "group_epoch": d.group_epoch,
            "assignment_epoch": d.assignment_epoch,
            "coordinator": {"id": d.coordinator.node_id, "host": d.coordinator.host,
                            "port": d.coordinator.port},
            "members": [
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "assignment": [
                        {"topic": tp.topic, "partition": tp.partition}
                        for tp in sorted(m.assignment)
                    ],
                }
                for m in d.members
            ],
            "dead_letter_queue": attrs.asdict(dlq) if dlq is not None else None,
        })
        return
    print_table(
        ["GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"],
        [(d.group_id, f"{d.coordinator.host}:{d.coordinator.port} ({d.coordinator.node_id})",
          d.state, d.group_epoch, d.assignment_epoch, len(d.members))],
    )
    if d.members:
        click.echo()
        print_table(
            ["MEMBER-ID", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "#PARTITIONS", "ASSIGNMENT"],
            [
                (m.member_id, m.client_id, m.host, m.member_epoch, len(m.assignment),
                 _assignment_text(m.assignment))
                for m in d.members
            ],
        )
    click.echo()
    for line in dead_letter_lines(dlq):
        click.echo(line)


def _dead_letter_queue(admin: Admin, group: str) -> DeadLetterQueueSettings | None:
    """The group's dead-letter queue, or None when the principal may not read its configs."""
    try:
        return admin.describe_dead_letter_queue(group)
    except GroupAuthorizationFailedError:
        return None


def dead_letter_lines(dlq: DeadLetterQueueSettings | None) -> list[str]:
    """What ``groups describe`` says of the group's dead-letter queue (KIP-1191)."""
    if dlq is None:
        return ["Dead-letter queue: unknown (not authorized to describe the group's configs)"]
    if not dlq.supported:
        return [f"Dead-letter queue: not supported (the brokers have no {GROUP_TOPIC_NAME}; "
                "Kafka 4.4+ with share.version=2)"]
    if dlq.topic is None:
        return [f"Dead-letter queue: none ({GROUP_TOPIC_NAME} is not set; rejected records "
                "and records over the delivery limit are archived)"]
    facts = [f"copy records: {'yes' if dlq.copy_record else 'no'}"]
    if dlq.share_version is not None:
        facts.append(f"share.version {dlq.share_version}")
    lines = [f"Dead-letter queue: {dlq.topic} ({', '.join(facts)})"]
    lines += [f"  not written: {problem}" for problem in dlq.problems]
    return lines


def _assignment_text(assignment: frozenset[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(assignment):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def lag_summary(
    offsets: Mapping[TopicPartition, SharePartitionOffsetInfo],
) -> tuple[int | None, str | None]:
    """The total lag of the share-partitions whose lag is known, and a note on the others.

    A share-partition with a start offset but no lag means the broker does not
    report lag (Kafka 4.1): the total is then None, not guessed. One without a
    start offset has no share-partition state yet (the broker initialises it
    once the partition is assigned or fetched): it is left out of the total,
    and the note names it.
    """
    if any(o.lag is None and o.start_offset is not None for o in offsets.values()):
        return None, LAG_UNAVAILABLE
    unknown = sorted(tp for tp, o in offsets.items() if o.lag is None)
    total = sum(o.lag for o in offsets.values() if o.lag is not None)
    if not unknown:
        return total, None
    names = ", ".join(str(tp) for tp in unknown)
    return total, f"not in the total (the broker has no share-partition state yet): {names}"


def offsets_rows(
    offsets: Mapping[TopicPartition, SharePartitionOffsetInfo],
) -> tuple[list[tuple[object, ...]], int | None, str | None]:
    """Table rows (topic, partition, start offset, leader epoch, lag), total lag, a note."""
    rows: list[tuple[object, ...]] = [
        (tp.topic, tp.partition, o.start_offset, o.leader_epoch, o.lag)
        for tp, o in sorted(offsets.items())
    ]
    total, note = lag_summary(offsets)
    return rows, total, note


@groups.command()
@click.argument("group")
@connection_options
@json_option
def offsets(
    group: str, bootstrap_server: str | None, command_config: Path | None, as_json: bool
) -> None:
    """Start offset and lag of GROUP per share-partition, with the total lag."""
    with _admin(bootstrap_server, command_config) as admin:
        found = admin.list_share_group_offsets(group)
    rows, total, note = offsets_rows(found)
    if as_json:
        emit_json({
            "group_id": group,
            "partitions": [
                {"topic": t, "partition": p, "start_offset": s, "leader_epoch": e, "lag": lag}
                for t, p, s, e, lag in rows
            ],
            "total_lag": total,
        })
        return
    print_table(["TOPIC", "PARTITION", "START-OFFSET", "LEADER-EPOCH", "LAG"],
                [*rows, ("TOTAL", "", "", "", total)] if rows else [])
    if not rows:
        click.echo(f"Share group {group!r} has no offsets yet.")
    elif note:
        click.echo(note)


def _parse_topics(values: Sequence[str]) -> list[tuple[str, list[int] | None]]:
    """``T`` (every partition) or ``T:0,2`` (those partitions)."""
    out: list[tuple[str, list[int] | None]] = []
    for value in values:
        topic, sep, parts = value.partition(":")
        if not topic:
            raise click.BadParameter(f"{value!r} names no topic", param_hint="--topic")
        if not sep:
            out.append((topic, None))
            continue
        try:
            out.append((topic, sorted({int(p) for p in parts.split(",")})))
        except ValueError:
            raise click.BadParameter(
                f"{value!r}: partitions must be numbers, e.g. {topic}:0,1", param_hint="--topic"
            ) from None
    return out


def _parse_datetime(text: str) -> int:
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an ISO date-time such as 2026-11-23T10:00:00 or "
            "2026-11-23T10:00:00+01:00", param_hint="--to-datetime",
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as Kafka's tools read it
    return int(when.timestamp() * 1000)


_TARGETS = ("--to-earliest, --to-latest, --to-offset N, --to-datetime ISO, "
            "--from-consumer-group GROUP, --from-file PATH")


@attrs_repr
@attrs.frozen(repr=False)
class _Source:
    """Where ``reset-offsets`` takes the new start offsets from (exactly one is set)."""

    to_earliest: bool = False
    to_latest: bool = False
    to_offset: int | None = None
    to_datetime: str | None = None
    from_consumer_group: str | None = None
    from_file: Path | None = None

    def chosen(self) -> list[str]:
        return [flag for flag, on in (
            ("--to-earliest", self.to_earliest), ("--to-latest", self.to_latest),
            ("--to-offset", self.to_offset is not None),
            ("--to-datetime", self.to_datetime is not None),
            ("--from-consumer-group", self.from_consumer_group is not None),
            ("--from-file", self.from_file is not None)) if on]


@groups.command("reset-offsets")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,...]",
              help="Topic (optionally with partitions) to reset; repeatable. Required, "
                   "except with --from-file (where it limits the file's partitions).")
@click.option("--to-earliest", is_flag=True, help="Reset to the log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the end: skip every existing record.")
@click.option("--to-offset", type=click.IntRange(min=0), default=None, help="Reset to offset N.")
@click.option("--to-datetime", default=None, metavar="ISO",
              help="Reset to the first record at or after this time.")
@click.option("--from-consumer-group", default=None, metavar="GROUP",
              help="Reset to the offsets consumer group GROUP committed; partitions it never "
                   "committed are left unchanged.")
@click.option("--from-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="PATH", help="Reset to the offsets in PATH: topic,partition,offset lines.")
@click.option("--execute", is_flag=True, help="Apply the change (default: a dry run).")
@connection_options
@json_option
def reset_offsets(
    group: str,
    topics: tuple[str, ...],
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    from_consumer_group: str | None,
    from_file: Path | None,
    execute: bool,
    bootstrap_server: str | None,
    command_config: Path | None,
    as_json: bool,
) -> None:
    """Reset GROUP's start offsets (a dry run unless --execute; the group must be empty).

    --from-consumer-group and --from-file move a consumer group's workload to
    the share group: each partition starts where the consumer group (or the
    file) says; an offset outside the log is moved to its nearest end.
    """
    source = _Source(to_earliest, to_latest, to_offset, to_datetime, from_consumer_group,
                     from_file)
    chosen = source.chosen()
    if len(chosen) != 1:
        raise click.UsageError(
            f"give exactly one of {_TARGETS}" + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    if not topics and from_file is None:
        raise click.UsageError("give --topic TOPIC (required, except with --from-file PATH)")
    wanted = _parse_topics(topics)
    from_lines = parse_offsets_file(from_file, group) if from_file is not None else None
    with _admin(bootstrap_server, command_config) as admin:
        if from_file is not None and from_lines is not None:
            partitions = _file_partitions(admin, from_file, from_lines, wanted)
        else:
            partitions = _topic_partitions(admin, wanted)
        plan = _plan(admin, source, partitions, from_lines)
        if not plan.target:
            names = ", ".join(str(tp) for tp in plan.uncommitted)
            raise click.ClickException(f"{_origin(source)} for any of {names}: nothing to reset")
        current = _current_offsets(admin, group) if not execute else {}
        if execute:
            admin.alter_share_group_offsets(group, plan.target)
    _print_reset(group, source, plan, current, execute, as_json)


def _current_offsets(admin: Admin, group: str) -> dict[TopicPartition, SharePartitionOffsetInfo]:
    """The share group's start offsets; none for a group that does not exist yet (the
    reset creates it: the usual first step of moving a consumer group's workload)."""
    try:
        return admin.list_share_group_offsets(group)
    except GroupIdNotFoundError:
        return {}


def _topic_partitions(
    admin: Admin, wanted: Sequence[tuple[str, list[int] | None]]
) -> list[TopicPartition]:
    described = admin.describe_topics([t for t, _ in wanted])
    return [
        TopicPartition(t, p)
        for t, ps in wanted
        for p in (ps if ps is not None else [i.partition for i in described[t].partitions])
    ]


def _file_partitions(
    admin: Admin,
    path: Path,
    lines: Mapping[TopicPartition, FileOffset],
    wanted: Sequence[tuple[str, list[int] | None]],
) -> list[TopicPartition]:
    """The partitions to reset: ``--topic``'s if given, else the file's, each checked to exist."""
    names = sorted({tp.topic for tp in lines})
    try:
        described = admin.describe_topics(names)
    except UnknownTopicOrPartitionError:
        existing = admin.list_topics()
        missing = [(f.line, tp.topic) for tp, f in lines.items() if tp.topic not in existing]
        if not missing:
            raise
        line, topic = min(missing)
        raise OffsetsFileError(f"{path}:{line}: topic {topic!r} does not exist") from None
    for tp, f in sorted(lines.items(), key=lambda item: item[1].line):
        count = len(described[tp.topic].partitions)
        if tp.partition >= count:
            raise OffsetsFileError(
                f"{path}:{f.line}: topic {tp.topic!r} has no partition {tp.partition} "
                f"(it has {count}: 0-{count - 1})"
            )
    if not wanted:
        return sorted(lines)
    return _topic_partitions(admin, wanted)


def _plan(
    admin: Admin,
    source: _Source,
    partitions: Sequence[TopicPartition],
    from_lines: Mapping[TopicPartition, FileOffset] | None,
) -> ResetPlan:
    earliest = {tp: r.offset for tp, r in admin.list_offsets(
        {tp: OffsetSpec.earliest() for tp in partitions}).items()}
    latest = {tp: r.offset for tp, r in admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in partitions}).items()}
    if from_lines is not None:
        return plan_reset(partitions, {tp: f.offset for tp, f in from_lines.items()},
                          earliest, latest)
    if source.from_consumer_group is not None:
        committed = admin.list_consumer_group_offsets(
            source.from_consumer_group, sorted({tp.topic for tp in partitions}))
        if not committed:
            raise click.ClickException(
                f"consumer group {source.from_consumer_group!r} has no committed offsets on "
                f"{', '.join(sorted({repr(tp.topic) for tp in partitions}))}: nothing to reset"
            )
        return plan_reset(partitions, committed, earliest, latest)
    if source.to_earliest:
        target = {tp: earliest[tp] for tp in partitions}
    elif source.to_latest:
        target = {tp: latest[tp] for tp in partitions}
    elif source.to_offset is not None:
        # Like Kafka's tools: an offset outside the log is moved to its nearest end.
        target = {tp: min(max(source.to_offset, earliest[tp]), latest[tp]) for tp in partitions}
    else:
        assert source.to_datetime is not None
        found = admin.list_offsets(
            {tp: OffsetSpec.for_timestamp(_parse_datetime(source.to_datetime))
             for tp in partitions}
        )
        target = {
            tp: found[tp].offset if found[tp].offset >= 0 else latest[tp] for tp in partitions
        }
    return ResetPlan(target, [], {})


def _print_reset(
    group: str,
    source: _Source,
    plan: ResetPlan,
    current: Mapping[TopicPartition, SharePartitionOffsetInfo],
    execute: bool,
    as_json: bool,
) -> None:
    target = plan.target
    if as_json:
        emit_json({
            "group_id": group,
            "executed": execute,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "new_start_offset": offset}
                for tp, offset in sorted(target.items())
            ],
            "unchanged": [{"topic": tp.topic, "partition": tp.partition}
                          for tp in plan.uncommitted],
        })
        return
    print_table(
        ["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"] + ([] if execute else
                                                               ["CURRENT-START-OFFSET"]),
        [
            (group, tp.topic, tp.partition, offset)
            + (() if execute else ((current[tp].start_offset if tp in current else None),))
            for tp, offset in sorted(target.items())
        ],
    )
    for line in _plan_notes(source, plan):
        click.echo(line)
    if execute:
        click.echo(f"Reset the start offsets of share group {group!r}.")
    else:
        click.echo("Dry run: nothing was changed. Add --execute to apply.")


def _origin(source: _Source) -> str:
    if source.from_consumer_group is not None:
        return f"consumer group {source.from_consumer_group!r} has no committed offset"
    return f"{source.from_file} gives no offset"


def _plan_notes(source: _Source, plan: ResetPlan) -> list[str]:
    """What a reset from given offsets leaves alone or moves into the log."""
    notes: list[str] = []
    if plan.uncommitted:
        names = ", ".join(str(tp) for tp in plan.uncommitted)
        notes.append(f"Left unchanged ({_origin(source)} for them): {names}")
    for tp, (given, offset) in sorted(plan.clamped.items()):
        notes.append(f"{tp}: offset {given} is outside the log; moved to {offset}")
    return notes


@groups.command("delete-offsets")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True, help="Topic; repeatable.")
@connection_options
def delete_offsets(
    group: str, topics: tuple[str, ...], bootstrap_server: str | None,
    command_config: Path | None,
) -> None:
    """Delete GROUP's offsets (its state) for whole topics; the group must be empty."""
    with _admin(bootstrap_server, command_config) as admin:
        admin.delete_share_group_offsets(group, topics)
    click.echo(f"Deleted the offsets of share group {group!r} for {', '.join(topics)}.")


@groups.command()
@click.argument("group_ids", nargs=-1, required=True, metavar="GROUP...")
@connection_options
def delete(group_ids: tuple[str, ...], bootstrap_server: str | None,
           command_config: Path | None) -> None:
    """Delete share groups and their state; each must be empty."""
    with _admin(bootstrap_server, command_config) as admin:
        admin.delete_share_groups(group_ids)
    for g in group_ids:
        click.echo(f"Deleted share group {g!r}.")


#: The group configs ``groups config`` shows without --all: a share group's own.
_SHOWN_PREFIXES = ("share.", "errors.deadletterqueue.")


def _parse_set(values: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint="--set")
        out[key.strip()] = val.strip()
    return out


@groups.command()
@click.argument("group")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Set a group config; repeatable.")
@click.option("--delete", "deletes", multiple=True, metavar="KEY",
              help="Reset a group config to its default; repeatable.")
@click.option("--all", "show_all", is_flag=True,
              help="Show every group config, not only share.* and errors.deadletterqueue.*.")
@connection_options
@json_option
def config(
    group: str, sets: tuple[str, ...], deletes: tuple[str, ...], show_all: bool,
    bootstrap_server: str | None, command_config: Path | None, as_json: bool,
) -> None:
    """Show GROUP's configs, or change them with --set / --delete.

    Setting a dead-letter topic (errors.deadletterqueue.topic.name, Kafka 4.4)
    checks first that the brokers would write to it: share.version=2, the
    brokers' topic name prefix, and the topic's errors.deadletterqueue.group.enable.
    """
    changes: dict[str, object | None] = dict(_parse_set(sets))
    for key in deletes:
        if key in changes:
            raise click.UsageError(f"{key} is both set and deleted")
        changes[key] = None
    with _admin(bootstrap_server, command_config) as admin:
        if changes:
            admin.alter_group_configs(group, changes)
            click.echo(f"Updated the configs of group {group!r}: " + ", ".join(
                f"{k}={'(default)' if v is None else v}" for k, v in changes.items()))
            return
        entries = admin.describe_group_configs(group)
    shown = [e for e in entries.values() if show_all or e.name.startswith(_SHOWN_PREFIXES)]
    if as_json:
        emit_json({e.name: {"value": e.value, "source": e.source.name} for e in shown})
        return
    print_table(["NAME", "VALUE", "SOURCE"], [(e.name, e.value, e.source.name) for e in shown])
