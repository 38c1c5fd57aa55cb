"""The lookup of records handed out again among staged spans (``spark._duplicates``)."""

from __future__ import annotations

from kafka_share.spark._duplicates import StagedIndex


def test_a_record_staged_with_a_lower_delivery_count_was_handed_out_before() -> None:
    index = StagedIndex()
    index.add([("t", 0, 10, 19, 1), ("t", 0, 40, 40, 2), ("u", 0, 10, 19, 1)])
    index.add([("t", 1, 0, 4, 1)])
    assert index.staged_before("t", 0, 10, 2) and index.staged_before("t", 0, 19, 5)
    assert index.staged_before("t", 0, 40, 3) and index.staged_before("t", 1, 4, 2)
    # Outside every span, on another partition, or staged with this very count.
    assert not index.staged_before("t", 0, 20, 2)
    assert not index.staged_before("t", 0, 9, 2)
    assert not index.staged_before("t", 2, 10, 2)
    assert not index.staged_before("t", 0, 40, 2)
    assert not StagedIndex().staged_before("t", 0, 10, 2)
