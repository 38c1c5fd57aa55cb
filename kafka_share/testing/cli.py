"""``kafka-share broker``: fetch the broker jars and run a local dev broker.

Importing this module must work without confluent-kafka; everything heavier
than click is imported inside the commands.
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from kafka_share.testing.maven import BrokerDistribution

__all__ = ["broker"]

_STOP_GRACE_S = 20.0


def _state_dir() -> Path:
    from kafka_share.testing.maven import cache_root

    return cache_root() / "dev-broker"


def _state_file() -> Path:
    return _state_dir() / "state.json"


def _pid_is_broker(pid: int) -> bool:
    """Whether ``pid`` is alive and still a Kafka broker (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc (macOS): trust the pid
    return b"kafka.Kafka" in cmdline


def _read_state() -> dict[str, Any] | None:
    """The dev broker's state if it is running; removes a stale state file."""
    path = _state_file()
    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not _pid_is_broker(int(state.get("pid", 0))):
        path.unlink(missing_ok=True)
        return None
    return state


@click.group()
def broker() -> None:
    """A local Apache Kafka broker (KRaft, share groups enabled) for development and tests.

    The broker is assembled from Maven Central jars (needs Java 17+ and Maven on
    first use) into the per-user cache: KAFKA_SHARE_CACHE_DIR, else
    $XDG_CACHE_HOME/kafka-share, else ~/.cache/kafka-share.
    """


def _fetch_with_progress(kafka_version: str | None) -> BrokerDistribution:
    """The broker jars, downloaded on first use with each file reported (on a
    terminal, one status line rewritten in place)."""
    from kafka_share.testing.errors import HarnessError
    from kafka_share.testing.local import default_kafka_version
    from kafka_share.testing.maven import ensure_kafka_libs

    tty = sys.stderr.isatty()
    last = [0]

    def show(message: str) -> None:
        if tty and message.startswith("  downloaded "):
            pad = " " * max(0, last[0] - len(message))
            click.echo(f"\r{message}{pad}", err=True, nl=False)
            last[0] = len(message)
            return
        if tty and last[0]:
            click.echo(err=True)
            last[0] = 0
        click.echo(message, err=True)

    try:
        return ensure_kafka_libs(kafka_version or default_kafka_version(), progress=show)
    except HarnessError as exc:
        raise click.ClickException(str(exc)) from exc


@broker.command()
@click.option("--kafka-version", default=None, help="Kafka release (default: 4.4.0).")
def fetch(kafka_version: str | None) -> None:
    """Download and assemble the broker jars into the cache (no-op when present)."""
    started = time.monotonic()
    dist = _fetch_with_progress(kafka_version)
    jars = sum(1 for _ in dist.libs_dir.iterdir())
    click.echo(
        f"Kafka {dist.version} broker jars: {dist.libs_dir} "
        f"({jars} jars, {dist.size_bytes() / 1e6:.1f} MB, {time.monotonic() - started:.1f} s)"
    )


def _check_share_version(share_version: int, kafka_version: str | None, *, no_share: bool) -> None:
    """Refuse ``--share-version`` with ``--no-share``, or at a level the release
    lacks: before any download."""
    if no_share:
        raise click.UsageError(
            "--share-version cannot be combined with --no-share (use --share-version 0)"
        )
    from kafka_share.testing.local import default_kafka_version
    from kafka_share.testing.versions import parse_kafka_version

    version = parse_kafka_version(kafka_version or default_kafka_version())
    version.check_share_version(share_version)


@broker.command()
@click.option("--port", type=int, default=None, help="Client port (default: a free one).")
@click.option("--kafka-version", default=None, help="Kafka release (default: 4.4.0).")
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra broker property; repeatable.",
)
@click.option("--no-share", is_flag=True, help="Format with share groups disabled.")
@click.option(
    "--share-version",
    type=click.IntRange(0, 2),
    default=None,
    help="Format at this share.version level (2: share-group dead-letter queues, Kafka "
    "4.4+; default 1).",
)
@click.option("--foreground", is_flag=True, help="Stay attached; Ctrl+C stops the broker.")
@click.option(
    "--secure",
    is_flag=True,
    help="Add SSL (mutual TLS), SASL_PLAINTEXT, SASL_SSL, REAUTH and OIDC listeners with "
    "ACLs and per-run certificates, and print which listener is which (needs the "
    "cryptography package).",
)
def start(
    port: int | None,
    kafka_version: str | None,
    configs: tuple[str, ...],
    no_share: bool,
    foreground: bool,
    secure: bool = False,
    share_version: int | None = None,
) -> None:
    """Start a dev broker in the background and print its bootstrap servers.

    Every start begins with empty data. Stop it with `kafka-share broker stop`.
    """
    from kafka_share.testing.errors import HarnessError
    from kafka_share.testing.local import LocalKafkaCluster

    if share_version is not None:
        _check_share_version(share_version, kafka_version, no_share=no_share)
    running = _read_state()
    if running is not None:
        raise click.ClickException(
            f"a dev broker is already running at {running['bootstrap_servers']} "
            f"(pid {running['pid']}); run `kafka-share broker stop` first"
        )
    extra = _key_values(configs)
    state_dir = _state_dir()
    state_dir.mkdir(parents=True, exist_ok=True)
    _fetch_with_progress(kafka_version)
    secured = None
    if secure:
        from kafka_share.testing.secure import SecureKafkaCluster

        secured = SecureKafkaCluster(
            kafka_version=kafka_version,
            work_dir=state_dir / "work",
            die_with_parent=foreground,
            share_enabled=not no_share,
            share_version=share_version,
            extra_config=extra,
            broker_port=port,
        )
        click.echo("Starting a secured Kafka broker...", err=True)
        try:
            secured.start()
        except HarnessError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(secured.describe(), err=True)
    cluster = secured.cluster if secured is not None else LocalKafkaCluster(
        kafka_version=kafka_version,
        extra_config=extra,
        share_enabled=not no_share,
        share_version=share_version,
        work_dir=state_dir / "work",
        broker_ports=[port] if port is not None else None,
        # In the background the broker must outlive this command.
        die_with_parent=foreground,
    )
    if secured is None:
        click.echo(f"Starting Kafka {cluster.kafka_version}...", err=True)
        try:
            cluster.start()
        except HarnessError as exc:
            raise click.ClickException(str(exc)) from exc
    state = _write_state(cluster, secured)
    if not foreground:
        cluster.detach()
        click.echo(cluster.bootstrap_servers)
        return
    click.echo(f"{cluster.bootstrap_servers}  (Ctrl+C to stop; log: {state['log']})")
    try:
        while cluster.pids:
            time.sleep(0.5)
        click.echo("The broker exited:\n" + cluster.log_tail(40), err=True)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        _state_file().unlink(missing_ok=True)


