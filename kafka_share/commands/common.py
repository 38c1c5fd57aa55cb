"""Options and helpers shared by the ``kafka-share`` commands."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import click
from rich.console import Console
from rich.table import Table

from kafka_share.admin import Admin

__all__ = [
    "ConnectionSettings",
    "connection_options",
    "emit_json",
    "json_option",
    "print_table",
    "read_properties",
]

F = TypeVar("F", bound=Callable[..., Any])


def read_properties(path: Path) -> dict[str, str]:
    """Read a Java ``.properties`` file (``key=value``, ``key: value``; ``#``/``!`` comments).

    Line continuations and escapes beyond ``\\\\`` are not supported; a line
    without a separator is an error naming the file and line.
    """
    out: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise click.BadParameter(
                f"{path}:{number}: expected KEY=VALUE, got {line!r}", param_hint="--command-config"
            )
        out[line[:cut].strip()] = line[cut + 1:].strip().replace("\\\\", "\\")
    return out


@attrs.frozen
class ConnectionSettings:
    """What ``--bootstrap-server`` and ``--command-config`` say."""

    bootstrap_server: str | None
    command_config: dict[str, str]

    def config(self, **extra: object) -> dict[str, object]:
        """The client config: the command-config file, then the options."""
        config: dict[str, object] = dict(self.command_config)
        if self.bootstrap_server:
            config["bootstrap.servers"] = self.bootstrap_server
        elif "bootstrap.servers" not in config:
            raise click.UsageError(
                "give --bootstrap-server HOST:PORT (or bootstrap.servers in --command-config)"
            )
        config.update(extra)
        return config

    def admin(self) -> Admin:
        return Admin(self.config())


def connection_options(func: F) -> F:
    """``--bootstrap-server`` and ``--command-config``, passed as ``connection``."""

    func = click.option(
        "--command-config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="A .properties file of client settings (security.protocol, sasl.*, ssl.*, ...).",
    )(func)
    func = click.option(
        "--bootstrap-server",
        envvar="KAFKA_SHARE_BOOTSTRAP_SERVER",
        default=None,
        metavar="HOST:PORT",
        help="The broker(s) to connect to (env KAFKA_SHARE_BOOTSTRAP_SERVER).",
    )(func)
    return func


def settings(bootstrap_server: str | None, command_config: Path | None) -> ConnectionSettings:
    return ConnectionSettings(
        bootstrap_server, read_properties(command_config) if command_config else {}
    )


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=False, default=str))


def console() -> Console:
    # Wide enough that tables do not wrap when output goes to a pipe or a test.
    return Console(width=None if sys.stdout.isatty() else 160, highlight=False)


def table(columns: Sequence[str], rows: Iterable[Sequence[object]], *, title: str = "") -> Table:
    t = Table(title=title or None, box=None, header_style="bold", pad_edge=False)
    for column in columns:
        numeric = column.startswith("#") or column.endswith(
            ("OFFSET", "LAG", "EPOCH", "PARTITION", "BEHIND-START"))
        justify = "right" if numeric else "left"
        t.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        t.add_row(*("-" if v is None else str(v) for v in row))
    return t


def print_table(
    columns: Sequence[str], rows: Iterable[Sequence[object]], *, title: str = ""
) -> None:
    console().print(table(columns, rows, title=title))
