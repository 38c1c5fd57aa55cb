"""When to send the next Metadata request: the refresh policy, sans-IO.

Metadata is refreshed when it is older than ``metadata.max.age.ms`` or when some
part of the engine asked for it (an unknown leader, NOT_LEADER_OR_FOLLOWER, a
topic id the cache does not know). Asking is cheap and happens from many places,
so the policy decides how often asking turns into a request:

* one Metadata request in flight at a time;
* after a failed request, wait ``retry.backoff.ms * 2**n`` (jittered, capped at
  ``retry.backoff.max.ms``) before the next (Java's ``Metadata`` does the same);
* after a successful answer, a *requested* refresh still waits the same
  exponential backoff, counted over consecutive requested refreshes: with one
  dead partition leader among live brokers, every failed ShareFetch asks for
  metadata that cannot yet say anything new (the controller has not noticed the
  broker is gone), and without this each wake-up would send another request.
  The streak resets once the metadata has been left alone for a full
  ``retry.backoff.max.ms``.
"""

from __future__ import annotations

from collections.abc import Callable

from kafka_share.share.backoff import ExponentialBackoff

__all__ = ["MetadataRefresh"]


class MetadataRefresh:
    """When a wanted Metadata request may go out (the cache says whether one is wanted).

    Args:
        retry_backoff_ms: ``retry.backoff.ms``.
        retry_backoff_max_ms: ``retry.backoff.max.ms``.
        random_source: jitter source (tests inject one).
    """

    def __init__(
        self,
        *,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        random_source: Callable[[], float] | None = None,
    ) -> None:
        self._backoff = ExponentialBackoff(
            retry_backoff_ms, retry_backoff_max_ms, random_source=random_source
        )
        self._quiet_ms = 2 * max(retry_backoff_max_ms, retry_backoff_ms)
        self._in_flight = False
        #: earliest time the next request may go (after a failure or within a streak)
        self._not_before_ms = 0
        self._failures = 0
        self._streak = 0
        self._last_send_ms: int | None = None

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    @property
    def failures(self) -> int:
        """Consecutive failed Metadata requests."""
        return self._failures

    def may_send(self, now_ms: int) -> bool:
        """True if a wanted Metadata request may be sent now."""
        return not self._in_flight and now_ms >= self._not_before_ms

    def time_until_allowed_ms(self, now_ms: int) -> int | None:
        """Milliseconds until :meth:`may_send`; None while a request is in flight
        (its answer or failure wakes the loop)."""
        if self._in_flight:
            return None
        return max(0, self._not_before_ms - now_ms)

    def allow_now(self) -> None:
        """Let the next wanted request go at once (the cache was just reset)."""
        self._not_before_ms = 0

    def on_send(self, now_ms: int) -> None:
        self._in_flight = True
        if self._last_send_ms is not None and now_ms - self._last_send_ms > self._quiet_ms:
            self._streak = 0  # metadata was left alone for a while: healthy again
        self._last_send_ms = now_ms

    def on_success(self, now_ms: int) -> None:
        self._in_flight = False
        self._failures = 0
        # The next refresh (asked for by a failing fetch, say) waits a growing
        # while; one due to metadata.max.age.ms is far away anyway.
        self._not_before_ms = now_ms + self._backoff.backoff_ms(self._streak)
        self._streak += 1

    def on_failure(self, now_ms: int) -> None:
        self._in_flight = False
        self._not_before_ms = now_ms + self._backoff.backoff_ms(self._failures)
        self._failures += 1
