"""``kafka-share top GROUP``: a live view of a share group."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

import click
from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from kafka_share.admin import Admin, OffsetSpec
from kafka_share.commands.common import connection_options, console, settings, table
from kafka_share.commands.groups import lag_summary
from kafka_share.errors import GroupIdNotFoundError, KafkaError
from kafka_share.models import TopicPartition

__all__ = ["IN_FLIGHT_NOTE", "TopView", "snapshot", "top"]


#: Why there is no in-flight column (shown under every frame).
IN_FLIGHT_NOTE = (
    "in-flight records: not reported by any Kafka RPC; broker metric "
    "SharePartitionMetrics InFlightMessageCount"
)
#: START/S averages the start offset's progress over this many seconds.
RATE_WINDOW_S = 10.0


class TopView:
    """Frames of ``kafka-share top``; remembers the previous frame to show progress.

    ``START/S`` is how fast the group's start offset moved over the last
    :data:`RATE_WINDOW_S` seconds (records per second): the share-partition's progress, as records
    at its start become done (acknowledged, or archived after the delivery
    limit). ``BEHIND-START`` is how far the start offset trails the end of
    the partition; ``LAG`` (Kafka 4.2+) counts only the records in that range
    not yet done (available, or in flight with a consumer), so
    ``BEHIND-START - LAG`` records beyond the start offset are already done.
    """

    def __init__(self, admin: Admin, group: str) -> None:
        self._admin = admin
        self._group = group
        #: share-partition -> (start offset, time.monotonic()) of recent frames
        self._history: dict[TopicPartition, deque[tuple[int, float]]] = {}

    def _rate(self, tp: TopicPartition, start: int | None, now: float) -> str | None:
        """START/S: the start offset's progress per second over the last
        :data:`RATE_WINDOW_S`. Frame to frame it flipped between ~500 and 0.0:
        the broker persists the start offset in steps, not on every
        acknowledgement."""
        if start is None:
            self._history.pop(tp, None)  # the state is gone (offsets deleted)
            return None
        samples = self._history.setdefault(tp, deque())
        samples.append((start, now))
        while len(samples) > 2 and now - samples[1][1] >= RATE_WINDOW_S:
            samples.popleft()  # keep one sample at or before the window's start
        first_start, first_time = samples[0]
        if now <= first_time:
            return None
        return f"{(start - first_start) / (now - first_time):.1f}"

    def frame(self) -> RenderableType:
        """One frame: the group, its members, and per share-partition offsets, lag, progress."""
        group = self._group
        stamp = time.strftime("%H:%M:%S")
        try:
            d = self._admin.describe_share_groups([group], timeout=5)[group]
        except GroupIdNotFoundError:
            return Text(f"{stamp}  share group {group!r} does not exist (yet)")
        offsets = self._admin.list_share_group_offsets(group, timeout=5)
        ends = self._admin.list_offsets({tp: OffsetSpec.latest() for tp in offsets}, timeout=5)
        now = time.monotonic()
        head = Text(
            f"{stamp}  share group {group}  state {d.state}  epoch {d.group_epoch}  "
            f"members {len(d.members)}  coordinator {d.coordinator.host}:{d.coordinator.port}",
            style="bold",
        )
        owners: dict[TopicPartition, list[str]] = {}
        for m in d.members:
            for tp in m.assignment:
                owners.setdefault(tp, []).append(f"{m.client_id} ({m.member_id[:8]})")
        members = table(
            ["MEMBER-ID", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "#PARTITIONS"],
            [(m.member_id, m.client_id, m.host, m.member_epoch, len(m.assignment))
             for m in d.members],
            title="members",
        )
        rows = []
        for tp, o in sorted(offsets.items()):
            end = ends[tp].offset if tp in ends else None
            start = o.start_offset
            behind = end - start if end is not None and start is not None else None
            rows.append((tp.topic, tp.partition, start, end, behind, o.lag,
                         self._rate(tp, start, now), ", ".join(sorted(owners.get(tp, [])))))
        parts = table(
            ["TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "BEHIND-START", "LAG",
             "START/S", "MEMBERS"],
            rows, title="share-partitions",
        )
        total_lag, note = lag_summary(offsets)
        lines = [f"total lag: {'-' if total_lag is None else total_lag}"]
        if note:
            lines.append(note)
        footer = Text("\n".join([*lines, IN_FLIGHT_NOTE]))
        return Group(head, members, parts, footer)


def snapshot(admin: Admin, group: str) -> RenderableType:
    """One frame of ``kafka-share top`` (without a previous one: no START/S yet)."""
    return TopView(admin, group).frame()


@click.command()
@click.argument("group")
@click.option("--interval", type=click.FloatRange(min=0.2), default=1.0, show_default=True,
              help="Seconds between refreshes.")
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help="Stop after this many refreshes (default: until Ctrl-C).")
@connection_options
def top(group: str, interval: float, iterations: int | None, bootstrap_server: str | None,
        command_config: Path | None) -> None:
    """A live view of GROUP: members, and per share-partition start offset, end offset,
    lag and progress (start offset per second).

    In-flight records are not shown: no Kafka RPC reports them (the broker's
    SharePartitionMetrics InFlightMessageCount metric does).
    """
    out = console()
    with settings(bootstrap_server, command_config).admin() as admin:
        view = TopView(admin, group)
        if not out.is_terminal:
            # Plain frames one after another when the output is not a terminal.
            for n in range(iterations or 1_000_000_000):
                if n:
                    time.sleep(interval)
                out.print(view.frame())
            return
        try:
            with Live(view.frame(), console=out, auto_refresh=False) as live:
                n = 1
                while iterations is None or n < iterations:
                    time.sleep(interval)
                    try:
                        frame = view.frame()
                    except KafkaError as exc:  # keep the view up while a broker restarts
                        frame = Text(f"{time.strftime('%H:%M:%S')}  {exc}", style="red")
                    live.update(frame, refresh=True)
                    n += 1
        except KeyboardInterrupt:
            pass
