"""Driving one BrokerConnection by hand in unit tests of the network layer."""

from __future__ import annotations

import selectors
import time
from collections.abc import Callable
from typing import Any

from kafka_share._net.client import monotonic_ms
from kafka_share._net.connection import BrokerConnection, ConnectionState
from kafka_share.errors import KafkaError


class Outcome:
    """Records every call of a response handler."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, KafkaError | None]] = []

    def __call__(self, response: Any, error: KafkaError | None) -> None:
        self.calls.append((response, error))

    @property
    def done(self) -> bool:
        return bool(self.calls)

    @property
    def response(self) -> Any:
        assert len(self.calls) == 1, self.calls
        assert self.calls[0][1] is None, self.calls[0][1]
        return self.calls[0][0]

    @property
    def error(self) -> KafkaError:
        assert len(self.calls) == 1, self.calls
        err = self.calls[0][1]
        assert err is not None
        return err


def state_of(conn: BrokerConnection) -> ConnectionState:
    # A function call, so type checkers do not narrow the state across calls.
    return conn.state


def pump(conn: BrokerConnection, done: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Run ``conn``'s I/O until ``done()`` or the connection closes (fails the test
    after ``timeout_s``)."""
    sel = selectors.DefaultSelector()
    try:
        sel.register(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, "condition not reached in time"
            if state_of(conn) is ConnectionState.CLOSED:
                break
            events = selectors.EVENT_READ
            if conn.wants_write():
                events |= selectors.EVENT_WRITE
            sel.modify(conn.sock, events)
            for _key, mask in sel.select(0.05):
                now = monotonic_ms()
                if mask & selectors.EVENT_WRITE:
                    conn.on_writable(now)
                if mask & selectors.EVENT_READ and state_of(conn) is not ConnectionState.CLOSED:
                    conn.on_readable(now)
            if state_of(conn) is not ConnectionState.CLOSED:
                conn.check_timeouts(monotonic_ms())
    finally:
        sel.close()
