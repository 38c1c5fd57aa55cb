"""How an acknowledgement ends: completed as answered or failed locally, settled
in the held records, reported to the sink, and the ``commit_sync`` or close
waiting for it resolved."""

from __future__ import annotations

from collections.abc import Mapping

from kafka_share.errors import InvalidRecordStateError, KafkaError, error_for_code
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.consume.context import ConsumeContext
from kafka_share.share.consume.errors import session_lost
from kafka_share.share.consume.nodes import SyncCommit
from kafka_share.share.consume.renewing import AutoRenewal
from kafka_share.share.results import AcknowledgementCompletion
from kafka_share.share.session import SESSION_RESET_ERRORS

__all__ = ["Completion", "unanswered"]


class Completion:
    """Ends acknowledgements and the calls waiting for them. Network thread only."""

    def __init__(self, ctx: ConsumeContext, renewal: AutoRenewal) -> None:
        self._ctx = ctx
        #: answers to auto-renewals go there instead of to the application
        self._renewal = renewal

    def complete(
        self,
        tip: TopicIdPartition,
        acks: Acknowledgements,
        code: int,
        message: str | None,
        commit: SyncCommit | None,
        lock_ms: int | None,
    ) -> None:
        if acks.is_completed:
            return  # already failed locally (e.g. timed out); a late answer changes nothing
        acks.complete(code, message)
        error = error_for_code(code, message) if code != 0 else None
        renewed = (
            frozenset(o for o, t in acks.items() if t == AcknowledgeType.RENEW)
            if code == 0 and acks.has_renew
            else frozenset()
        )
        self._report(tip, acks, error, commit, renewed, lock_ms)

    def complete_error(
        self,
        tip: TopicIdPartition,
        acks: Acknowledgements,
        error: KafkaError,
        commit: SyncCommit | None,
    ) -> None:
        if acks.is_completed:
            return
        acks.complete(getattr(error, "code", -1), str(error))
        self._report(tip, acks, error, commit, frozenset(), None)

    def fail(
        self,
        acks: Mapping[TopicIdPartition, Acknowledgements],
        error: KafkaError,
        commit: SyncCommit | None,
    ) -> None:
        for tip, a in acks.items():
            self.complete_error(tip, a, error, commit)

    def _report(
        self,
        tip: TopicIdPartition,
        acks: Acknowledgements,
        error: KafkaError | None,
        commit: SyncCommit | None,
        renewed: frozenset[int],
        lock_ms: int | None,
    ) -> None:
        ctx = self._ctx
        # A partition in several batches of one commit keeps its first error.
        if self._renewal.owns(acks):
            self._renewal.answered(tip, acks, error, lock_ms)
            return
        if commit is not None and commit.results.get(tip) is None:
            commit.results[tip] = error
        count = len(acks)
        if ctx.held:
            # Settled either way; RENEWed ones are held again (by the application).
            ranges = acks.offset_ranges()
            if ranges is not None and not renewed:
                ctx.held.settle_ranges(tip, ranges)  # a batch accepted as a whole
            else:
                offsets = acks.offsets()
                ctx.held.settle(tip, offsets - renewed if renewed else offsets)
            if renewed:
                ctx.held.ack_returned(tip, renewed)
        if error is not None:
            # Visible at the default level: these records come back to the group.
            ctx.log.warning(
                "acknowledging %d record(s) of %s-%s failed: %s",
                count, tip.topic, tip.partition, error,
            )
            if ctx.metrics is not None:
                ctx.metrics.record_acknowledgements(0, count, ctx.now_ms)
        ctx.sink.ack_completed(
            AcknowledgementCompletion(
                partition=tip,
                acknowledgements=acks,
                error=error,
                renewed_offsets=renewed,
                acquisition_lock_timeout_ms=lock_ms,
            )
        )

    def count_sent(self, acks: Mapping[TopicIdPartition, Acknowledgements]) -> None:
        metrics = self._ctx.metrics
        if metrics is not None and acks:
            metrics.record_acknowledgements(
                sum(len(a) for a in acks.values()), 0, self._ctx.now_ms
            )

    def top_level_error(self, node_id: int, code: int, message: str | None) -> KafkaError:
        """The error for a whole share response's ``error_code``; the ones the
        application must hear of go to the sink too."""
        if code in SESSION_RESET_ERRORS:
            return session_lost(node_id)
        if code in (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION):
            err = error_for_code(code, message)
            self._ctx.sink.error(err)
            return err
        return error_for_code(code, message)

    def resolve(self, commit: SyncCommit, *, timed_out: bool = False) -> None:
        if commit.resolved:
            return
        commit.resolved = True
        if commit.token is not None:
            self._ctx.sink.commit_completed(commit.token, dict(commit.results), timed_out=timed_out)

    def maybe_resolve(self, commit: SyncCommit | None) -> None:
        if commit is not None and commit.done():
            self.resolve(commit)


def unanswered() -> InvalidRecordStateError:
    # Java's words for acknowledgements a response does not mention.
    return InvalidRecordStateError(
        "Acknowledgement not successful due to invalid response from broker"
    )
