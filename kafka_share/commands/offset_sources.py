"""Where ``groups reset-offsets`` takes given offsets from: a file, or a consumer group.

Pure functions, no I/O beyond reading the file: parsing the offsets file and
turning the offsets found into the plan the command prints and applies.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
import click

from kafka_share._reprs import attrs_repr
from kafka_share.models import TopicPartition

__all__ = ["FileOffset", "OffsetsFileError", "ResetPlan", "parse_offsets_file", "plan_reset"]


class OffsetsFileError(click.ClickException):
    """A line of an offsets file is malformed; the message names the file and line."""


@attrs_repr
@attrs.frozen(repr=False)
class FileOffset:
    """One ``topic,partition,offset`` line: the offset and the line it came from."""

    offset: int
    line: int


def parse_offsets_file(path: Path, group: str) -> dict[TopicPartition, FileOffset]:
    """Read the offsets of share group ``group`` from a file in the format Kafka 4.4's
    ``kafka-share-groups.sh --reset-offsets --from-file`` reads (KIP-1323, the same as
    ``kafka-consumer-groups.sh``'s, whose ``--export`` writes it).

    Lines are CSV (quoted fields allowed, one trailing comma ignored) of
    ``topic,partition,offset``, or of ``group,topic,partition,offset`` (what
    ``--export`` writes for several groups), of which the lines of ``group`` are
    taken; the first line decides the layout, as in Kafka's tool. Two
    extensions: blank lines and lines starting with ``#`` are skipped. Stricter
    than Kafka's tool, which fills a missing field with 0 and keeps the last of
    two lines for one partition: both are errors here.

    Raises:
        OffsetsFileError: the file cannot be read, a line is malformed, a
            partition is given twice, or the file names no partition of ``group``.
    """
    try:
        # utf-8-sig: a byte-order mark (some spreadsheet exports) is not part of a topic.
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise OffsetsFileError(f"cannot read the offsets file {path}: {exc}") from None
    out: dict[TopicPartition, FileOffset] = {}
    width: int | None = None
    groups: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        fields = _fields(path, number, raw)
        if width is None and len(fields) in _LAYOUTS:
            width = len(fields)
        if len(fields) != width:
            wanted = (f"{_LAYOUTS[width]} ({width} fields, as on the first line)" if width
                      else "topic,partition,offset or group,topic,partition,offset (3 or 4 "
                      "fields)")
            raise OffsetsFileError(
                f"{path}:{number}: expected {wanted}, got {len(fields)} field(s) in "
                f"{raw.strip()!r}"
            )
        if width == 4:
            line_group, *fields = fields
            groups.add(line_group)
            if line_group != group:
                continue
        tp, offset = _parse_fields(path, number, fields)
        if tp in out:
            raise OffsetsFileError(
                f"{path}:{number}: partition {tp} is already given on line {out[tp].line}"
            )
        out[tp] = FileOffset(offset, number)
    if not out:
        if groups:
            raise OffsetsFileError(
                f"{path}: no offsets for share group {group!r}: its lines are "
                f"group,topic,partition,offset and name only {', '.join(sorted(groups))}"
            )
        raise OffsetsFileError(
            f"{path}: no offsets: expected lines of topic,partition,offset (e.g. orders,0,42)"
        )
    return out


_LAYOUTS = {3: "topic,partition,offset", 4: "group,topic,partition,offset"}
_MAX_PARTITION = 2**31 - 1
_MAX_OFFSET = 2**63 - 1


def _fields(path: Path, number: int, raw: str) -> list[str]:
    try:
        (fields,) = csv.reader([raw], strict=True)
    except (csv.Error, ValueError) as exc:
        raise OffsetsFileError(f"{path}:{number}: not a CSV line ({exc}): {raw!r}") from None
    if len(fields) > 1 and fields[-1] == "":
        fields.pop()  # a trailing comma, as Kafka's reader takes it
    return [f.strip() for f in fields]


def _parse_fields(path: Path, number: int, fields: list[str]) -> tuple[TopicPartition, int]:
    where = f"{path}:{number}"
    topic, partition, offset = fields
    if not topic:
        raise OffsetsFileError(f"{where}: the topic is empty")
    if not (partition.isascii() and partition.isdigit()) or int(partition) > _MAX_PARTITION:
        raise OffsetsFileError(
            f"{where}: the partition must be a number from 0 to {_MAX_PARTITION}, "
            f"got {partition!r}"
        )
    if not (offset.isascii() and offset.isdigit()) or int(offset) > _MAX_OFFSET:
        raise OffsetsFileError(
            f"{where}: the offset must be a number from 0 to {_MAX_OFFSET}, got {offset!r}"
        )
    return TopicPartition(topic, int(partition)), int(offset)


@attrs_repr
@attrs.frozen(repr=False)
class ResetPlan:
    """What a reset from given offsets does.

    ``target``: the new start offset per share-partition. ``uncommitted``: the
    partitions asked for that the source has no offset for (left unchanged).
    ``clamped``: partitions whose given offset was outside the log, moved to
    its nearest end (given offset -> new start offset).
    """

    target: dict[TopicPartition, int]
    uncommitted: list[TopicPartition]
    clamped: dict[TopicPartition, tuple[int, int]]


def plan_reset(
    partitions: Sequence[TopicPartition],
    given: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> ResetPlan:
    """The plan for ``partitions`` from the ``given`` offsets and the log's bounds.

    Like Kafka's tools (and ``--to-offset``), an offset outside the log is
    moved to its nearest end: before the log start (records deleted since the
    commit) to the log start, after the log end to the log end.
    """
    target: dict[TopicPartition, int] = {}
    uncommitted: list[TopicPartition] = []
    clamped: dict[TopicPartition, tuple[int, int]] = {}
    for tp in sorted(set(partitions)):
        if tp not in given:
            uncommitted.append(tp)
            continue
        offset = min(max(given[tp], earliest[tp]), latest[tp])
        if offset != given[tp]:
            clamped[tp] = (given[tp], offset)
        target[tp] = offset
    return ResetPlan(target, uncommitted, clamped)
