"""What the threaded and the asyncio worker share: outcomes, arguments, the
consumer's settings, limits, the tally, retry policies and signal handlers."""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any, Final, Generic, TypeVar

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.config import ShareConsumerConfig, parse_config
from kafka_share.metrics import WorkerMetrics
from kafka_share.models import AcknowledgeType, ConsumerRecord

K = TypeVar("K")
V = TypeVar("V")

#: How long running handlers may finish once a stop is asked for, by default:
#: with the consumer's close (10 s at most), within Kubernetes' default grace
#: period of 30 s between SIGTERM and SIGKILL.
DEFAULT_STOP_TIMEOUT_S: Final = 15.0
#: Outcomes decided while a poll's records are being handled reach the broker at
#: least this often (not only with the next poll), so a worker that is killed
#: hands back only the records it had not finished.
ACK_EVERY_S: Final = 0.2
#: Longest single wait of a poll: limits and stops are looked at in between.
POLL_S: Final = 1.0
#: Before its first record, an idle timeout waits at least this long by default:
#: joining the group and being assigned partitions takes a few seconds.
FIRST_RECORD_TIMEOUT_S: Final = 10.0
COMMIT_TIMEOUT_S: Final = 30.0
CLOSE_TIMEOUT_S: Final = 10.0
#: The least ``max.poll.records`` a worker sets when the configuration does not
#: say (Kafka's default): a cap, the worker asks each poll for fewer (BatchSize).
DEFAULT_MAX_POLL_RECORDS: Final = 500
#: A poll's records take about this long to handle, once the handler time is known:
#: a poll costs a round trip or so (measured: 5-50 ms, even with the records
#: fetched ahead), and handlers idle meanwhile, so a poll of 4 x 16 records of a
#: 20 ms handler (80 ms) reached 0.67-0.78 of the ideal rate, 16 x 16 (320 ms) 0.97.
TARGET_BATCH_S: Final = 0.3
#: Least handler waves per poll: the last wave of a poll leaves threads idle while
#: its slowest handler runs, so a poll of one wave would waste most of them.
MIN_WAVES: Final = 4

#: The signals that stop a worker run with ``handle_signals=True``.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

_OUTCOME_NAMES: Final = {
    AcknowledgeType.ACCEPT: "accepted",
    AcknowledgeType.RELEASE: "released",
    AcknowledgeType.REJECT: "rejected",
}


@attrs_repr
@attrs.frozen(repr=False)
class Handled(Generic[K, V]):
    """One record whose handler ran to its end, and the outcome acknowledged.

    ``outcome`` is ACCEPT (the handler returned ``result``), RELEASE (it raised
    one of the worker's ``retryable`` types: the record is delivered again, to
    any member, with ``delivery_count + 1``) or REJECT (it raised anything else:
    a poison record, never delivered again; archived, or sent to the group's
    dead-letter topic where one is configured).
    """

    record: ConsumerRecord[K, V]
    outcome: AcknowledgeType
    result: object = None
    error: BaseException | None = None
    #: Wall-clock time of the handler call (retries in place included), seconds.
    handler_time_s: float = 0.0

    @property
    def error_text(self) -> str | None:
        """The error as ``"Type: message"`` (or ``"Type"``), None when there was none."""
        return None if self.error is None else describe(self.error)


@attrs_repr
@attrs.frozen(repr=False)
class WorkerSummary:
    """What one :meth:`run` of a worker did."""

    #: Records handled per outcome (each record counts once per delivery).
    accepted: int
    released: int
    rejected: int
    #: Records released unhandled because the worker was stopping: not started
    #: yet, or still running when the stop's bound ran out (``abandoned``).
    released_on_stop: int
    #: Handlers still running when the worker gave up waiting for them (their
    #: records released, so possibly handled twice: once by the abandoned call).
    abandoned: int
    #: Why the run ended: ``"SIGTERM"``, ``"SIGINT"``, ``"stop()"``,
    #: ``"max_records"``, ``"max_seconds"`` or ``"idle_timeout_s"``.
    stopped_by: str

    @property
    def handled(self) -> int:
        """Records whose handler ran to an outcome."""
        return self.accepted + self.released + self.rejected


class Tally:
    """The counts of a run, and the worker's metrics, kept together."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics
        self.counts = dict.fromkeys(_OUTCOME_NAMES.values(), 0)
        self.released_on_stop = 0
        self.abandoned = 0
        self.stopped_by = ""

    def handled(self, outcome: AcknowledgeType, handler_time_s: float) -> None:
        name = _OUTCOME_NAMES[outcome]
        self.counts[name] += 1
        self.metrics.record_handled(name, handler_time_s * 1000.0, now_ms())

    def released_unhandled(self, records: int, *, abandoned: bool = False) -> None:
        self.released_on_stop += records
        if abandoned:
            self.abandoned += records
        self.metrics.record_released_on_stop(records, now_ms())

    def summary(self) -> WorkerSummary:
        return WorkerSummary(
            accepted=self.counts["accepted"], released=self.counts["released"],
            rejected=self.counts["rejected"], released_on_stop=self.released_on_stop,
            abandoned=self.abandoned, stopped_by=self.stopped_by,
        )


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def describe(exc: BaseException) -> str:
    """``"Type: message"``, or the type's name alone for an empty message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def outcome_of(exc: BaseException, retryable: tuple[type[BaseException], ...]) -> AcknowledgeType:
    """The acknowledgement of a record whose handler raised ``exc``.

    Not an ``Exception`` (``SystemExit`` from a handler, say): RELEASE, and the
    worker stops (the caller sees to that); the record was not judged poison.
    """
    if isinstance(exc, retryable) or not isinstance(exc, Exception):
        return AcknowledgeType.RELEASE
    return AcknowledgeType.REJECT


