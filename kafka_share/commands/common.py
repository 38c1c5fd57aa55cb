"""Options and helpers shared by the ``kafka-share`` commands."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kafka_share._reprs import attrs_repr
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


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Java's logical lines: comments and blanks dropped, ``\\``-continued lines joined."""
    pending: list[str] = []
    first = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip()
        if not pending:
            if not line or line[0] in "#!":
                continue
            first = number
        # An odd number of trailing backslashes continues the line on the next one.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield first, "".join(pending)
        pending = []
    if pending:
        yield first, "".join(pending)


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 >= len(text):
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise click.BadParameter(
                    f"{where}: \\u needs four hex digits, got {digits!r}",
                    param_hint="--command-config",
                ) from None
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split_key(line: str) -> tuple[str, str] | None:
    """``(key, rest)`` at the first unescaped ``=``, ``:`` or blank; None without one."""
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=:":
            return line[:i], line[i + 1:].lstrip()
        if char in " \t\f":
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            return line[:i], rest
        i += 1
    return None


def read_properties(path: Path) -> dict[str, str]:
    """Read a Java ``.properties`` file, as Kafka's tools take for ``--command-config``.

    ``key=value``, ``key: value`` or ``key value``; ``#`` and ``!`` comments;
    a line ending in ``\\`` continues on the next one (leading blanks dropped),
    as in multi-line ``sasl.jaas.config`` values; escapes ``\\t``, ``\\n``,
    ``\\uXXXX`` and ``\\`` before any other character. Unlike Java, trailing
    blanks of a value are dropped, and a key without a value is an error
    naming the file and line (it is always a typo in a client config).
    """
    out: dict[str, str] = {}
    for number, line in _logical_lines(path.read_text(encoding="utf-8")):
        where = f"{path}:{number}"
        split = _split_key(line)
        if split is None or not split[0]:
            # Not quoted: the line may be a password pasted on a line of its own.
            what = "a value without a key" if split is not None else (
                f"a line of {len(line)} characters with no '=', ':' or blank after a key")
            raise click.BadParameter(
                f"{where}: expected KEY=VALUE, got {what} (its text is not shown: it may "
                "hold a secret)", param_hint="--command-config"
            )
        key, value = split
        out[_unescape(key, where)] = _unescape(value, where).rstrip()
    return out


@attrs_repr
@attrs.frozen(repr=False)
class ConnectionSettings:
    """What ``--bootstrap-server`` and ``--command-config`` say."""

    bootstrap_server: str | None
    command_config: dict[str, str]
    #: --timeout: how long any one call may take, seconds (None: the clients' defaults)
    timeout_s: float | None = None

    def config(self, **extra: object) -> dict[str, object]:
        """The client config: the command-config file, then the options."""
        config: dict[str, object] = dict(self.command_config)
        if self.timeout_s is not None:
            timeout_ms = max(1, round(self.timeout_s * 1000))
            config["default.api.timeout.ms"] = timeout_ms
            given = config.get("request.timeout.ms", 30_000)
            config["request.timeout.ms"] = min(timeout_ms, int(str(given)))
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


_TIMEOUT_KEY = "kafka_share.timeout_s"


def _remember_timeout(ctx: click.Context, param: click.Parameter, value: float | None) -> None:
    if value is not None:
        if not value > 0:
            raise click.BadParameter("must be a number of seconds above 0", ctx, param)
        ctx.meta[_TIMEOUT_KEY] = value


def connection_options(func: F) -> F:
    """``--bootstrap-server``, ``--command-config`` and ``--timeout``."""
    func = _connection_options(func)
    return click.option(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        expose_value=False,
        callback=_remember_timeout,
        help="Give up on the broker after this long (default: 60 s, default.api.timeout.ms).",
    )(func)


def connection_options_without_timeout(func: F) -> F:
    """``--bootstrap-server`` and ``--command-config``, for a command whose own
    ``--timeout`` means something else (``consume``: how long without a record)."""
    return _connection_options(func)


def _connection_options(func: F) -> F:
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
    ctx = click.get_current_context(silent=True)
    timeout_s = ctx.meta.get(_TIMEOUT_KEY) if ctx is not None else None
    return ConnectionSettings(
        bootstrap_server, read_properties(command_config) if command_config else {}, timeout_s
    )


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=False, default=str))


def console() -> Console:
    # Wide enough that tables do not wrap when output goes to a pipe or a test.
    return Console(width=None if sys.stdout.isatty() else 160, highlight=False)


def table(columns: Sequence[str], rows: Iterable[Sequence[object]], *, title: str = "") -> Table:
    # Cells and titles are Text, never markup: client ids, group ids and the
    # like come from brokers and clients, and "[/x]" in one crashed the table.
    t = Table(title=Text(title) if title else None, box=None, header_style="bold",
              pad_edge=False)
    for column in columns:
        numeric = column.startswith("#") or column.endswith(
            ("OFFSET", "LAG", "EPOCH", "PARTITION", "BEHIND-START"))
        justify = "right" if numeric else "left"
        t.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        t.add_row(*(Text("-" if v is None else str(v)) for v in row))
    return t


def print_table(
    columns: Sequence[str], rows: Iterable[Sequence[object]], *, title: str = ""
) -> None:
    console().print(table(columns, rows, title=title))
