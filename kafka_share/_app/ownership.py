"""A consumer's state (open, closing, closed) and its single-thread guard."""

from __future__ import annotations

import enum
import threading
from typing import TYPE_CHECKING, Any

from kafka_share._app.checks import CLOSED, in_callback_message
from kafka_share.errors import IllegalStateError

if TYPE_CHECKING:
    from kafka_share._app.core import ConsumerCore


class _State(enum.Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


#: for acknowledge()'s fast path: reading an Enum member off its class runs
#: Python code (about 80 ns on CPython 3.11), a module global does not
_OPEN = _State.OPEN


class _Ownership:
    """The single-thread guard (Java's "light lock").

    Re-entrant for the owning thread; another thread gets an error instead of
    corrupting state. Calls from inside the commit callback are refused.
    """

    __slots__ = ("_allow_closing", "_consumer")

    def __init__(self, consumer: ConsumerCore[Any, Any], allow_closing: bool) -> None:
        self._consumer = consumer
        self._allow_closing = allow_closing

    def __enter__(self) -> None:
        c = self._consumer
        me = threading.get_ident()
        with c._guard:
            if c._owner is not None and c._owner != me:
                raise IllegalStateError(
                    "ShareConsumer is not safe for multi-threaded access: it is in use by "
                    "another thread (only wakeup() may be called from other threads)"
                )
            if c._in_callback:
                raise IllegalStateError(in_callback_message("ShareConsumer"))
            if c._state is not _State.OPEN and not (
                self._allow_closing and c._state is _State.CLOSING
            ):
                raise IllegalStateError(CLOSED)
            c._owner = me
            c._owner_depth += 1

    def __exit__(self, *exc: object) -> None:
        c = self._consumer
        with c._guard:
            c._owner_depth -= 1
            if c._owner_depth == 0:
                c._owner = None