@attrs_repr
@attrs.frozen(repr=False)
class Limits:
    """When a run ends by itself (None: no such limit)."""

    max_records: int | None = None
    max_seconds: float | None = None
    idle_timeout_s: float | None = None
    first_record_timeout_s: float = FIRST_RECORD_TIMEOUT_S

    def check(self) -> None:
        """Each limit checked, with an error that names it."""
        if self.max_records is not None and (
            isinstance(self.max_records, bool) or not isinstance(self.max_records, int)
            or self.max_records < 1
        ):
            raise ValueError(
                f"max_records must be a positive int or None, got {self.max_records!r}"
            )
        for name in ("max_seconds", "idle_timeout_s"):
            value = getattr(self, name)
            if value is not None and not _positive_number(value):
                raise ValueError(f"{name} must be a positive number or None, got {value!r}")
        if not (_positive_number(self.first_record_timeout_s) or self.first_record_timeout_s == 0):
            raise ValueError(
                f"first_record_timeout_s must be a number >= 0, got {self.first_record_timeout_s!r}"
            )


class Clock:
    """A run's limits against the time that passed and the records handled."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.started = self.last_records = time.monotonic()
        self.handed_out = 0  # records polled (each is handled or released)
        self._idle_timeout_s = (
            None if limits.idle_timeout_s is None
            else max(limits.idle_timeout_s, limits.first_record_timeout_s)
        )

    def got_records(self, count: int) -> None:
        self.handed_out += count
        self.last_records = time.monotonic()
        self._idle_timeout_s = self.limits.idle_timeout_s

    def wanted(self) -> int | None:
        """Records still wanted (None: no limit)."""
        limit = self.limits.max_records
        return None if limit is None else limit - self.handed_out

    def ended(self) -> tuple[str | None, float]:
        """Which limit was reached (or None) and how long a poll may wait now."""
        now = time.monotonic()
        wait_s = POLL_S
        if self.limits.max_records is not None and self.handed_out >= self.limits.max_records:
            return "max_records", 0.0
        if self.limits.max_seconds is not None:
            left = self.limits.max_seconds - (now - self.started)
            if left <= 0:
                return "max_seconds", 0.0
            wait_s = min(wait_s, left)
        if self._idle_timeout_s is not None:
            left = self._idle_timeout_s - (now - self.last_records)
            if left <= 0:
                return "idle_timeout_s", 0.0
            wait_s = min(wait_s, left)
        return None, wait_s


class BatchSize:
    """How many records each poll asks for: ``concurrency`` handlers times enough
    waves that the poll's records take about TARGET_BATCH_S (at least MIN_WAVES,
    at most ``max.poll.records``).

    Fast handlers get large polls, so the poll's own cost is spread thin; slow
    ones get MIN_WAVES, so no record waits long locked behind the others (its
    lock is renewed only up to ``share.auto.renew.max.ms``)."""

    def __init__(self, concurrency: int, max_poll_records: int) -> None:
        self.concurrency = concurrency
        self.cap = max_poll_records
        self._handler_s: float | None = None  # moving average

    def handled(self, handler_time_s: float) -> None:
        avg = self._handler_s
        self._handler_s = handler_time_s if avg is None else avg + (handler_time_s - avg) / 16

    def records(self, wanted: int | None) -> int:
        """Records for the next poll (``wanted``: how many are still wanted, None: any)."""
        waves = MIN_WAVES
        if self._handler_s is not None:
            waves = max(MIN_WAVES, math.ceil(TARGET_BATCH_S / max(self._handler_s, 1e-6)))
        size = min(self.cap, self.concurrency * waves)
        return size if wanted is None else max(1, min(size, wanted))


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def check_arguments(
    handler: object,
    topics: Sequence[str],
    concurrency: int,
    retryable: tuple[type[BaseException], ...],
    stop_timeout_s: float,
) -> None:
    """A worker's arguments, each checked with an error that names it."""
    if not callable(handler):
        raise ValueError(f"handler must be callable, got {handler!r}")
    if isinstance(topics, str) or not topics or not all(
        isinstance(t, str) and t.strip() for t in topics
    ):
        raise ValueError(f"topics must be a non-empty list of topic names, got {topics!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive int, got {concurrency!r}")
    if not isinstance(retryable, tuple) or not all(
        isinstance(t, type) and issubclass(t, BaseException) for t in retryable
    ):
        raise ValueError(f"retryable must be a tuple of exception types, got {retryable!r}")
    if not (_positive_number(stop_timeout_s) or stop_timeout_s == 0):
        raise ValueError(f"stop_timeout_s must be a number >= 0, got {stop_timeout_s!r}")