def _key_values(configs: tuple[str, ...]) -> dict[str, str]:
    """``--config KEY=VALUE`` options as a dict."""
    extra: dict[str, str] = {}
    for item in configs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--config")
        extra[key.strip()] = value.strip()
    return extra


def _write_state(cluster: Any, secured: Any) -> dict[str, Any]:
    """Record the running broker for ``broker stop``/``status`` (atomically)."""
    state: dict[str, Any] = {
        "pid": cluster.pids[1],
        "bootstrap_servers": cluster.bootstrap_servers,
        "kafka_version": cluster.kafka_version,
        "work_dir": str(cluster.work_dir),
        "log": str(cluster.log_path(1)),
        "share_enabled": cluster.share_enabled,
    }
    if secured is not None and secured.pki is not None:
        state["listeners"] = secured.listeners
        state["ca_file"] = str(secured.pki.ca_file)
        state["client_cert"] = str(secured.pki.client_cert)
        state["client_key"] = str(secured.pki.client_key)
    tmp = _state_file().with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    tmp.rename(_state_file())
    return state


@broker.command()
def stop() -> None:
    """Stop the dev broker started by `kafka-share broker start`."""
    state = _read_state()
    if state is None:
        click.echo("No dev broker is running.")
        return
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE_S
    while _pid_is_broker(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _pid_is_broker(pid):
        os.kill(pid, signal.SIGKILL)
        click.echo(f"The broker did not stop within {_STOP_GRACE_S:.0f} s; killed it.", err=True)
    _state_file().unlink(missing_ok=True)
    click.echo(f"Stopped the dev broker at {state['bootstrap_servers']} (pid {pid}).")


@broker.command()
def status() -> None:
    """Say whether the dev broker is running (exit status 1 when it is not)."""
    state = _read_state()
    if state is None:
        click.echo("No dev broker is running.")
        raise SystemExit(1)
    click.echo(
        f"Kafka {state['kafka_version']} running at {state['bootstrap_servers']} "
        f"(pid {state['pid']}, share groups {'on' if state['share_enabled'] else 'off'})\n"
        f"log: {state['log']}"
    )
    for name, address in (state.get("listeners") or {}).items():
        click.echo(f"{name:<15} {address}")
    if state.get("ca_file"):
        click.echo(f"CA file: {state['ca_file']}")
