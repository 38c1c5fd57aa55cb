"""A pool of Spark tasks, each a share consumer calling a handler per record.

``process_queue`` starts ``parallelism`` Spark tasks (``mapInArrow`` over a
one-row-per-task range). Each task runs a :class:`~kafka_share.workers.ShareWorker`
(the same loop as a plain Python worker's, so the two cannot drift): a share
consumer in explicit mode that calls ``handler(record)`` for every record it is
given and acknowledges by outcome, *after* the handler returned:

* the handler returned: ACCEPT (its result, as text, goes to the ``result`` column);
* it raised an exception whose type is in ``retryable``: RELEASE (delivered again,
  to any member, with ``delivery_count`` + 1);
* it raised anything else: REJECT (a poison record, never delivered again).

The handler runs in a helper thread while the consumer keeps the locks of the
records it holds alive (``share.auto.renew``, on by default here: the consumer's
network thread renews them with RENEW, Kafka 4.2+, shortly before they expire),
so a slow handler does not lose its records to another member. Records are
therefore handled at least once: a task that dies leaves its records to expire
and be redelivered to the other tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from kafka_share.models import ConsumerRecord
from kafka_share.spark._options import SparkOptionError, check_consumer_config
from kafka_share.workers import ShareWorker
from kafka_share.workers._common import worker_config

__all__ = ["OUTCOME_SCHEMA", "process_queue"]


#: The Spark schema of the DataFrame that :func:`process_queue` returns.
OUTCOME_SCHEMA: Final = (
    "topic string, partition int, offset long, delivery_count int, "
    "outcome string, error string, result string"
)
_ARROW_OUTCOME = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("delivery_count", pa.int32()),
        pa.field("outcome", pa.string()),
        pa.field("error", pa.string()),
        pa.field("result", pa.string()),
    ]
)
#: Outcome rows per Arrow batch handed back to Spark.
_ROWS_PER_BATCH: Final = 1000
#: How long a task that has not had a record yet waits for one (at least): a new
#: member needs a few seconds to join the group and be assigned partitions.
_FIRST_RECORD_WAIT_S: Final = 10.0


class _Worker:
    """The function ``mapInArrow`` runs in each task (pickled to the executors):
    a :class:`~kafka_share.workers.ShareWorker`, its handled records as rows."""

    def __init__(
        self,
        handler: Callable[[ConsumerRecord[Any, Any]], object],
        config: dict[str, object],
        topics: list[str],
        max_records: int | None,
        max_seconds: float | None,
        idle_timeout_s: float | None,
        retryable: tuple[type[BaseException], ...],
        concurrency: int = 1,
    ) -> None:
        self.handler = handler
        self.config = config
        self.topics = topics
        self.max_records = max_records
        self.max_seconds = max_seconds
        self.idle_timeout_s = idle_timeout_s
        self.retryable = retryable
        self.concurrency = concurrency

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        for _ in batches:  # one row per task: its number, unused
            pass
        rows: list[tuple[str, int, int, int, str, str | None, str | None]] = []
        for row in self._run():
            rows.append(row)
            if len(rows) >= _ROWS_PER_BATCH:
                yield _to_batch(rows)
                rows = []
        if rows:
            yield _to_batch(rows)

    def _run(self) -> Iterator[tuple[str, int, int, int, str, str | None, str | None]]:
        """The task's records, as the worker's handlers finish them. Spark stops
        a task by killing its Python worker, so no signal handling here; a task
        that fails closes the worker's consumer, which releases its records."""
        worker: ShareWorker[Any, Any] = ShareWorker(
            self.handler, self.config, topics=self.topics, concurrency=self.concurrency,
            retryable=self.retryable,
        )
        for handled in worker.handled(
            max_records=self.max_records, max_seconds=self.max_seconds,
            idle_timeout_s=self.idle_timeout_s, first_record_timeout_s=_FIRST_RECORD_WAIT_S,
        ):
            record, result = handled.record, handled.result
            yield (
                record.topic, record.partition, record.offset, record.delivery_count,
                handled.outcome.name, handled.error_text,
                None if result is None else str(result),
            )


def _to_batch(rows: Sequence[tuple[str, int, int, int, str, str | None, str | None]]) -> Any:
    columns = list(zip(*rows, strict=True))
    return pa.RecordBatch.from_arrays(
        [pa.array(col, type=f.type) for col, f in zip(columns, _ARROW_OUTCOME, strict=True)],
        schema=_ARROW_OUTCOME,
    )


