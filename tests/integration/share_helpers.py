"""Polling helpers for the ShareConsumer and AsyncShareConsumer integration tests."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from kafka_share import ConsumerRecord, ShareConsumer
from kafka_share.aio import AsyncShareConsumer
from kafka_share.testing import LocalKafkaCluster
from kafka_share.testing.proxy import TcpProxy

T = TypeVar("T")


def poll_until(
    consumer: ShareConsumer[Any, Any],
    done: Callable[[list[ConsumerRecord[Any, Any]]], bool],
    *,
    timeout_s: float = 30.0,
    poll_s: float = 0.5,
    on_batch: Callable[[list[ConsumerRecord[Any, Any]]], None] | None = None,
) -> list[ConsumerRecord[Any, Any]]:
    """Poll until ``done(all_records_so_far)`` or the timeout; returns what was seen."""
    seen: list[ConsumerRecord[Any, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = list(consumer.poll(poll_s))
        if on_batch is not None:
            on_batch(batch)
        seen.extend(batch)
        if done(seen):
            return seen
    return seen


def poll_for(consumer: ShareConsumer[Any, Any], seconds: float) -> list[ConsumerRecord[Any, Any]]:
    """Everything ``consumer`` receives during ``seconds`` (implicit mode)."""
    return poll_until(consumer, lambda _: False, timeout_s=seconds)


async def apoll_until(
    consumer: AsyncShareConsumer[Any, Any],
    done: Callable[[list[ConsumerRecord[Any, Any]]], bool],
    *,
    timeout_s: float = 30.0,
    poll_s: float = 0.5,
) -> list[ConsumerRecord[Any, Any]]:
    """``poll_until`` for an ``AsyncShareConsumer``."""
    seen: list[ConsumerRecord[Any, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen.extend(await consumer.poll(poll_s))
        if done(seen):
            return seen
    return seen


async def apoll_for(
    consumer: AsyncShareConsumer[Any, Any], seconds: float
) -> list[ConsumerRecord[Any, Any]]:
    """Everything ``consumer`` receives during ``seconds`` (implicit mode)."""
    return await apoll_until(consumer, lambda _: False, timeout_s=seconds)


def run_loop(main: Coroutine[Any, Any, T], loop: str = "asyncio") -> T:
    """Run ``main`` on a fresh event loop: the default one, or uvloop."""
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.run(main)  # type: ignore[no-any-return]
    return asyncio.run(main)


@contextmanager
def proxied_cluster(seed: int) -> Iterator[tuple[LocalKafkaCluster, TcpProxy]]:
    """A single-node cluster reached only through a :class:`TcpProxy` advertised as
    its address (so every client connection can be cut), stopped on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        broker_port = int(s.getsockname()[1])
    proxy = TcpProxy(("127.0.0.1", broker_port), max_lifetime_s=600, seed=seed).start()
    cluster = LocalKafkaCluster(
        num_nodes=1,
        broker_ports=[broker_port],
        # Clients learn the broker's address from metadata: advertise the proxy.
        extra_config={"advertised.listeners": f"PLAINTEXT://{proxy.bootstrap}"},
    )
    try:
        cluster.start()
        yield cluster, proxy
    finally:
        cluster.stop()
        proxy.stop()
