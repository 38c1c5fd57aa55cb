"""SO_RCVLOWAT while a large response streams in (fewer network-thread wakeups).

The mark may never exceed what the frame still needs (a larger one could leave
the last bytes unread until a timeout) and must be back at 1 once the frame is
complete, so that small responses are read at once.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import pytest

from kafka_share._net import connection as connection_module
from kafka_share._net.client import monotonic_ms
from kafka_share._net.connection import BrokerConnection
from kafka_share.protocol.messages import ShareFetchRequest, ShareFetchResponse
from tests.fakes.broker import FakeBroker, ReceivedRequest
from tests.fakes.pump import Outcome, pump

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="SO_RCVLOWAT is used on Linux")


def _records_answer(size: int) -> Any:
    def handler(received: ReceivedRequest) -> Any:
        payload = bytes([size % 251]) * size
        return ShareFetchResponse(responses=[ShareFetchResponse.ShareFetchableTopicResponse(
            partitions=[ShareFetchResponse.PartitionData(partition_index=0, records=payload)],
        )])
    return handler


def _records(response: Any) -> bytes:
    assert isinstance(response, ShareFetchResponse)
    records = bytes(response.responses[0].partitions[0].records)
    assert records == bytes([len(records) % 251]) * len(records)
    return records


def _fetch(conn: BrokerConnection) -> Any:
    out = Outcome()
    conn.send(ShareFetchRequest(), out, now_ms=monotonic_ms())
    pump(conn, lambda: out.done)
    return out.response


def _connect(address: tuple[str, int], **kwargs: Any) -> BrokerConnection:
    return BrokerConnection(
        node_id=1, host=address[0], port=address[1], client_id="unit-test",
        now_ms=monotonic_ms(), connect_timeout_ms=5000, request_timeout_ms=5000, **kwargs,
    )


@pytest.mark.parametrize("size", [3_000_000, 200_000, 70_000, 100])
def test_the_mark_follows_what_the_frame_still_needs_and_returns_to_one(
    size: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    marks: list[tuple[int, int]] = []
    original = BrokerConnection._set_rcvlowat

    def spy(self: BrokerConnection, nbytes: int) -> None:
        marks.append((nbytes, self._codec.frame_remaining))
        original(self, nbytes)

    monkeypatch.setattr(BrokerConnection, "_set_rcvlowat", spy)
    with FakeBroker(_records_answer(size)) as broker:
        conn = _connect(broker.address)
        try:
            for _ in range(3):  # later responses too: the mark was reset in between
                assert len(_records(_fetch(conn))) == size
                assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
            assert marks, "no reads seen"
            if size > 65536:  # received into a frame buffer, not the scratch one
                assert max(mark for mark, _ in marks) > 1
            cap = connection_module._FRAME_RCVLOWAT_BYTES
            for mark, remaining in marks:
                assert mark == (min(remaining, cap) or 1)
        finally:
            conn.close()
        assert not broker.errors


def test_no_mark_with_a_fixed_receive_buffer() -> None:
    with FakeBroker(_records_answer(500_000)) as broker:
        conn = _connect(broker.address, receive_buffer_bytes=65536)
        try:
            out = Outcome()
            conn.send(ShareFetchRequest(), out, now_ms=monotonic_ms())
            pump(conn, lambda: out.done)
            assert len(_records(out.response)) == 500_000
            assert conn._rcvlowat == 0
        finally:
            conn.close()
