"""The hand-off of fetched data from the network thread to the application thread.

The network thread appends completed fetches (one per partition per ShareFetch
response); the application thread takes them in ``poll``. Waiting is on a
``threading.Condition`` so a ``poll`` blocks without spinning, and
``wakeup()`` can end that wait from any thread.

Wakeups are level-triggered: a wakeup that arrives while nobody waits is
remembered and ends the next wait at once (the lost-wakeup race: the
application checks "empty", the network thread adds data and notifies, and
only then does the application start waiting).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Generic, TypeVar

__all__ = ["FetchBuffer"]

T = TypeVar("T")


class FetchBuffer(Generic[T]):
    """A FIFO of completed fetches shared by exactly two threads.

    It also carries *background events* (errors, acknowledgement results) from
    the network thread, so one wait covers "data arrived", "an ack completed"
    and "wakeup() was called".
    """

    def __init__(self) -> None:
        # Re-entrant: wakeup() may run in a signal handler on a thread that is
        # inside one of these methods already; a plain Lock would deadlock there.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._items: deque[T] = deque()
        self._background: deque[object] = deque()
        self._woken = False

    def add_background(self, event: object) -> None:
        """Queue a background event for the application thread (network thread)."""
        with self._cond:
            self._background.append(event)
            self._cond.notify_all()

    def take_background(self) -> list[object]:
        """Take every queued background event, oldest first (application thread)."""
        with self._lock:
            events = list(self._background)
            self._background.clear()
            return events

    def has_background(self) -> bool:
        with self._lock:
            return bool(self._background)

    def add_all(self, items: Iterable[T]) -> None:
        """Append items (network thread) and wake a waiting ``poll``.

        All completed fetches of one response are added together, so a poll
        sees either none or all of them.
        """
        with self._cond:
            before = len(self._items)
            self._items.extend(items)
            if len(self._items) != before:
                self._cond.notify_all()

    def take(self) -> T | None:
        """Pop the oldest item, or ``None`` when empty (application thread)."""
        with self._lock:
            return self._items.popleft() if self._items else None

    def push_front(self, item: T) -> None:
        """Return a partly consumed item so the next ``poll`` continues with it."""
        with self._lock:
            self._items.appendleft(item)

    def drain(self) -> list[T]:
        with self._lock:
            items = list(self._items)
            self._items.clear()
            return items

    def is_empty(self) -> bool:
        with self._lock:
            return not self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def await_not_empty(self, timeout_s: float) -> bool:
        """Block until data or a background event arrives, ``wakeup()`` is called,
        or the timeout passes.

        Returns True when data is available. A pending wakeup is consumed and
        ends the wait at once (returning whatever the buffer state is).
        """
        with self._cond:
            if self._items or self._background:
                return bool(self._items)
            if self._woken:
                self._woken = False
                return bool(self._items)
            if timeout_s > 0:
                self._cond.wait(timeout_s)
            self._woken = False
            return bool(self._items)

    def wakeup(self) -> None:
        """End the current or next ``await_not_empty`` early (any thread)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()
