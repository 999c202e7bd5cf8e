"""A single Direct Get (no batch, no multi_last) is answered with one publish and counted by its status.

The responder answers these without the batch machinery (no iterator sliced into a list): the reply
must still be the one frame nats-server sends, and the requests counter must still say ok or 404.
"""

from __future__ import annotations

from cluster.direct_get.answer import Responder, ResponderRole, answer_direct_get
from cluster.direct_get.request import DirectGetRequest
from cluster.direct_get.responder import DirectGetResponder
from gateway.headers import decode_headers
from gateway.router import Message
from storage.config import StoreConfig
from storage.memory import MemoryStreamStore
from storage.nats_time import format_rfc3339_nano
from tests.cluster.test_direct_get_batches import collect, responder_over


def counted(responder: DirectGetResponder, status: str) -> float:
    sample = responder._ctx.metrics.registry.get_sample_value(
        "jetraft_direct_get_requests_total", {"stream": "S", "node": "n1", "role": "leader", "status": status}
    )
    return sample or 0.0


def store_with(*subjects: str) -> MemoryStreamStore:
    store = MemoryStreamStore(StoreConfig())
    for seq, subject in enumerate(subjects, 1):
        store.store_msg(subject, b"NATS/1.0\r\nApp: %d\r\n\r\n" % seq, b"payload %d" % seq, seq)
    return store


async def test_a_found_key_is_one_message_with_its_headers_and_counts_ok() -> None:
    router, responder = responder_over(store_with("kv.a", "kv.b", "kv.a"))
    replies = collect(router, "_INBOX.x.*")
    router.publish("$JS.API.DIRECT.GET.S.kv.a", b"", "_INBOX.x.1")
    assert [m.payload for m in replies] == [b"payload 3"]
    headers = decode_headers(replies[0].headers)
    assert headers.status is None
    assert headers.get("App") == "3"
    assert headers.get("Nats-Sequence") == "3"
    assert headers.get("Nats-Subject") == "kv.a"
    assert headers.get("Jetraft-Last-Sequence") == "3"
    assert counted(responder, "ok") == 1
    assert counted(responder, "404") == 0


async def test_a_missing_key_and_a_missing_sequence_are_one_404_each() -> None:
    router, responder = responder_over(store_with("kv.a"))
    replies = collect(router, "_INBOX.x.*")
    router.publish("$JS.API.DIRECT.GET.S.kv.nothing", b"", "_INBOX.x.1")
    router.publish("$JS.API.DIRECT.GET.S", b'{"seq": 9}', "_INBOX.x.2")
    assert [(m.subject, decode_headers(m.headers).status, m.payload) for m in replies] == [
        ("_INBOX.x.1", 404, b""),
        ("_INBOX.x.2", 404, b""),
    ]
    assert counted(responder, "404") == 2
    assert counted(responder, "ok") == 0


async def test_no_hdr_answers_a_plain_message() -> None:
    router, responder = responder_over(store_with("kv.a"))
    replies: list[Message] = collect(router, "_INBOX.x.*")
    router.publish("$JS.API.DIRECT.GET.S", b'{"seq": 1, "no_hdr": true}', "_INBOX.x.1")
    assert [(m.headers, m.payload) for m in replies] == [(None, b"payload 1")]
    assert counted(responder, "ok") == 1


def test_a_message_answers_header_lines_in_nats_servers_order_then_jetraft_s() -> None:
    store = store_with("kv.a", "kv.b")
    responder = Responder("n2", ResponderRole.FOLLOWER, "KV_S")
    stamp = format_rfc3339_nano(store.load_msg(2).ts_ns).encode()
    single = answer_direct_get(DirectGetRequest(seq=2), store, responder, last_seq=5)
    assert single == [
        (
            b"NATS/1.0\r\nApp: 2\r\nNats-Stream: KV_S\r\nNats-Subject: kv.b\r\nNats-Sequence: 2\r\n"
            b"Nats-Time-Stamp: " + stamp + b"\r\nJetraft-Node: n2\r\nJetraft-Role: follower\r\n"
            b"Jetraft-Last-Sequence: 5\r\n\r\n",
            b"payload 2",
        )
    ]
    batch = answer_direct_get(DirectGetRequest(seq=2, batch=1), store, responder, last_seq=5)
    assert batch[0][0] == (
        b"NATS/1.0\r\nApp: 2\r\nNats-Stream: KV_S\r\nNats-Subject: kv.b\r\nNats-Sequence: 2\r\n"
        b"Nats-Time-Stamp: " + stamp + b"\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 0\r\n"
        b"Jetraft-Node: n2\r\nJetraft-Role: follower\r\nJetraft-Last-Sequence: 5\r\n\r\n"
    )
