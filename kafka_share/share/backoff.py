"""Exponential backoff with jitter, and the per-request retry state built on it.

Follows Java's ``ExponentialBackoff`` and ``RequestState``: the n-th retry waits
``retry_backoff_ms * 2**n`` (capped at ``retry_backoff_max_ms``), multiplied by
a random factor in ``[1 - jitter, 1 + jitter)``. Nothing sleeps: the state says
how long is left, given ``now_ms``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Final

__all__ = ["RETRY_BACKOFF_JITTER", "ExponentialBackoff", "RequestState"]

#: Java's ``CommonClientConfigs.RETRY_BACKOFF_JITTER``.
RETRY_BACKOFF_JITTER: Final = 0.2
#: Java's ``CommonClientConfigs.RETRY_BACKOFF_EXP_BASE``.
RETRY_BACKOFF_MULTIPLIER: Final = 2


class ExponentialBackoff:
    """``initial_ms * multiplier**attempts`` with jitter, capped at ``max_ms``.

    Args:
        initial_ms: the first wait (``retry.backoff.ms``).
        max_ms: the cap (``retry.backoff.max.ms``).
        multiplier: growth per attempt.
        jitter: relative jitter; 0 disables it.
        random_source: returns a float in ``[0, 1)``; injectable for tests.
    """

    __slots__ = ("_exp_max", "_initial_ms", "_jitter", "_max_ms", "_multiplier", "_random")

    def __init__(
        self,
        initial_ms: int,
        max_ms: int,
        multiplier: float = RETRY_BACKOFF_MULTIPLIER,
        jitter: float = RETRY_BACKOFF_JITTER,
        random_source: Callable[[], float] | None = None,
    ) -> None:
        if initial_ms < 0 or max_ms < 0:
            raise ValueError(
                f"backoff times must be >= 0, got initial_ms={initial_ms}, max_ms={max_ms}"
            )
        if multiplier < 1:
            raise ValueError(f"backoff multiplier must be >= 1, got {multiplier}")
        if not 0 <= jitter < 1:
            raise ValueError(f"backoff jitter must be in [0, 1), got {jitter}")
        self._initial_ms = initial_ms
        self._max_ms = max_ms
        self._multiplier = multiplier
        self._jitter = jitter
        self._random = random_source or random.random
        if max_ms > initial_ms and multiplier > 1:
            self._exp_max = math.log(max_ms / max(initial_ms, 1)) / math.log(multiplier)
        else:
            self._exp_max = 0.0

    def backoff_ms(self, attempts: int) -> int:
        """The wait after ``attempts`` consecutive failures (0 = the first retry)."""
        exponent = min(float(max(attempts, 0)), self._exp_max)
        term = self._initial_ms * self._multiplier**exponent
        if self._jitter > 0:
            term *= 1 - self._jitter + 2 * self._jitter * self._random()
        return min(int(term), self._max_ms)


class RequestState:
    """Retry bookkeeping for one kind of request (Java ``RequestState``).

    At most one request is in flight. After a failure the next send waits for
    the backoff, counted from the failure; a success clears the backoff.
    """

    __slots__ = ("_attempts", "_backoff", "_backoff_ms", "_in_flight", "_last_received_ms")

    def __init__(self, backoff: ExponentialBackoff) -> None:
        self._backoff = backoff
        self._attempts = 0
        self._backoff_ms = 0
        self._last_received_ms: int | None = None
        self._in_flight = False

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    @property
    def attempts(self) -> int:
        """Consecutive failures since the last success or reset."""
        return self._attempts

    def reset(self) -> None:
        """Forget failures and any request in flight: the next send may go at once."""
        self._attempts = 0
        self._backoff_ms = 0
        self._last_received_ms = None
        self._in_flight = False

    def remaining_backoff_ms(self, now_ms: int) -> int:
        """Milliseconds until the backoff after the last failure has passed (>= 0)."""
        if self._last_received_ms is None or self._backoff_ms == 0:
            return 0
        elapsed = max(now_ms - self._last_received_ms, 0)
        return max(self._backoff_ms - elapsed, 0)

    def can_send(self, now_ms: int) -> bool:
        """True if nothing is in flight and the backoff has passed."""
        return not self._in_flight and self.remaining_backoff_ms(now_ms) == 0

    def on_send(self, now_ms: int) -> None:
        """A request went out."""
        del now_ms  # kept for symmetry with the other callbacks
        self._in_flight = True

    def on_success(self, now_ms: int) -> None:
        """The request succeeded: no backoff for the next one."""
        self._in_flight = False
        self._last_received_ms = now_ms
        self._attempts = 0
        self._backoff_ms = 0

    def on_failure(self, now_ms: int) -> None:
        """The request failed: back off before the next one."""
        self._in_flight = False
        self._last_received_ms = now_ms
        self._backoff_ms = self._backoff.backoff_ms(self._attempts)
        self._attempts += 1
