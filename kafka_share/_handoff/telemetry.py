"""The client instance id, handed from the I/O loop to the application.

Telemetry (KIP-714) settles once: the cluster assigns the client an instance id,
or telemetry stops (the cluster does not offer it, or refused this client).
The loop's holder settles a :class:`TelemetryIdentity` then; ``client_instance_id``
waits for that from any thread (an ``Event``), or from the event loop (a
callback the asyncio facade registers). It needs no ownership of the consumer,
as in Java.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from kafka_share.errors import KafkaError

__all__ = ["TelemetryIdentity"]


class TelemetryIdentity:
    """Written once by the loop's holder, read by the application."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.settled = threading.Event()
        #: the id the cluster assigned (None: not yet, or telemetry stopped)
        self.instance_id: uuid.UUID | None = None
        #: why telemetry stopped before an id was known
        self.error: KafkaError | None = None
        self._callbacks: list[Callable[[], None]] = []

    def settle(self, instance_id: uuid.UUID | None, error: KafkaError | None) -> None:
        """The id is known, or telemetry stopped with ``error`` (first call wins)."""
        with self._lock:
            if self.settled.is_set():
                return
            self.instance_id = instance_id
            self.error = error
            self.settled.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def when_settled(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once settled (now, if it is), on the settling thread."""
        with self._lock:
            if not self.settled.is_set():
                self._callbacks.append(callback)
                return
        callback()
