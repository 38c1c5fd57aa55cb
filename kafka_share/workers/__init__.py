"""Workers: a handler run over a share group's records, ``concurrency`` at once.

:class:`ShareWorker` calls a function in threads; :class:`AsyncShareWorker`
awaits a coroutine function on the event loop. Each record is acknowledged by
its outcome as its handler finishes: the handler returned, ACCEPT; it raised
one of ``retryable``, RELEASE (delivered again); anything else, REJECT (a poison
record, never delivered again; to the dead-letter topic where the group has one).
The locks of records being handled are kept alive by ``share.auto.renew``.
SIGINT and SIGTERM stop a worker in order: records not started are released at
once, running handlers finish within ``stop_timeout_s``, acknowledgements are
committed before the consumer closes. ``kafka_share.spark.process_queue`` runs a
``ShareWorker`` in each Spark task; ``kafka-share work module:function`` runs
one from the command line::

    from kafka_share.workers import ShareWorker

    def handle(record):
        store(json.loads(record.value))      # ACCEPT when it returns

    worker = ShareWorker(handle, {"bootstrap.servers": "localhost:9092",
                                  "group.id": "orders"},
                         topics=["orders"], concurrency=16,
                         retryable=(TimeoutError,))
    summary = worker.run()                   # until SIGTERM / Ctrl+C
"""

from kafka_share.workers._common import DEFAULT_STOP_TIMEOUT_S, Handled, WorkerSummary
from kafka_share.workers.aio import AsyncConsumer, AsyncShareWorker
from kafka_share.workers.threaded import ShareWorker, SyncConsumer

__all__ = [
    "DEFAULT_STOP_TIMEOUT_S",
    "AsyncConsumer",
    "AsyncShareWorker",
    "Handled",
    "ShareWorker",
    "SyncConsumer",
    "WorkerSummary",
]
