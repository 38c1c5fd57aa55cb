"""Where ``groups reset-offsets`` takes given offsets from: a file, or a consumer group.

Pure functions, no I/O beyond reading the file: parsing the offsets file and
turning the offsets found into the plan the command prints and applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
import click

from kafka_share.models import TopicPartition

__all__ = ["FileOffset", "OffsetsFileError", "ResetPlan", "parse_offsets_file", "plan_reset"]


class OffsetsFileError(click.ClickException):
    """A line of an offsets file is malformed; the message names the file and line."""


@attrs.frozen
class FileOffset:
    """One ``topic,partition,offset`` line: the offset and the line it came from."""

    offset: int
    line: int


def parse_offsets_file(path: Path) -> dict[TopicPartition, FileOffset]:
    """Read ``topic,partition,offset`` lines (the format of Kafka's consumer-groups tool).

    Blank lines and lines starting with ``#`` are skipped; spaces around the
    fields are ignored. A topic name cannot contain a comma, so exactly three
    fields are expected.

    Raises:
        OffsetsFileError: the file cannot be read, a line is malformed, a
            partition is given twice, or the file names no partition.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OffsetsFileError(f"cannot read the offsets file {path}: {exc}") from None
    out: dict[TopicPartition, FileOffset] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tp, offset = _parse_line(path, number, line)
        if tp in out:
            raise OffsetsFileError(
                f"{path}:{number}: partition {tp} is already given on line {out[tp].line}"
            )
        out[tp] = FileOffset(offset, number)
    if not out:
        raise OffsetsFileError(
            f"{path}: no offsets: expected lines of topic,partition,offset (e.g. orders,0,42)"
        )
    return out


def _parse_line(path: Path, number: int, line: str) -> tuple[TopicPartition, int]:
    fields = [f.strip() for f in line.split(",")]
    where = f"{path}:{number}"
    if len(fields) != 3:
        raise OffsetsFileError(
            f"{where}: expected topic,partition,offset (3 fields), got {len(fields)} "
            f"field(s) in {line!r}"
        )
    topic, partition, offset = fields
    if not topic:
        raise OffsetsFileError(f"{where}: the topic is empty in {line!r}")
    if not (partition.isascii() and partition.isdigit()):
        raise OffsetsFileError(
            f"{where}: the partition must be a number >= 0, got {partition!r}"
        )
    if not (offset.isascii() and offset.isdigit()):
        raise OffsetsFileError(f"{where}: the offset must be a number >= 0, got {offset!r}")
    return TopicPartition(topic, int(partition)), int(offset)


@attrs.frozen
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
