"""Which thread runs the consumer's I/O loop: a pure state machine (no clock, no threads).

The threaded consumer has two threads that could run the loop (drain events,
run the engine's round, wait in ``select``, read responses and run their
handlers): the network thread and the application thread. Exactly one runs it
at any time, so the engine still needs no locks.

While the application polls in a tight loop, its own thread runs the loop
inside ``poll`` (reading the responses that arrived while it processed the
last batch, and waiting in ``select`` when it has nothing to hand out) and
keeps it between polls. Each hand-over between two threads costs a wakeup on
the other CPU (two context switches, and on a virtual machine an
inter-processor interrupt); with the network thread reading every response,
a 1 KiB-record stream took several per response, and the response's bytes
were decoded on a CPU other than the one that read them. Running the loop on
the thread that consumes the records made ``poll`` 1.3 to 1.5 times as fast on
1 KiB records.

The network thread takes the loop back once the application has been away
from ``poll`` for :data:`AWAY_MS` (a slow handler, a pause), so heartbeats,
acknowledgements and lock renewals go out while the application works, and
whenever the application is about to block on a call the network thread
completes (``commit_sync``, ``close``, ``subscribe``): the application
releases the loop first.

States and transitions (:data:`TRANSITIONS`):

* ``NETWORK``: the network thread runs the loop (at start, after a release,
  after it reclaimed the loop).
* ``HANDING_OVER``: the application asked for the loop; the network thread
  hands it over after its current round.
* ``APPLICATION``: the application thread runs the loop, inside ``poll``.
* ``AWAY``: the application thread holds the loop between two polls; nobody
  runs it. The next poll takes it back without a hand-over.
"""

from __future__ import annotations

import enum

__all__ = ["AWAY_MS", "INSIDE_CHECK_MS", "TRANSITIONS", "LoopOwner", "LoopOwnership"]

#: The network thread takes the loop back after the application has been away
#: from ``poll`` this long: well under every deadline the loop keeps
#: (heartbeats, acknowledgement linger, lock renewals), and longer than the
#: application takes over a batch in a tight loop.
AWAY_MS = 20
#: While the application is inside ``poll`` with the loop, the network thread
#: looks again this often (it is not woken when the poll returns).
INSIDE_CHECK_MS = 100


class LoopOwner(enum.Enum):
    NETWORK = "network"
    HANDING_OVER = "handing over"
    APPLICATION = "application"
    AWAY = "away"


TRANSITIONS: dict[LoopOwner, frozenset[LoopOwner]] = {
    LoopOwner.NETWORK: frozenset({LoopOwner.HANDING_OVER}),
    # NETWORK: the application gave up waiting (the network thread stopped).
    LoopOwner.HANDING_OVER: frozenset({LoopOwner.APPLICATION, LoopOwner.NETWORK}),
    # NETWORK: released (a call the network thread completes, an interrupted
    # wait) or the loop failed on the application thread.
    LoopOwner.APPLICATION: frozenset({LoopOwner.AWAY, LoopOwner.NETWORK}),
    # NETWORK: reclaimed after AWAY_MS, or released.
    LoopOwner.AWAY: frozenset({LoopOwner.APPLICATION, LoopOwner.NETWORK}),
}


class LoopOwnership:
    """The owner of the loop and the moves between owners.

    Not thread-safe by itself: the network thread keeps it under a lock; each
    method says which thread calls it.
    """

    __slots__ = ("_left_ms", "_owner")

    def __init__(self) -> None:
        self._owner = LoopOwner.NETWORK
        #: when the application last left ``poll`` with the loop
        self._left_ms = 0.0

    @property
    def owner(self) -> LoopOwner:
        return self._owner

    def _move(self, new: LoopOwner) -> None:
        if new not in TRANSITIONS[self._owner]:
            raise RuntimeError(f"the I/O loop cannot move from {self._owner.value} to {new.value}")
        self._owner = new

    # -- the application thread ----------------------------------------------------

    def enter(self) -> bool:
        """A poll starts. True: the application runs the loop from now on (it
        held it); False: it asked the network thread, which hands the loop over
        after its current round (wait for :meth:`hand_over`)."""
        if self._owner is LoopOwner.AWAY:
            self._move(LoopOwner.APPLICATION)
            return True
        self._move(LoopOwner.HANDING_OVER)
        return False

    def cancel(self) -> bool:
        """The application stops waiting for a hand-over (the network thread has
        stopped). False if the hand-over happened meanwhile: the loop is the
        application's after all."""
        if self._owner is LoopOwner.HANDING_OVER:
            self._move(LoopOwner.NETWORK)
            return True
        return False

    def leave(self, now_ms: float) -> None:
        """A poll returns (or raises) while the application runs the loop."""
        if self._owner is LoopOwner.APPLICATION:
            self._move(LoopOwner.AWAY)
            self._left_ms = now_ms

    def release(self) -> bool:
        """The network thread runs the loop from now on. True when it did not
        before (it must be woken to notice)."""
        if self._owner in (LoopOwner.APPLICATION, LoopOwner.AWAY):
            self._move(LoopOwner.NETWORK)
            return True
        return False

    # -- the network thread ----------------------------------------------------------

    def hand_over(self) -> bool:
        """After a round: hand the loop over if the application asked for it."""
        if self._owner is LoopOwner.HANDING_OVER:
            self._move(LoopOwner.APPLICATION)
            return True
        return False

    def reclaim(self, now_ms: float) -> bool:
        """Take the loop back if the application has been away for
        :data:`AWAY_MS`. True when the network thread runs the loop now."""
        if self._owner is LoopOwner.AWAY and now_ms - self._left_ms >= AWAY_MS:
            self._move(LoopOwner.NETWORK)
        return self._owner in (LoopOwner.NETWORK, LoopOwner.HANDING_OVER)

    def check_after_ms(self, now_ms: float) -> float:
        """While the application holds the loop: how long the network thread may
        sleep before :meth:`reclaim` could succeed."""
        if self._owner is LoopOwner.AWAY:
            return max(0.0, self._left_ms + AWAY_MS - now_ms)
        return INSIDE_CHECK_MS
