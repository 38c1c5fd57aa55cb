"""Failing tests for known bugs in kafka_share/share/consume_manager.py.

Not collected by pytest (the file name does not match ``test_*.py``); run with
``pytest tests/unit/pending_bugs_test_consume_manager.py``. Move each test into
tests/unit/share/test_consume_manager.py once its bug is fixed.
"""

from __future__ import annotations

import sys
from concurrent.futures import Future
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent / "share"))

from test_consume_manager import TIP0, Env, ack_response, acks

from kafka_share.errors import RequestTimedOutError


def test_sync_commit_in_flight_at_its_deadline_reports_request_timed_out() -> None:
    """BUG: _expire_commit resolves the future with ``commit.results`` but only fails
    the acks still in ``per_node``; acks already sent (in flight) get no entry, so
    commit_sync returns ``{}`` for a partition it did try to acknowledge. Expected
    (module docstring, Java): every unanswered partition completes with
    RequestTimedOutError.
    """
    env = Env()
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 100, future)
    assert set(env.poll(0)) == {1}  # the ShareAcknowledge is in flight, never answered
    env.poll(100)
    result: Any = future.result(timeout=0)
    assert TIP0 in result, f"partition missing from commit result {result!r}"
    assert isinstance(result[TIP0], RequestTimedOutError)


def test_retriable_partition_error_is_retried_after_retry_backoff() -> None:
    """BUG: after a retriable partition error the ack handler sets
    ``state.not_before_ms = 0`` ("after backoff below", but there is none), so the
    retry goes out on the very next round: a tight request loop against a broker
    that is e.g. loading. Expected (Java AcknowledgeRequestState): wait
    ``retry.backoff.ms`` before resending.
    """
    env = Env(retry_backoff_ms=100)
    env.establish()
    env.mgr.fetch_more = False
    future: Future[object] = Future()
    env.mgr.on_sync({TIP0: (1, acks(1))}, 10_000, future)
    env.poll(1000)[1].handler(ack_response(0, error_code=7), None)
    assert env.poll(1000) == {}, "retried immediately, without backoff"
    assert set(env.poll(1100)) == {1}
