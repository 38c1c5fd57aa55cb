"""The application thread's one way to sleep: a wake pipe.

Every wait of the application thread (``poll`` waiting for records, a blocking
call waiting for its completable event) is a ``select`` on the read end of one
pipe. Whatever may end such a wait writes a byte to the write end:

* the network thread, after it added data or a background event to the fetch
  buffer, or completed a completable event's future;
* :meth:`ShareConsumer.wakeup`, possibly from a signal handler.

Writing a byte takes no lock, so it is safe in a signal handler that runs on
the very thread that is waiting (a lock held by that thread would deadlock it,
which is why ``wakeup()`` never touches a ``threading`` primitive or a
``Future``). The write is non-blocking: a full pipe already guarantees a
wakeup, so ``EAGAIN`` is ignored.

A pipe is level-triggered: a byte written before the wait begins ends it at
once, so a wakeup cannot be lost between "check the condition" and "wait".
Waiters therefore *drain, check their condition, wait* in a loop: draining
before the check (never after the wait) means a byte written after the check is
still there for ``select``, and waking costs no ``read`` on the way out (each
system call hands the GIL over, which can cost milliseconds while the network
thread runs).
"""

from __future__ import annotations

import os
import select

__all__ = ["WakePipe"]

#: read this many bytes per drain call; a handful is the usual backlog
_DRAIN_CHUNK = 4096


class WakePipe:
    """A self-pipe: :meth:`wake` from any thread or signal handler, :meth:`wait`
    from the application thread only."""

    __slots__ = ("_closed", "_read_fd", "_write_fd")

    def __init__(self) -> None:
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._closed = False

    def wake(self) -> None:
        """Make the current or next :meth:`wait` return at once. Lock-free."""
        if self._closed:
            return  # the descriptor number may already belong to another file
        try:
            os.write(self._write_fd, b"\x00")
        except OSError:
            # EAGAIN: the pipe is full, a wakeup is already pending.
            # EBADF: closed with the consumer; nobody waits any more.
            pass

    def wait(self, timeout_s: float) -> bool:
        """Wait until woken or ``timeout_s`` passes. Does not drain: call
        :meth:`drain` before checking the condition waited for.

        Returns True if woken. A signal interrupting the ``select`` runs its
        handler and the wait resumes with the remaining time (PEP 475); a
        handler that calls :meth:`wake` therefore ends it at once.
        """
        if self._closed:
            return True
        try:
            readable, _, _ = select.select([self._read_fd], [], [], max(0.0, timeout_s))
        except (OSError, ValueError):
            return True  # closed under us: let the caller re-check its state
        return bool(readable)

    def drain(self) -> None:
        """Discard pending wake bytes (the waiter re-checks its condition after)."""
        try:
            while len(os.read(self._read_fd, _DRAIN_CHUNK)) == _DRAIN_CHUNK:
                pass
        except OSError:
            pass  # EAGAIN: empty

    def close(self) -> None:
        """Release both file descriptors. Later :meth:`wake` calls are no-ops."""
        if self._closed:
            return
        self._closed = True
        for fd in (self._read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass
