"""Shared helpers for the ShareConsumer integration tests (real broker)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_share import ShareConsumer

ConsumerFactory = Callable[..., ShareConsumer[Any, Any]]


@pytest.fixture
def consumer_factory(kafka_bootstrap: str) -> Iterator[ConsumerFactory]:
    """``consumer_factory(group_id, **config)``: consumers closed at teardown."""
    made: list[ShareConsumer[Any, Any]] = []

    def make(group_id: str, /, **config: Any) -> ShareConsumer[Any, Any]:
        c: ShareConsumer[Any, Any] = ShareConsumer(
            bootstrap_servers=kafka_bootstrap, group_id=group_id, **config
        )
        made.append(c)
        return c

    yield make
    for c in made:
        try:
            c.close(timeout=5.0)
        except Exception:
            pass


# The admin and CLI tests run over PLAINTEXT and over a secured listener (admin_targets.py).
from admin_targets import target, target_listener  # noqa: E402, F401
