"""``kafka-share work module:function``: run a handler over a share group (a
:class:`~kafka_share.workers.ShareWorker`, or an ``AsyncShareWorker`` for a
coroutine function) until SIGTERM or Ctrl+C."""

from __future__ import annotations

import asyncio
import builtins
import importlib
import inspect
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click

from kafka_share.commands.common import connection_options_without_timeout, settings
from kafka_share.commands.consume import _from_beginning
from kafka_share.workers import DEFAULT_STOP_TIMEOUT_S, WorkerSummary

__all__ = ["load_handler", "work"]

#: How often the progress line goes to stderr.
PROGRESS_EVERY_S: Final = 10.0


def _import_attribute(spec: str, app_dir: str, what: str) -> Any:
    """``module:attr.path`` imported (``app_dir`` first on ``sys.path``, as
    ``python -m`` would have the current directory)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise click.BadParameter(f"{spec!r} is not module:{what} (e.g. myapp.jobs:handle)")
    directory = str(Path(app_dir).resolve())
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise click.BadParameter(
                f"cannot import module {module_name!r} (from {directory} or the installed "
                "packages; --app-dir says where to look)"
            ) from None
        raise  # the module was found, but an import inside it failed: its error
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise click.BadParameter(f"module {module_name!r} has no attribute {attr!r}") from None
    return obj


def load_handler(spec: str, app_dir: str = ".") -> Callable[..., object]:
    """The handler ``module:function`` names (any callable: a function, a
    coroutine function, an object with ``__call__``).

    Raises:
        click.BadParameter: the spec is malformed, or names nothing callable.
    """
    handler = _import_attribute(spec, app_dir, "function")
    if not callable(handler):
        raise click.BadParameter(f"{spec!r} is not callable (it is {type(handler).__name__})")
    return handler  # type: ignore[no-any-return]


def _exception_type(spec: str, app_dir: str) -> type[BaseException]:
    """``TimeoutError`` (a builtin), ``module:Class`` or ``module.Class``."""
    if ":" in spec:
        found = _import_attribute(spec, app_dir, "Class")
    elif "." in spec:
        module, _, name = spec.rpartition(".")
        found = _import_attribute(f"{module}:{name}", app_dir, "Class")
    else:
        found = getattr(builtins, spec, None)
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        raise click.BadParameter(
            f"{spec!r} is not an exception type (a builtin such as TimeoutError, or "
            "module:Class)", param_hint="--retryable",
        )
    return found


def _is_coroutine_function(handler: object) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 (an object's async __call__)
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def _properties(pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--property")
        out[key.strip()] = value.strip()
    return out


def _progress(worker: Any, done: threading.Event) -> None:
    """Every PROGRESS_EVERY_S, the counts so far, on stderr."""
    while not done.wait(PROGRESS_EVERY_S):
        m = worker.metrics()
        click.echo(
            f"{m['records-accepted-total']:.0f} accepted, {m['records-released-total']:.0f} "
            f"released, {m['records-rejected-total']:.0f} rejected; "
            f"{m['records-accepted-rate']:.1f} accepted/s", err=True,
        )


def _summary_line(summary: WorkerSummary) -> str:
    line = (f"Stopped ({summary.stopped_by}): {summary.accepted} accepted, "
            f"{summary.released} released, {summary.rejected} rejected")
    if summary.released_on_stop:
        line += f"; {summary.released_on_stop} released unhandled on stop"
    if summary.abandoned:
        line += f" ({summary.abandoned} handlers still running were abandoned)"
    return line


@click.command()
@click.argument("handler_spec", metavar="MODULE:FUNCTION")
@click.option("--topic", "topics", multiple=True, required=True, help="Topic; repeatable.")
@click.option("--group", required=True, help="The share group to join.")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True,
              help="Handlers running at once (threads, or tasks for a coroutine function).")
@click.option("--retryable", "retryable_specs", multiple=True, metavar="EXCEPTION",
              help="An exception type whose records are RELEASEd (delivered again), e.g. "
                   "TimeoutError or myapp.errors:Busy; repeatable. Others REJECT.")
@click.option("--stop-timeout", "stop_timeout_s", type=click.FloatRange(min=0),
              default=DEFAULT_STOP_TIMEOUT_S, show_default=True,
              help="On SIGTERM/Ctrl+C, seconds running handlers get to finish (a second "
                   "signal stops at once).")
@click.option("--max-records", type=click.IntRange(min=1), default=None,
              help="Exit after handling this many records.")
@click.option("--idle-timeout", "idle_timeout_s", type=click.FloatRange(min=0, min_open=True),
              default=None, help="Exit after this many seconds without a record.")
@click.option("--from-beginning", is_flag=True,
              help="Start at the earliest offset if the group has no offsets yet.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="A consumer setting, e.g. share.auto.renew.max.ms=600000; repeatable.")
@click.option("--app-dir", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Where to look for MODULE first.")
@connection_options_without_timeout
def work(
    handler_spec: str, topics: tuple[str, ...], group: str, concurrency: int,
    retryable_specs: tuple[str, ...], stop_timeout_s: float, max_records: int | None,
    idle_timeout_s: float | None, from_beginning: bool, properties: tuple[str, ...],
    app_dir: str, bootstrap_server: str | None, command_config: Path | None,
) -> None:
    """Run MODULE:FUNCTION for each record of a share group.

    The handler returns: the record is ACCEPTed; it raises a --retryable
    exception: RELEASEd (delivered again); anything else: REJECTed (to the
    dead-letter topic where the group has one). SIGTERM or Ctrl+C stops in
    order: records not started are released at once, running handlers get
    --stop-timeout seconds.
    """
    from kafka_share.workers import AsyncShareWorker, ShareWorker  # noqa: PLC0415

    handler = load_handler(handler_spec, app_dir)
    retryable = tuple(_exception_type(spec, app_dir) for spec in retryable_specs)
    connection = settings(bootstrap_server, command_config)
    config = connection.config(**{**_properties(properties), "group.id": group})
    with connection.admin() as admin:
        admin.describe_topics(topics)  # a missing topic is named, not waited for
        if from_beginning:
            click.echo(_from_beginning(admin, group), err=True)
    kind: Any = AsyncShareWorker if _is_coroutine_function(handler) else ShareWorker
    worker = kind(handler, config, topics=list(topics), concurrency=concurrency,
                  retryable=retryable, stop_timeout_s=stop_timeout_s)
    click.echo(f"{kind.__name__} {handler_spec}: group {group!r}, topics {', '.join(topics)}, "
               f"concurrency {concurrency}; Ctrl+C or SIGTERM to stop", err=True)
    done = threading.Event()
    threading.Thread(target=_progress, args=(worker, done), daemon=True).start()
    try:
        running = worker.run(max_records=max_records, idle_timeout_s=idle_timeout_s)
        summary = asyncio.run(running) if kind is AsyncShareWorker else running
    finally:
        done.set()
    click.echo(_summary_line(summary), err=True)
