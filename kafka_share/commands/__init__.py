"""The ``kafka-share`` commands (click); needs the ``cli`` extra.

``cli`` is the root group: ``groups`` (share-group administration), ``consume``
(a console share consumer), ``top`` (a live view of a group), plus ``broker``
(a local dev broker) and ``demo``. Errors from Kafka, the harness or bad input
are printed as one line (``Error: ...``) with exit status 1, never a traceback.
"""

# ruff: noqa: PLC0415

from __future__ import annotations

from typing import Any

import click

from kafka_share._version import __version__
from kafka_share.errors import KafkaError

__all__ = ["cli", "one_line"]


def one_line(error: BaseException) -> str:
    """The error's message on one line (multi-line config errors joined by '; ')."""
    text = str(error).strip() or type(error).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


class _Root(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        from kafka_share.testing.errors import HarnessError

        try:
            return super().invoke(ctx)
        except (KafkaError, HarnessError, ValueError, OSError) as exc:
            if isinstance(exc, click.ClickException):
                raise
            raise click.ClickException(one_line(exc)) from None


@click.group(cls=_Root)
@click.version_option(__version__, prog_name="kafka-share")
def cli() -> None:
    """kafka-share: a pure-Python client for Kafka share groups."""


def _register() -> None:
    from kafka_share.commands.consume import consume
    from kafka_share.commands.groups import groups
    from kafka_share.commands.top import top
    from kafka_share.demo import demo
    from kafka_share.testing.cli import broker

    cli.add_command(groups)
    cli.add_command(consume)
    cli.add_command(top)
    cli.add_command(broker)
    cli.add_command(demo)


_register()
