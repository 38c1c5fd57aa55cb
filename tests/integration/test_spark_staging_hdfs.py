"""Staging on a real HDFS, through WebHDFS: chunks are written once, whoever
races, and what HDFS refuses is named."""

from __future__ import annotations

import json
import random
import socket
import threading
import urllib.request
import zlib
from collections import Counter
from pathlib import Path

import pytest

from kafka_share.spark._staging import Chunk, StagingError, StagingStore
from kafka_share.testing.hdfs import HdfsCluster
from tests.unit.spark.helpers import delete_through

pytest_plugins = ["hdfs_fixtures"]

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_chunk_is_written_once_and_read_back(hdfs_location: str) -> None:
    store = StagingStore(hdfs_location)
    store.check_writable()
    first = Chunk([("t", 0, 10, 19, 1), ("t", 1, 5, 5, 2)])
    assert store.put_if_absent(3, 0, 0, first)
    assert not store.put_if_absent(3, 0, 0, Chunk([("t", 0, 10, 30, 1)]))
    assert store.put_if_absent(3, 0, 1, Chunk([], end=True, stats={"acquired": 11}))
    assert store.put_if_absent(4, 2, 0, Chunk([("u", 0, 0, 0, 1)]))
    assert [c.spans for c in store.slot_chunks(3, 0)] == [first.spans, []]
    assert list(store.slot_chunks(3, 0))[-1].stats == {"acquired": 11}
    assert store.get(3, 0, 2) is None
    assert store.batches() == [3, 4]
    assert store.slots(4) == [2]
    delete_through(store, 3)
    assert store.batches() == [4]
    assert store.get(3, 0, 0) is None


def test_racing_writers_one_wins_and_everyone_reads_the_winner(hdfs_location: str) -> None:
    writers = 8
    start = threading.Barrier(writers)
    won: list[int] = []
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            store = StagingStore(hdfs_location)  # each its own client, as attempts are
            start.wait()
            if store.put_if_absent(1, 0, 0, Chunk([("t", 0, i, i, 1)])):
                won.append(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(won) == 1, won
    staged = StagingStore(hdfs_location).get(1, 0, 0)
    assert staged is not None and staged.spans == [("t", 0, won[0], won[0], 1)]


def test_many_rounds_of_races_never_give_two_winners(hdfs_location: str) -> None:
    rounds, writers = 15, 3
    wins: Counter[int] = Counter()
    lock = threading.Lock()

    def race(chunk: int, barrier: threading.Barrier) -> None:
        store = StagingStore(hdfs_location)
        barrier.wait()
        if store.put_if_absent(1, 0, chunk, Chunk([("t", 0, chunk, chunk, 1)])):
            with lock:
                wins[chunk] += 1

    for chunk in range(rounds):
        barrier = threading.Barrier(writers)
        threads = [threading.Thread(target=race, args=(chunk, barrier)) for _ in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert wins == Counter({c: 1 for c in range(rounds)})
    assert len(list(StagingStore(hdfs_location).slot_chunks(1, 0))) == rounds


def test_a_user_hdfs_denies_gets_an_error_naming_user_and_folder(
    hdfs: HdfsCluster, hdfs_location: str,
) -> None:
    StagingStore(hdfs_location).check_writable()  # made by the superuser, mode 755
    path = hdfs_location.split("/", 3)[3]
    denied = StagingStore(hdfs.webhdfs_url(path, user="intruder"))
    with pytest.raises(StagingError, match=r"HDFS denies user 'intruder' at webhdfs://.*"
                                           r"Permission denied: user=intruder, access=WRITE"):
        denied.put_if_absent(1, 0, 0, Chunk([]))
    with pytest.raises(StagingError, match="denies user 'intruder'"):
        denied.check_writable()


def test_a_namenode_that_does_not_answer_is_named() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    store = StagingStore(f"webhdfs://127.0.0.1:{port}/staging")
    with pytest.raises(StagingError, match=rf"cannot reach WebHDFS for "
                                           rf"webhdfs://127.0.0.1:{port}/staging.*refused"):
        store.check_writable()


def _big_chunk(seed: int) -> Chunk:
    # Offsets that do not compress: too big for an extended attribute.
    rng = random.Random(seed)
    return Chunk([("t", rng.randrange(64), o, o + rng.randrange(5), rng.randrange(1, 6))
                  for o in rng.sample(range(10**9), 3_000)])


def test_a_chunk_too_big_for_an_attribute_is_a_file_of_its_own(
    hdfs: HdfsCluster, hdfs_location: str,
) -> None:
    big = _big_chunk(1)
    assert len(zlib.compress(big.to_bytes(), 1)) > 12_000
    store = StagingStore(hdfs_location)
    assert store.put_if_absent(1, 0, 0, big)
    assert not store.put_if_absent(1, 0, 0, _big_chunk(2))
    assert store.put_if_absent(1, 0, 1, Chunk([("t", 0, 1, 2, 1)]))
    fresh = StagingStore(hdfs_location)
    assert [c.spans for c in fresh.slot_chunks(1, 0)] == [big.spans, [("t", 0, 1, 2, 1)]]
    # The big one's bytes are in the file; the small one's in an attribute.
    path = hdfs_location.split("/", 3)[3]
    sizes = {name: _file_size(hdfs, f"/{path}/b1/s0/{name}") for name in ("0.json", "1.json")}
    assert sizes["0.json"] == len(big.to_bytes()) and sizes["1.json"] == 0


def _file_size(hdfs: HdfsCluster, path: str) -> int:
    url = (f"http://127.0.0.1:{hdfs.http_port}/webhdfs/v1{path}?op=GETFILESTATUS"
           f"&user.name={hdfs.superuser}")
    with urllib.request.urlopen(url, timeout=10) as answer:
        return int(json.loads(answer.read())["FileStatus"]["length"])


def test_without_extended_attributes_chunks_are_files(tmp_path: Path) -> None:
    with HdfsCluster(tmp_path / "hdfs", hdfs_site={"dfs.namenode.xattrs.enabled": "false"}) as h:
        location = h.webhdfs_url("/staging")
        store = StagingStore(location)
        assert store.put_if_absent(1, 0, 0, Chunk([("t", 0, 0, 9, 1)]))
        assert not store.put_if_absent(1, 0, 0, Chunk([("t", 0, 0, 5, 1)]))
        assert store.put_if_absent(1, 0, 1, Chunk([], end=True))
        assert [c.spans for c in StagingStore(location).slot_chunks(1, 0)] == [
            [("t", 0, 0, 9, 1)], []]
        assert _file_size(h, "/staging/b1/s0/0.json") > 0
