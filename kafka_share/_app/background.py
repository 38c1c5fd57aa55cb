"""What the network thread reports in the background: errors to raise, and
acknowledgement completions for the commit callback."""

from __future__ import annotations

from typing import Any

from kafka_share._app.collector import FetchCollector
from kafka_share._app.in_flight import InFlightBatch
from kafka_share._handoff.events import AcknowledgementCompletion, CompletedShareFetch, ErrorEvent
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share.errors import AuthenticationError, KafkaError
from kafka_share.share.results import LocksLost, SessionReplaced


def _unrecoverable(error: KafkaError) -> KafkaError:
    """Say in a fatal error's message that the consumer must be recreated."""
    error.args = (
        f"{error.message.rstrip('.')}. The consumer cannot recover from this error: it must be "
        "closed and recreated.",
        *error.args[1:],
    )
    return error


class BackgroundEvents:
    """What the network thread reported beside the records (the fetch buffer's
    background queue), sorted on the application thread: errors to raise (the
    oldest first; a fatal one at every poll from then on), acknowledgement
    completions and lost locks for the commit callback; records of a replaced
    session or of lost locks are dropped from the collector at once."""

    def __init__(
        self,
        fetch_buffer: FetchBuffer[CompletedShareFetch],
        collector: FetchCollector[Any, Any],
        in_flight: InFlightBatch,
    ) -> None:
        self._fetch_buffer = fetch_buffer
        self._collector = collector
        self._in_flight = in_flight
        self._deferred_errors: list[KafkaError] = []
        self._fatal_error: KafkaError | None = None
        #: the fatal error was raised once: later polls wait before raising it again
        self._fatal_raised = False
        self._completions: list[AcknowledgementCompletion] = []
        #: auto-renewal gave up on these records the application holds (told
        #: at the next poll or commit: ConsumerCore._tell_locks_lost)
        self._locks_lost: list[tuple[LocksLost, list[int]]] = []

    def raise_authentication_error(self) -> None:
        """A failed authentication ends a waiting call at once: waiting out its
        deadline cannot help (the credentials are wrong, or not allowed), and a
        commit_sync would otherwise sit for default.api.timeout.ms."""
        self.drain()
        for i, error in enumerate(self._deferred_errors):
            if isinstance(error, AuthenticationError):
                del self._deferred_errors[i]
                raise error

    def drain(self) -> None:
        for event in self._fetch_buffer.take_background():
            if isinstance(event, ErrorEvent):
                if event.fatal:
                    if self._fatal_error is None:
                        self._fatal_error = _unrecoverable(event.error)
                else:
                    self._deferred_errors.append(event.error)
            elif isinstance(event, SessionReplaced):
                self._collector.drop_stale(event.node_id, event.generation)
            elif isinstance(event, LocksLost):
                self._collector.drop_lost(event)
                held = self._in_flight.held_of(event.partition, event.offsets)
                if held:
                    self._locks_lost.append((event, held))
            else:
                assert isinstance(event, AcknowledgementCompletion)
                self._completions.append(event)

    def raise_error(self) -> None:
        """Raise the oldest error the network thread reported (fatal group errors...)."""
        self.drain()
        if self._deferred_errors:
            raise self._deferred_errors.pop(0)
        if self._fatal_error is not None:
            # poll() waits before raising it again (see poll); a fresh traceback
            # each time, or re-raising one object would grow it without bound.
            self._fatal_raised = True
            raise self._fatal_error.with_traceback(None)

    def repeats_fatal(self) -> bool:
        """A fatal error was raised by an earlier poll: the next one waits before
        raising it again."""
        return self._fatal_error is not None and self._fatal_raised

    def take_completions(self) -> list[AcknowledgementCompletion]:
        """The acknowledgement completions drained so far (for the commit callback)."""
        completions, self._completions = self._completions, []
        return completions

    def take_locks_lost(self) -> list[tuple[LocksLost, list[int]]]:
        """Records the application holds whose locks auto-renewal gave up on,
        drained so far, with the offsets it holds."""
        lost, self._locks_lost = self._locks_lost, []
        return lost
