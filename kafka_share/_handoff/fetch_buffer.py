"""The hand-off of fetched data from the network thread to the application thread.

The network thread appends completed fetches (one per partition per ShareFetch
response) and background events; the application thread takes them in
``poll``. The application thread sleeps on the consumer's :class:`WakePipe`
(never on a ``threading`` primitive), so ``wakeup()`` can end the wait from any
thread and from a signal handler without taking a lock.

Wakeups are level-triggered: a wakeup that arrives while nobody waits is
remembered and ends the next wait at once (the lost-wakeup race: the
application checks "empty", the network thread adds data and wakes, and only
then does the application start waiting: the byte is in the pipe by then).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from kafka_share._handoff.wake import WakePipe

__all__ = ["FetchBuffer"]

T = TypeVar("T")


class FetchBuffer(Generic[T]):
    """A FIFO of completed fetches shared by exactly two threads.

    It also carries *background events* (errors, acknowledgement results) from
    the network thread, so one wait covers "data arrived", "an ack completed"
    and "wakeup() was called".
    """

    def __init__(self, wake_pipe: WakePipe | None = None) -> None:
        # Only the two threads take this lock, never a signal handler (wakeup()
        # is lock-free), so a plain Lock cannot deadlock.
        self._lock = threading.Lock()
        self._items: deque[T] = deque()
        #: how many times add_all added something: a poll that ran the loop itself
        #: tells new data from data it could not hand out yet
        self.adds = 0
        self._background: deque[object] = deque()
        self._wake = wake_pipe if wake_pipe is not None else WakePipe()
        #: a wakeup() not consumed by a wait yet (plain bool: set lock-free)
        self._woken = False
        #: the application thread is (about to be) asleep on the pipe: producers
        #: write a byte only then, so a busy consumer costs them no syscall
        self._waiting = False
        #: called (by the producer) after every addition: an event-loop shell
        #: learns there is something to wake the application for
        self.on_add: Callable[[], None] | None = None

    @property
    def wake_pipe(self) -> WakePipe:
        """The pipe the application thread sleeps on."""
        return self._wake

    def _notify(self) -> None:
        # After the item is in (under the lock): if the waiter set _waiting
        # after that, its re-check under the lock sees the item; if before, we
        # see _waiting and write.
        if self.on_add is not None:
            self.on_add()
        if self._waiting:
            self._wake.wake()

    def add_background(self, event: object) -> None:
        """Queue a background event for the application thread (network thread)."""
        with self._lock:
            self._background.append(event)
        self._notify()

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
        """Append items (the loop's thread) and wake a waiting ``poll``.

        All completed fetches of one response are added together, so a poll
        sees either none or all of them.
        """
        with self._lock:
            before = len(self._items)
            self._items.extend(items)
            added = len(self._items) != before
            if added:
                self.adds += 1
        if added:
            self._notify()

    def take(self) -> T | None:
        """Pop the oldest item, or ``None`` when empty (application thread)."""
        with self._lock:
            return self._items.popleft() if self._items else None

    def push_front(self, item: T) -> None:
        """Return a partly consumed item so the next ``poll`` continues with it."""
        with self._lock:
            self._items.appendleft(item)

    def remove_if(self, stale: Callable[[T], bool]) -> int:
        """Drop the items ``stale`` says so of; returns how many (application thread)."""
        with self._lock:
            kept = [item for item in self._items if not stale(item)]
            dropped = len(self._items) - len(kept)
            if dropped:
                self._items.clear()
                self._items.extend(kept)
            return dropped

    def replace_each(self, change: Callable[[T], T | None]) -> None:
        """Replace every queued item by ``change(item)``, dropping those it maps to
        None (application thread)."""
        with self._lock:
            kept = [c for c in map(change, self._items) if c is not None]
            self._items.clear()
            self._items.extend(kept)

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
        or the timeout passes (application thread).

        Returns True when data is available. A pending wakeup is consumed and
        ends the wait at once (returning whatever the buffer state is). Other
        bytes on the shared wake pipe (a completed future) may end the wait
        early too: callers loop and re-check.
        """
        with self._lock:
            if self._items or self._background:
                return bool(self._items)
        if self._woken:
            self._woken = False
            return self.has_data()
        if timeout_s <= 0:
            return False
        self._waiting = True
        try:
            # Stale bytes go before the check: one written after it ends the wait.
            self._wake.drain()
            with self._lock:
                ready = bool(self._items or self._background)
            if not ready and not self._woken:
                self._wake.wait(timeout_s)
        finally:
            self._waiting = False
        self._woken = False
        return self.has_data()

    def has_data(self) -> bool:
        with self._lock:
            return bool(self._items)

    def wakeup(self) -> None:
        """End the current or next ``await_not_empty`` early (any thread, or a
        signal handler: takes no lock)."""
        self._woken = True
        self._wake.wake()

    def close(self) -> None:
        """Release the wake pipe (after the network thread has stopped)."""
        self._wake.close()
