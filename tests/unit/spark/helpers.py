"""Test helpers: reads and shortcuts the tests need and the package does not."""

from __future__ import annotations

from kafka_share.spark._options import SourceOptions, _secret
from kafka_share.spark._staging import StagingStore


def redacted(self: SourceOptions) -> dict[str, str]:
    """The options as a user may see them in logs: secrets masked."""
    return {k: ("[hidden]" if _secret(k) else v) for k, v in self.consumer_config.items()}


def delete_through(self: StagingStore, seq: int) -> None:
    """Forget every batch up to ``seq`` (Spark has committed them)."""
    for b in self.batches():
        if b <= seq:
            self.delete_batch(b)
