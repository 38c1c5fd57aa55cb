"""The staging store: chunks written once, whoever comes first (pure file I/O)."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_share.spark._options import SparkOptionError
from kafka_share.spark._staging import Chunk, StagingError, StagingStore, spans_of
from kafka_share.spark._storage import PosixStorage
from kafka_share.spark._webhdfs import WebHdfsStorage
from tests.unit.spark.helpers import delete_through


def test_spans_merge_consecutive_offsets_with_one_delivery_count() -> None:
    spans = _spans(
        ["u", "t", "t", "t", "t", "t"], [0, 0, 0, 0, 0, 1], [1, 5, 3, 4, 7, 0], [2, 1, 1, 1, 1, 1]
    )
    assert spans == [("t", 0, 3, 5, 1), ("t", 0, 7, 7, 1), ("t", 1, 0, 0, 1), ("u", 0, 1, 1, 2)]
    assert _spans(["t", "t"], [0, 0], [1, 2], [1, 2]) == [("t", 0, 1, 1, 1), ("t", 0, 2, 2, 2)]
    assert _spans([], [], [], []) == []


def _spans(topics: list[str], partitions: list[int], offsets: list[int],
           counts: list[int]) -> list[tuple[str, int, int, int, int]]:
    return spans_of(pa.array(topics, pa.string()), pa.array(partitions, pa.int32()),
                    pa.array(offsets, pa.int64()), pa.array(counts, pa.int16()))


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(0, 30),
                          st.integers(1, 3)), unique_by=lambda r: r[:3]))
def test_spans_cover_exactly_the_rows(rows: list[tuple[str, int, int, int]]) -> None:
    # Spans are maximal runs: expanding them gives back exactly the rows.
    spans = _spans(*(list(col) for col in zip(*rows, strict=True))) if rows else []
    expanded = sorted((t, p, o, c) for t, p, first, last, c in spans
                      for o in range(first, last + 1))
    assert expanded == sorted(rows)
    for (t1, p1, _, last, c1), (t2, p2, first, _, c2) in itertools.pairwise(spans):
        assert (t1, p1) != (t2, p2) or c1 != c2 or first > last + 1


def test_a_chunk_is_written_once(tmp_path: Path) -> None:
    store = StagingStore(str(tmp_path))
    first = Chunk([("t", 0, 0, 9, 1)])
    assert store.put_if_absent(3, 1, 0, first)
    assert not store.put_if_absent(3, 1, 0, Chunk([("t", 0, 10, 19, 1)]))
    got = store.get(3, 1, 0)
    assert got is not None and got.spans == first.spans and got.records == 10
    assert store.get(3, 1, 1) is None
    assert store.put_if_absent(3, 1, 1, Chunk([], end=True, stats={"acquired": 10}))
    assert [c.records for c in store.slot_chunks(3, 1)] == [10, 0]
    assert list(store.slot_chunks(3, 1))[-1].stats == {"acquired": 10}
    assert store.batches() == [3] and store.slots(3) == [1]
    # No temporary file is left behind.
    assert sorted(p.name for p in (tmp_path / "b3" / "s1").iterdir()) == ["0.json", "1.json"]


def test_racing_writers_one_wins(tmp_path: Path) -> None:
    store = StagingStore(str(tmp_path))
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def write(i: int) -> None:
        barrier.wait()
        if StagingStore(str(tmp_path)).put_if_absent(1, 0, 0, Chunk([("t", 0, i, i, 1)])):
            wins.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    got = store.get(1, 0, 0)
    assert got is not None and got.spans == [("t", 0, wins[0], wins[0], 1)]


def test_without_hard_links_an_exclusive_create_does(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: object, dst: object) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    store = StagingStore(str(tmp_path))
    assert store.put_if_absent(1, 0, 0, Chunk([("t", 0, 0, 0, 1)]))
    assert not store.put_if_absent(1, 0, 0, Chunk([("t", 0, 1, 1, 1)]))
    got = store.get(1, 0, 0)
    assert got is not None and got.spans == [("t", 0, 0, 0, 1)]


def test_a_chunk_being_written_is_waited_for_and_a_broken_one_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kafka_share.spark._staging as staging

    monkeypatch.setattr(staging, "_PARTIAL_WAIT_S", 0.2)
    store = StagingStore(str(tmp_path))
    folder = tmp_path / "b1" / "s0"
    folder.mkdir(parents=True)
    (folder / "0.json").write_bytes(b'{"v":1,"spans":[')  # half written, never finished
    with pytest.raises(StagingError, match=r"0.json is incomplete"):
        store.get(1, 0, 0)
    good = Chunk([("t", 0, 0, 0, 1)]).to_bytes()
    (folder / "1.json").write_bytes(good.replace(b'"v":1', b'"v":9'))
    with pytest.raises(StagingError, match="incomplete"):
        store.get(1, 0, 1)  # the checksum no longer matches
    text = b'{"v":9,"spans":[]}'
    import hashlib

    (folder / "2.json").write_bytes(text + b"\n" + hashlib.sha256(text).hexdigest().encode())
    with pytest.raises(StagingError, match="format 9"):
        store.get(1, 0, 2)


def test_delete_through_forgets_committed_batches(tmp_path: Path) -> None:
    store = StagingStore(str(tmp_path))
    for seq in (1, 2, 3):
        store.put_if_absent(seq, 0, 0, Chunk([], end=True))
    delete_through(store, 2)
    assert store.batches() == [3]


def test_locations(tmp_path: Path) -> None:
    storage = StagingStore(f"file://{tmp_path}").storage
    assert isinstance(storage, PosixStorage) and storage.root == tmp_path
    hdfs = StagingStore("webhdfs://alice@nn.example:9871/ckpt/q1/").storage
    assert isinstance(hdfs, WebHdfsStorage)
    assert (hdfs.namenode, hdfs.root, hdfs.user) == ("http://nn.example:9871", "/ckpt/q1", "alice")
    assert hdfs.describe("b1/s0/0.json") == "webhdfs://nn.example:9871/ckpt/q1/b1/s0/0.json"
    default_port = StagingStore("webhdfs://nn.example/x").storage
    assert isinstance(default_port, WebHdfsStorage)
    assert default_port.namenode == "http://nn.example:9870"
    with pytest.raises(SparkOptionError, match=r"object stores are not supported.*s3://"
                                               r"|s3://.*object stores are not supported"):
        StagingStore("s3://bucket/stage")
    with pytest.raises(SparkOptionError, match=r"webhdfs://<namenode>:<dfs.namenode.http-address"):
        StagingStore("hdfs://nn:8020/stage")
    with pytest.raises(SparkOptionError, match=r"ftp:// storage is not supported"):
        StagingStore("ftp://host/stage")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StagingError, match="not a writable directory"):
        StagingStore(str(blocker / "sub")).check_writable()
