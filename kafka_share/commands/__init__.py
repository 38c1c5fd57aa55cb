"""The ``kafka-share`` commands (click); needs the ``cli`` extra.

``cli`` is the root group: ``groups`` (share-group administration), ``consume``
(a console share consumer), ``top`` (a live view of a group), ``work`` (a
handler run over a share group by a worker), plus ``broker``
(a local dev broker) and ``demo``. Errors from Kafka, the harness or bad input
are printed as one line (``Error: ...``) with exit status 1, never a traceback.
The library's log lines (e.g. a broker that cannot be reached yet) stay out of
the way unless asked for with ``-v`` (warnings), ``-vv`` (info), ``-vvv`` (debug).
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from kafka_share._version import __version__
from kafka_share.errors import KafkaError

__all__ = ["cli", "one_line"]


def one_line(error: BaseException) -> str:
    """The error's message on one line (multi-line config errors joined by '; ')."""
    text = str(error).strip() or type(error).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


#: Which extra brings an optional module some commands need.
_EXTRA_OF_MODULE = {
    "confluent_kafka": "testing",
    "cryptography": "testing",
    "pyspark": "spark",
    "pyarrow": "spark",
}


def _missing_module(exc: ImportError) -> str:
    module = (exc.name or "").split(".")[0]
    extra = _EXTRA_OF_MODULE.get(module)
    if extra is None:
        return one_line(exc)
    return (f"this command needs {module}, which is not installed; install it with: "
            f"pip install 'kafka-share[cli,{extra}]'")


_LOG_LEVELS = (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)


class _Root(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        from kafka_share.testing.errors import HarnessError

        restore = _configure_logging(int(ctx.params.get("verbose") or 0))
        try:
            return super().invoke(ctx)
        except ImportError as exc:
            raise click.ClickException(_missing_module(exc)) from None
        except (KafkaError, HarnessError, ValueError, OSError) as exc:
            if isinstance(exc, click.ClickException):
                raise
            raise click.ClickException(one_line(exc)) from None
        finally:
            restore()


def _configure_logging(verbosity: int) -> Callable[[], None]:
    """The library's log lines to stderr, at the level ``-v`` asks for (errors only by
    default), until the returned function restores the logger as it was.

    A handler on the ``kafka_share`` logger also keeps Python's last-resort handler
    from printing bare warnings next to the command's own one-line error.
    """
    logger = logging.getLogger("kafka_share")
    level, propagate = logger.level, logger.propagate
    handler = logging.StreamHandler(sys.stderr)  # the current stderr (tests swap it)
    handler.setFormatter(logging.Formatter("kafka-share: %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(_LOG_LEVELS[min(verbosity, len(_LOG_LEVELS) - 1)])
    logger.propagate = False

    def restore() -> None:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate

    return restore


@click.group(cls=_Root)
@click.version_option(__version__, prog_name="kafka-share")
@click.option("-v", "--verbose", count=True,
              help="Show the client's log: -v warnings, -vv info, -vvv debug.")
def cli(verbose: int) -> None:
    """kafka-share: a pure-Python client for Kafka share groups."""
    # -v is applied by _Root.invoke, around the whole command.


def _register() -> None:
    from kafka_share.commands.consume import consume
    from kafka_share.commands.demo import demo
    from kafka_share.commands.groups import groups
    from kafka_share.commands.top import top
    from kafka_share.commands.work import work
    from kafka_share.testing.cli import broker

    cli.add_command(groups)
    cli.add_command(consume)
    cli.add_command(top)
    cli.add_command(work)
    cli.add_command(broker)
    cli.add_command(demo)


_register()
