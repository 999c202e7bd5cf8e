import pytest

from cluster.api.errors import ApiError
from cluster.stream.msg_get import MsgGetRequest, answer_msg_get, parse_msg_get
from storage.memory import MemoryStreamStore
from storage.nats_time import parse_rfc3339_nano
from tests.cluster.trace_data import client_json, server_json, server_obj, trace_lines

TRACE = "07-msg-get.txt"


def _stamp(seq: int) -> int:
    """The trace's timestamp for a GETS sequence (from the responses that show it)."""
    for line in trace_lines(TRACE):
        if f'"seq":{seq},' in line and '"time":"' in line:
            return parse_rfc3339_nano(line.split('"time":"')[1].split('"')[0])
    return 1_000 + seq  # never shown in the trace


@pytest.fixture
def gets() -> MemoryStreamStore:
    store = MemoryStreamStore()
    store.store_msg("gets.a", None, b"a1", _stamp(1))
    store.store_msg("gets.b", b"NATS/1.0\r\nX-Custom: yes\r\n\r\n", b"b1", _stamp(2))
    store.store_msg("gets.a", None, b"a2", _stamp(3))
    store.store_msg("gets.c", None, b"c1", _stamp(4))
    return store


@pytest.mark.parametrize(
    "marker",
    [
        "jsm.get_msg('GETS', seq=2)",
        "jsm.get_msg('GETS', seq=1)",
        "(last_by_subj)",
        "(next_by_subj from seq 2)",
        "seq=99",
        "(missing last_by_subj)",
    ],
)
def test_matches_trace_07(gets: MemoryStreamStore, marker: str) -> None:
    assert answer_msg_get(client_json(TRACE, marker), gets) == server_json(TRACE, marker)


def test_cluster_trace_after_stepdown() -> None:
    store = MemoryStreamStore()
    store.store_msg(
        "clus.a",
        b"NATS/1.0\r\nX-App: trace\r\n\r\n",
        b"hello cluster",
        parse_rfc3339_nano("2026-11-22T14:19:47.994703075Z"),
    )
    store.store_msg("clus.b", None, b"second", parse_rfc3339_nano("2026-11-22T14:19:48.297461407Z"))
    for marker in ("get_msg('CLUS', seq=1)", "get_msg('CLUS', seq=2)"):
        assert answer_msg_get(client_json("13-cluster-r3.txt", marker), store) == server_json(
            "13-cluster-r3.txt", marker
        )


def test_errors(gets: MemoryStreamStore) -> None:
    assert server_obj(TRACE, "seq=99")["error"]["err_code"] == 10037
    for payload, err_code in [
        (b"", 10003),
        (b"{}", 10003),
        (b'{"seq":1,"last_by_subj":"gets.a"}', 10003),
        (b'{"seq":1,"batch":2}', 10003),
        (b'{"last_by_subj":"a","next_by_subj":"a"}', 10003),
        (b"{oops", 10025),
        (b'{"seq":"one"}', 10025),
    ]:
        with pytest.raises(ApiError) as info:
            parse_msg_get(payload)
        assert info.value.err_code == err_code, payload


def test_start_time_and_no_hdr(gets: MemoryStreamStore) -> None:
    assert parse_msg_get(b'{"start_time":"2026-11-22T14:18:56Z"}') == MsgGetRequest(
        start_time_ns=parse_rfc3339_nano("2026-11-22T14:18:56Z")
    )
    body = answer_msg_get(b'{"seq":2,"no_hdr":true}', gets)
    assert b'"hdrs"' not in body and b'"data":"YjE="' in body


def test_a_start_time_past_the_64_bit_range_finds_no_message(gets: MemoryStreamStore) -> None:
    # 2999 overflows int64 nanoseconds: it means "after every message", answered like any other miss
    body = answer_msg_get(b'{"start_time":"2999-01-01T00:00:00Z"}', gets)
    assert b'"err_code":10037' in body
    body = answer_msg_get(b'{"start_time":"1000-01-01T00:00:00Z"}', gets)
    assert b'"seq":1,' in body


@pytest.mark.parametrize(
    "payload", [b'{"last_by_subj":"$O.B1.M."}', b'{"last_by_subj":"a..b"}', b'{"next_by_subj":"gets.>.x"}']
)
def test_a_subject_that_is_no_valid_filter_finds_no_message(gets: MemoryStreamStore, payload: bytes) -> None:
    # nats-py's object store get("") asks for `$O.<bucket>.M.`: nats-server 2.15.1 answers 10037
    assert answer_msg_get(payload, gets) == (
        b'{"type":"io.nats.jetstream.api.v1.stream_msg_get_response",'
        b'"error":{"code":404,"err_code":10037,"description":"no message found"}}'
    )
