"""The staging store of the ``kafka-share`` source: what each read slot acquired.

A micro-batch is read by ``slots`` tasks. Slot ``i`` of batch ``seq`` is a
sequence of *chunks* ``0, 1, 2, ...``: each is either the coordinates of one
poll's records (topic, partition, offset ranges with their delivery counts; a
few hundred bytes, never the data) or the END marker, which closes the slot.
A chunk is written once, with an atomic "create if absent": whoever writes
chunk ``j`` first decides what it is, and every other attempt of the slot (a
retry, a speculative copy, a re-run after a restart) reads it back instead. So
the slot's records are fixed the moment each chunk is written, however many
attempts race, and a re-run yields exactly the same rows.

Layout under the staging root::

    <root>/b<seq>/s<slot>/<chunk>.json

Storage: somewhere every executor and the driver reach, as Spark requires of
checkpoints: a file system path (a local disk for ``local[N]``, a shared POSIX
mount for a cluster) or HDFS through ``webhdfs://``. How each makes "create if
absent" atomic is in ``_storage``. Every chunk ends with a checksum line that
readers verify, so a chunk still being written (an exclusive create, where a
file system has no hard links) is never taken for a finished one.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

from kafka_share.spark._options import SparkOptionError
from kafka_share.spark._storage import (
    PosixStorage,
    StagingError,
    Storage,
    UnsupportedLocationError,
)
from kafka_share.spark._webhdfs import WebHdfsStorage

__all__ = ["Chunk", "Span", "StagingError", "StagingStore"]

_FORMAT = 1
#: How long a reader waits for a chunk another attempt is still writing
#: (exclusive-create file systems only) before it calls the chunk corrupt.
_PARTIAL_WAIT_S = 10.0


#: (topic, partition, first offset, last offset, delivery count): records with
#: consecutive offsets and one delivery count
Span = tuple[str, int, int, int, int]


class Chunk:
    """One staged chunk: the spans of one poll's records, or the END marker."""

    __slots__ = ("end", "spans", "stats")

    def __init__(
        self, spans: list[Span], *, end: bool = False, stats: dict[str, int] | None = None
    ) -> None:
        self.spans = spans
        self.end = end
        #: END only: what the attempt that closed the slot counted (see _slots)
        self.stats = stats or {}

    @property
    def records(self) -> int:
        return sum(last - first + 1 for _, _, first, last, _ in self.spans)

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {"v": _FORMAT}
        if self.end:
            body["end"] = True
            body["stats"] = self.stats
        else:
            body["spans"] = [list(s) for s in self.spans]
        text = json.dumps(body, separators=(",", ":")).encode()
        return text + b"\n" + hashlib.sha256(text).hexdigest().encode() + b"\n"

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> Chunk | None:
        """The chunk in ``data``; None if it is not complete yet (an exclusive
        create still being written). Raises StagingError for anything else."""
        text, sep, rest = data.partition(b"\n")
        if not sep or rest.strip() != hashlib.sha256(text).hexdigest().encode():
            return None
        try:
            body = json.loads(text)
            if body.get("v") != _FORMAT:
                raise StagingError(
                    f"staged chunk {where} has format {body.get('v')!r}; this kafka-share "
                    f"reads format {_FORMAT}"
                )
            if body.get("end"):
                return cls([], end=True, stats={str(k): int(v) for k, v in body["stats"].items()})
            spans = [(str(t), int(p), int(a), int(b), int(d)) for t, p, a, b, d in body["spans"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise StagingError(f"staged chunk {where} is not valid: {exc}") from None
        return cls(spans)


def spans_of(topics: Any, partitions: Any, offsets: Any, counts: Any) -> list[Span]:
    """Runs of consecutive offsets with one delivery count, per partition, from
    a poll's Arrow columns (rows in any order), sorted.

    Vectorised: a slot stages every poll, and a loop per record here cost as much
    CPU as decoding the records."""
    # Imported here, in the executors' read slots: the driver's processes import
    # this module for the store alone, and numpy with pyarrow.compute cost them
    # about 0.1 s each time Spark starts one.
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    n = len(offsets)
    if n == 0:
        return []
    topic_codes = topics if pa.types.is_dictionary(topics.type) else pc.dictionary_encode(topics)
    if isinstance(topic_codes, pa.ChunkedArray):
        topic_codes = topic_codes.combine_chunks()
    names = topic_codes.dictionary.to_pylist()
    def ints(column: Any) -> Any:
        return np.asarray(pa.chunked_array([column]).to_numpy(), dtype=np.int64)

    code = ints(topic_codes.indices)
    part, off, count = ints(partitions), ints(offsets), ints(counts)
    order = np.lexsort((off, part, code))
    code, part, off, count = code[order], part[order], off[order], count[order]
    breaks = np.flatnonzero(
        (code[1:] != code[:-1]) | (part[1:] != part[:-1]) | (count[1:] != count[:-1])
        | (off[1:] != off[:-1] + 1)
    ) + 1
    starts = [0, *breaks.tolist()]
    lasts = [b - 1 for b in starts[1:]] + [n - 1]
    spans = [
        (names[int(code[s])], int(part[s]), int(off[s]), int(off[e]), int(count[s]))
        for s, e in zip(starts, lasts, strict=True)
    ]
    spans.sort()
    return spans


_OBJECT_STORES = ("s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "oss",
                  "r2", "az", "adl")


def storage_for(location: str) -> Storage:
    """The backend for ``location``; UnsupportedLocationError names what is supported."""
    scheme = urlparse(location).scheme.lower()
    if scheme in ("", "file") or len(scheme) == 1:  # one letter: a Windows drive
        return PosixStorage(location)
    if scheme == "webhdfs":
        return WebHdfsStorage(location)
    supported = (
        "a file system path (a local directory for local[N], or a shared POSIX mount every "
        "executor and the driver see, such as NFS) or webhdfs://<namenode>:<http port>/<path>"
    )
    if scheme == "hdfs":
        raise UnsupportedLocationError(
            f"stagingLocation {location!r}: the executors' Python has no JVM to speak HDFS's "
            "own protocol; name the same HDFS through its REST interface instead: "
            "webhdfs://<namenode>:<dfs.namenode.http-address port, 9870 by default>/<path>"
        )
    if scheme in _OBJECT_STORES:
        raise UnsupportedLocationError(
            f"stagingLocation {location!r}: object stores are not supported for staging "
            "(what Python reaches of them has no atomic create-if-absent, which two "
            f"attempts of one read slot need to agree on its records); use {supported}"
        )
    raise UnsupportedLocationError(
        f"stagingLocation {location!r}: {scheme}:// storage is not supported; use {supported}"
    )



class StagingStore:
    """Chunks of read slots under one staging root (see the module docstring)."""

    def __init__(self, location: str) -> None:
        self.location = location
        try:
            self.storage: Storage = storage_for(location)
        except UnsupportedLocationError as exc:
            raise SparkOptionError(f"option {exc}") from None

    @staticmethod
    def _chunk_name(seq: int, slot: int, chunk: int) -> str:
        return f"b{seq}/s{slot}/{chunk}.json"

    def put_if_absent(self, seq: int, slot: int, chunk: int, value: Chunk) -> bool:
        """Write chunk ``chunk`` of slot ``slot`` of batch ``seq`` unless it exists.
        True if this call wrote it; False if another writer did first."""
        return self.storage.put_if_absent(self._chunk_name(seq, slot, chunk), value.to_bytes())

    def get(self, seq: int, slot: int, chunk: int) -> Chunk | None:
        """Chunk ``chunk`` of the slot, or None if nobody has written it."""
        name = self._chunk_name(seq, slot, chunk)
        deadline = time.monotonic() + _PARTIAL_WAIT_S
        while True:
            data = self.storage.read(name)
            if data is None:
                return None
            value = Chunk.from_bytes(data, self.storage.describe(name))
            if value is not None:
                return value
            if time.monotonic() >= deadline:
                raise StagingError(
                    f"staged chunk {self.storage.describe(name)} is incomplete after "
                    f"{_PARTIAL_WAIT_S:.0f} s (a writer died half way?); delete the batch's "
                    "folder to read it anew"
                )
            time.sleep(0.05)  # another attempt is still writing it (exclusive create)

    def slot_chunks(self, seq: int, slot: int, first: int = 0) -> Iterator[Chunk]:
        """The slot's chunks in order from chunk ``first``, up to its END marker
        or the first gap."""
        chunk = first
        while True:
            value = self.get(seq, slot, chunk)
            if value is None:
                return
            yield value
            if value.end:
                return
            chunk += 1

    def batches(self) -> list[int]:
        """The batches with staged chunks, in order."""
        return _numbered(self.storage.list_names(""), "b")

    def slots(self, seq: int) -> list[int]:
        return _numbered(self.storage.list_names(f"b{seq}"), "s")

    def delete_batch(self, seq: int) -> None:
        self.storage.delete_tree(f"b{seq}")

    def check_writable(self) -> None:
        """Create the root now, so that a bad location fails the query at its start."""
        self.storage.check_writable()


def _numbered(names: list[str], prefix: str) -> list[int]:
    return sorted(int(n[1:]) for n in names if n.startswith(prefix) and n[1:].isdigit())