def worker_config(config: Mapping[str, object], concurrency: int, who: str) -> dict[str, object]:
    """The consumer settings of a worker: the caller's, with explicit acknowledgement
    (refused if set otherwise) and the defaults a pool of slow handlers needs."""
    cfg: dict[str, object] = {str(k): v for k, v in config.items()}
    if "share_acknowledgement_mode" in cfg:  # the keyword spelling of the same key
        cfg["share.acknowledgement.mode"] = cfg.pop("share_acknowledgement_mode")
    mode = str(cfg.get("share.acknowledgement.mode", "explicit"))
    if mode != "explicit":
        raise ValueError(
            f"config share.acknowledgement.mode cannot be set: {who} acknowledges "
            "each record explicitly, by outcome"
        )
    cfg["share.acknowledgement.mode"] = "explicit"
    # record_limit: nothing is acquired before the worker asks for it, so records
    # never wait locked in a buffer behind a slow handler.
    _default(cfg, "share.acquire.mode", "record_limit")
    _default(cfg, "max.poll.records", max(DEFAULT_MAX_POLL_RECORDS, MIN_WAVES * concurrency))
    # A slow handler keeps its records: the consumer renews the locks it holds.
    # (Like record_limit, this needs Kafka 4.2+; the consumer's error names both
    # settings on an older cluster.)
    _default(cfg, "share.auto.renew", True)
    return cfg


def _default(cfg: dict[str, object], key: str, value: object) -> None:
    if key not in cfg and key.replace(".", "_") not in cfg:
        cfg[key] = value


def max_poll_records(cfg: Mapping[str, object], *, own_factory: bool) -> int:
    """``max.poll.records`` of a worker's settings (whatever spelling they use)."""
    return _parsed(cfg, own_factory=own_factory).max_poll_records


def _parsed(cfg: Mapping[str, object], *, own_factory: bool) -> ShareConsumerConfig:
    if own_factory:
        cfg = {"bootstrap.servers": "localhost:9092", "group.id": "worker", **cfg}
    return parse_config(cfg)


def worker_metrics(cfg: Mapping[str, object], *, own_factory: bool) -> WorkerMetrics:
    """A worker's registry, over its consumer's metrics window (the settings are
    checked here, so a bad one is named before anything starts; a consumer
    factory of the caller's, a mock's say, may fill in the connection)."""
    parsed = _parsed(cfg, own_factory=own_factory)
    return WorkerMetrics(
        sample_window_ms=parsed.metrics_sample_window_ms,
        num_samples=parsed.metrics_num_samples, created_ms=now_ms(),
    )


def in_place_retries(
    policy: Any,
    retryable: tuple[type[BaseException], ...],
    stopping: Callable[[], bool],
    sleep: Callable[[float], Any],
    *,
    asynchronous: bool,
) -> Any:
    """A tenacity policy made fit for a worker: it retries only what ``retryable``
    names (a poison record is rejected at once) and only what its own ``retry``
    allows; it stops retrying as soon as the worker stops; its waits end early
    then; and the last error is raised as itself, so that it is classified
    like any other."""
    try:
        import tenacity  # noqa: PLC0415 (optional: only for users who pass a policy)
    except ImportError:  # pragma: no cover - a policy cannot exist without it
        raise ValueError("retry needs tenacity (pip install tenacity)") from None
    wanted = tenacity.AsyncRetrying if asynchronous else tenacity.Retrying
    if not isinstance(policy, wanted):
        raise ValueError(
            f"retry must be a tenacity.{wanted.__name__} (or None), got {policy!r}"
        )
    user_retry, user_stop = policy.retry, policy.stop

    def retry(state: Any) -> bool:
        outcome = state.outcome
        if outcome is not None and outcome.failed and not isinstance(
            outcome.exception(), retryable
        ):
            return False
        return bool(user_retry(state))

    def stop(state: Any) -> bool:
        return stopping() or bool(user_stop(state))

    return policy.copy(retry=retry, stop=stop, sleep=sleep, reraise=True)


def install_stop_signals(on_signal: Callable[[int], None]) -> Callable[[], None]:
    """SIGINT and SIGTERM call ``on_signal(signum)`` until the returned function
    puts the previous handlers back.

    Python runs signal handlers on the main thread only, and only the main thread
    may install them: elsewhere this raises, rather than leave a worker that a
    SIGTERM would not stop in order.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "handle_signals=True needs the main thread (Python installs and runs "
            "signal handlers there only): run the worker on the main thread, or pass "
            "handle_signals=False and call the worker's stop() when it should stop"
        )
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

    def handler(signum: int, frame: FrameType | None) -> None:
        on_signal(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, signal.SIG_DFL if old is None else old)

    return restore
