"""``kafka-share top GROUP``: a live view of a share group."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from kafka_share.admin import Admin, OffsetSpec
from kafka_share.commands.common import connection_options, console, settings, table
from kafka_share.errors import GroupIdNotFoundError, KafkaError

__all__ = ["snapshot", "top"]


def snapshot(admin: Admin, group: str) -> RenderableType:
    """One frame: the group, its members, and per share-partition offsets and lag.

    ``BEHIND-START`` is how far the group's start offset trails the end of the
    partition; ``LAG`` (Kafka 4.2+) counts only records not yet done, so
    ``BEHIND-START - LAG`` records beyond the start offset are already done
    (acknowledged or archived) while earlier ones are still in flight or waiting.
    """
    stamp = time.strftime("%H:%M:%S")
    try:
        d = admin.describe_share_groups([group], timeout=5)[group]
    except GroupIdNotFoundError:
        return Text(f"{stamp}  share group {group!r} does not exist (yet)")
    offsets = admin.list_share_group_offsets(group, timeout=5)
    ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in offsets}, timeout=5)
    head = Text(
        f"{stamp}  share group {group}  state {d.state}  epoch {d.group_epoch}  "
        f"members {len(d.members)}  coordinator {d.coordinator.host}:{d.coordinator.port}",
        style="bold",
    )
    owners: dict[object, str] = {}
    for m in d.members:
        for tp in m.assignment:
            owners[tp] = f"{m.client_id} ({m.member_id[:8]})"
    members = table(
        ["MEMBER-ID", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "#PARTITIONS"],
        [(m.member_id, m.client_id, m.host, m.member_epoch, len(m.assignment))
         for m in d.members],
        title="members",
    )
    rows = []
    total_lag: int | None = 0
    for tp, o in sorted(offsets.items()):
        end = ends[tp].offset if tp in ends else None
        behind = end - o.start_offset if end is not None and o.start_offset is not None else None
        if o.lag is None or total_lag is None:
            total_lag = None
        else:
            total_lag += o.lag
        rows.append((tp.topic, tp.partition, o.start_offset, end, behind, o.lag,
                     owners.get(tp, "")))
    parts = table(
        ["TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "BEHIND-START", "LAG", "MEMBERS"],
        rows, title="share-partitions",
    )
    footer = Text(f"total lag: {'unavailable (Kafka 4.2+)' if total_lag is None else total_lag}")
    return Group(head, members, parts, footer)


@click.command()
@click.argument("group")
@click.option("--interval", type=click.FloatRange(min=0.2), default=1.0, show_default=True,
              help="Seconds between refreshes.")
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help="Stop after this many refreshes (default: until Ctrl-C).")
@connection_options
def top(group: str, interval: float, iterations: int | None, bootstrap_server: str | None,
        command_config: Path | None) -> None:
    """A live view of GROUP: members, and start offset, end offset and lag per share-partition."""
    out = console()
    with settings(bootstrap_server, command_config).admin() as admin:
        if not out.is_terminal:
            # Plain frames one after another when the output is not a terminal.
            for n in range(iterations or 1_000_000_000):
                if n:
                    time.sleep(interval)
                out.print(snapshot(admin, group))
            return
        try:
            with Live(snapshot(admin, group), console=out, auto_refresh=False) as live:
                n = 1
                while iterations is None or n < iterations:
                    time.sleep(interval)
                    try:
                        frame = snapshot(admin, group)
                    except KafkaError as exc:  # keep the view up while a broker restarts
                        frame = Text(f"{time.strftime('%H:%M:%S')}  {exc}", style="red")
                    live.update(frame, refresh=True)
                    n += 1
        except KeyboardInterrupt:
            pass