def process_queue(
    spark: SparkSession,
    handler: Callable[[ConsumerRecord[Any, Any]], object],
    *,
    config: Mapping[str, object],
    topics: Sequence[str],
    parallelism: int,
    max_records_per_task: int | None = None,
    max_seconds_per_task: float | None = None,
    idle_timeout_s: float | None = 5.0,
    retryable: tuple[type[BaseException], ...] = (),
    concurrency: int = 1,
) -> DataFrame:
    """Process a share group's records with ``parallelism`` Spark tasks.

    Each task is a share consumer (``config``: Kafka's dotted keys, including
    ``bootstrap.servers`` and ``group.id``) subscribed to ``topics``. It calls
    ``handler(record)`` for each :class:`~kafka_share.ConsumerRecord` and
    acknowledges ACCEPT when it returns, RELEASE when it raises one of
    ``retryable``, REJECT when it raises anything else. A task stops after
    ``max_records_per_task`` records or ``max_seconds_per_task`` seconds, or
    once no record arrived for ``idle_timeout_s`` seconds (before its first
    record, a task waits at least 10 s: joining the group takes a few seconds).
    ``idle_timeout_s=None`` is the long-running mode: tasks run until the Spark
    job is cancelled (``SparkContext.cancelJobGroup``, ``cancelAllJobs``), which
    kills their Python workers (SIGKILL, after ``spark.python.task.killTimeout``);
    the records they held come back to the group when their locks run out, and
    outcomes already decided reach the broker as handlers finish (every 0.2 s at
    least), not only with the next poll. A handler that is running is never
    interrupted otherwise.

    ``concurrency`` handlers run at once in each task (threads: for I/O-bound
    handlers), each record acknowledged as its handler finishes; a poll holds
    at least ``4 * concurrency`` records (about 0.3 s of work for fast
    handlers) unless ``max.poll.records`` says otherwise, and the next poll's
    records are fetched while the handlers run.

    Returns a lazy DataFrame (nothing runs until an action such as ``collect``,
    ``count`` or a write) with one row per handled record: ``topic``,
    ``partition``, ``offset``, ``delivery_count``, ``outcome`` ("ACCEPT",
    "RELEASE" or "REJECT"), ``error`` (the exception, or null) and ``result``
    (the handler's return value as text, or null). Run the action once: each
    run consumes the queue again.

    The handler and its ``retryable`` types are pickled to the executors.
    Handling is at least once: a record whose task dies, or whose lock is lost,
    is handled again by another task.

    Raises:
        SparkOptionError: an argument or consumer setting is invalid (named).
    """
    _check_arguments(
        handler, topics, parallelism, max_records_per_task, max_seconds_per_task,
        idle_timeout_s, retryable, concurrency,
    )
    cfg = _task_config(config, concurrency)
    check_consumer_config(cfg, "")
    worker = _Worker(
        handler, cfg, list(topics), max_records_per_task, max_seconds_per_task,
        None if idle_timeout_s is None else float(idle_timeout_s), retryable, concurrency,
    )
    return spark.range(0, parallelism, 1, parallelism).mapInArrow(worker, OUTCOME_SCHEMA)


def _check_arguments(
    handler: object,
    topics: Sequence[str],
    parallelism: int,
    max_records_per_task: int | None,
    max_seconds_per_task: float | None,
    idle_timeout_s: float | None,
    retryable: tuple[type[BaseException], ...],
    concurrency: int,
) -> None:
    """process_queue's arguments, each checked with an error that names it."""
    if not callable(handler):
        raise SparkOptionError(f"handler must be callable, got {handler!r}")
    if isinstance(topics, str) or not topics or not all(
        isinstance(t, str) and t.strip() for t in topics
    ):
        raise SparkOptionError(f"topics must be a non-empty list of topic names, got {topics!r}")
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise SparkOptionError(f"parallelism must be a positive int, got {parallelism!r}")
    if max_records_per_task is not None and (
        isinstance(max_records_per_task, bool)
        or not isinstance(max_records_per_task, int)
        or max_records_per_task < 1
    ):
        raise SparkOptionError(
            f"max_records_per_task must be a positive int or None, got {max_records_per_task!r}"
        )
    if max_seconds_per_task is not None and not max_seconds_per_task > 0:
        raise SparkOptionError(
            f"max_seconds_per_task must be positive or None, got {max_seconds_per_task!r}"
        )
    if idle_timeout_s is not None and not idle_timeout_s > 0:
        raise SparkOptionError(
            f"idle_timeout_s must be positive or None (run until cancelled), "
            f"got {idle_timeout_s!r}"
        )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise SparkOptionError(f"concurrency must be a positive int, got {concurrency!r}")
    if not isinstance(retryable, tuple) or not all(
        isinstance(t, type) and issubclass(t, BaseException) for t in retryable
    ):
        raise SparkOptionError(
            f"retryable must be a tuple of exception types, got {retryable!r}"
        )


def _task_config(config: Mapping[str, object], concurrency: int) -> dict[str, object]:
    """Each task's consumer settings: the caller's, with explicit acknowledgement
    (refused if set otherwise) and the defaults of a worker (record_limit,
    ``share.auto.renew``, ``max.poll.records`` for ``concurrency``)."""
    try:
        return worker_config(config, concurrency, "process_queue")
    except ValueError as exc:
        raise SparkOptionError(str(exc)) from None
