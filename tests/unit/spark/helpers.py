"""Test helpers: reads and shortcuts the tests need and the package does not."""

from __future__ import annotations

from kafka_share.spark._options import SourceOptions, _secret
from kafka_share.spark._staging import StagingStore


def redacted(options: SourceOptions) -> dict[str, str]:
    """The options as a user may see them in logs: secrets masked."""
    return {k: ("[hidden]" if _secret(k) else v) for k, v in options.consumer_config.items()}


def delete_through(store: StagingStore, seq: int) -> None:
    """Forget every batch up to ``seq`` (Spark has committed them)."""
    for b in store.batches():
        if b <= seq:
            store.delete_batch(b)
