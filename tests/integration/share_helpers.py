"""Polling helpers for the ShareConsumer integration tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafka_share import ConsumerRecord, ShareConsumer


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
