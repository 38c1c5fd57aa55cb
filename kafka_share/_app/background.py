"""What the network thread reports in the background: errors to raise, and
acknowledgement completions for the commit callback."""

from __future__ import annotations

from kafka_share.errors import KafkaError


def _unrecoverable(error: KafkaError) -> KafkaError:
    """Say in a fatal error's message that the consumer must be recreated."""
    error.args = (
        f"{error.message.rstrip('.')}. The consumer cannot recover from this error: it must be "
        "closed and recreated.",
        *error.args[1:],
    )
    return error
