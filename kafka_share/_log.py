"""Loggers that put the consumer's identity on every line.

Several consumers often share one process, so every log line of a consumer's
components starts with ``[ShareConsumer clientId=..., groupId=..., memberId=...]``
(like Java's LogContext). Messages use lazy ``%`` arguments and never include
record payloads.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping, Sequence
from typing import Any

__all__ = ["ContextLogger", "consumer_log_prefix", "offset_ranges"]


class ContextLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger adapter that prefixes each message with a fixed context string."""

    def __init__(self, logger: logging.Logger, prefix: str) -> None:
        super().__init__(logger, {})
        self.prefix = prefix

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        return f"{self.prefix}{msg}", kwargs


def consumer_log_prefix(client_id: str, group_id: str, member_id: str) -> str:
    return f"[ShareConsumer clientId={client_id}, groupId={group_id}, memberId={member_id}] "


Logger = logging.Logger | ContextLogger


def offset_ranges(offsets: Sequence[int]) -> str:
    """Sorted offsets as text for a message: ``"3-5, 9"``."""
    out: list[str] = []
    if not offsets:
        return ""
    start = prev = offsets[0]
    for o in offsets[1:]:
        if o != prev + 1:
            out.append(f"{start}-{prev}" if start != prev else str(start))
            start = o
        prev = o
    out.append(f"{start}-{prev}" if start != prev else str(start))
    return ", ".join(out)
