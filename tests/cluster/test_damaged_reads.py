"""A stored message that fails its checks when read (CorruptStoreError) is answered as nats-server answers
any load error: MSG.GET's "no message found", Direct Get's 404. Never the damaged bytes."""

from __future__ import annotations

from cluster.direct_get.answer import Responder, ResponderRole, answer_direct_get
from cluster.direct_get.request import DirectGetRequest, parse_direct_get
from cluster.stream.msg_get import answer_msg_get
from storage.config import StoreConfig
from storage.errors import CorruptStoreError
from storage.memory import MemoryStreamStore
from storage.model import StoredMsg

RESPONDER = Responder(node="n2", role=ResponderRole.FOLLOWER, stream="S")


class DamagedAt(MemoryStreamStore):
    """A store whose message `bad` fails its checksum when read."""

    def __init__(self, bad: int) -> None:
        super().__init__(StoreConfig())
        self.bad = bad

    def load_msg(self, seq: int) -> StoredMsg:
        if seq == self.bad:
            raise CorruptStoreError(
                f"stream store damaged (sequence {seq}): Corruption: block checksum mismatch"
            )
        return super().load_msg(seq)

    def load_next_msg(self, filter_: str, start_seq: int) -> StoredMsg:
        msg = super().load_next_msg(filter_, start_seq)
        return self.load_msg(msg.seq)

    def load_last_msg(self, filter_: str) -> StoredMsg:
        return self.load_msg(super().load_last_msg(filter_).seq)


def _store() -> DamagedAt:
    store = DamagedAt(bad=2)
    for seq in range(1, 4):
        store.store_msg(f"s.{seq}", None, b"v%d" % seq, 1_700_000_000_000_000_000 + seq)
    return store


def _direct(payload: bytes) -> DirectGetRequest:
    request = parse_direct_get(payload)
    assert isinstance(request, DirectGetRequest)
    return request


def test_msg_get_of_a_damaged_message_finds_no_message() -> None:
    store = _store()
    for payload in (b'{"seq":2}', b'{"last_by_subj":"s.2"}', b'{"seq":2,"next_by_subj":"s.>"}'):
        assert b'"err_code":10037' in answer_msg_get(payload, store)
    assert b'"seq":3' in answer_msg_get(b'{"seq":3}', store)


def test_direct_get_of_a_damaged_message_is_404() -> None:
    store = _store()
    for payload in (b'{"seq":2}', b'{"last_by_subj":"s.2"}', b'{"multi_last":["s.1","s.2"]}'):
        frames = answer_direct_get(_direct(payload), store, RESPONDER)
        assert len(frames) == 1 and frames[0][0] is not None and frames[0][0].startswith(b"NATS/1.0 404"), (
            payload
        )


def test_a_direct_get_batch_stops_before_a_damaged_message() -> None:
    frames = answer_direct_get(_direct(b'{"seq":1,"batch":3}'), _store(), RESPONDER)
    payloads = [body for header, body in frames if body]
    assert payloads == [b"v1"]
    assert b"v2" not in b"".join(body for _, body in frames)
