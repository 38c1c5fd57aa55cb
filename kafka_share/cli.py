"""The ``kafka-share`` command line."""

from __future__ import annotations

import click

from kafka_share._version import __version__


@click.group()
@click.version_option(__version__, prog_name="kafka-share")
def main() -> None:
    """kafka-share: a pure-Python client for Kafka share groups."""


def _register() -> None:
    # Subcommands live next to the code they drive; imported here so that
    # `kafka-share --help` lists them all.
    from kafka_share.demo import demo  # noqa: PLC0415
    from kafka_share.testing.cli import broker  # noqa: PLC0415

    main.add_command(broker)
    main.add_command(demo)


_register()
