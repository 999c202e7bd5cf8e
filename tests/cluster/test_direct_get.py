"""Direct Get against the replies nats-server 2.15.1 sent in trace 08, byte for byte.

The DGET stream of the trace is rebuilt in a MemoryStreamStore with the
trace's own timestamps, so even Nats-Time-Stamp matches; jetraft's extra
headers are checked, then removed before comparing.
"""

import re

import pytest

from cluster.direct_get.answer import (
    Responder,
    ResponderRole,
    answer_direct_get,
    bad_request_frames,
    is_behind,
    min_last_seq_frames,
)
from cluster.direct_get.request import (
    BAD_REQUEST,
    EMPTY_REQUEST,
    MALFORMED_REQUEST,
    BadDirectGet,
    DirectGetRequest,
    parse_direct_get,
    split_direct_subject,
)
from storage.memory import MemoryStreamStore
from storage.nats_time import parse_rfc3339_nano
from tests.cluster.trace_data import Reply, client_request, header_value, server_replies, trace_lines

TRACE = "08-direct-get.txt"
RESPONDER = Responder(node="n2", role=ResponderRole.FOLLOWER, stream="DGET")
_JETRAFT = re.compile(rb"Jetraft-[A-Za-z-]+: [^\r]*\r\n")


def _trace_timestamps() -> dict[int, int]:
    """Each DGET sequence's timestamp as the trace printed it."""
    stamps: dict[int, int] = {}
    seq = None
    for line in trace_lines(TRACE):
        if line.startswith("S: Nats-Sequence: "):
            seq = int(line.split(": ")[2])
        elif line.startswith("S: Nats-Time-Stamp: ") and seq is not None:
            stamps[seq] = parse_rfc3339_nano(line.split(": ")[2])
    return stamps


SETUP = [
    ("dg.a", None, b"a1"),
    ("dg.b", b"NATS/1.0\r\nX-Custom: yes\r\n\r\n", b"b1"),
    ("dg.a", None, b"a2"),
    ("dg.c.x", None, b"cx1"),
    ("dg.c.y", None, b"cy1"),
    ("dg.a", None, b"a3"),
    ("dg.c.x", None, b"cx2"),
]


@pytest.fixture
def dget() -> MemoryStreamStore:
    store = MemoryStreamStore()
    stamps = _trace_timestamps()
    for seq, (subject, headers, payload) in enumerate(SETUP, start=1):
        assert store.store_msg(subject, headers, payload, stamps[seq]).seq == seq
    return store


def _answer(store: MemoryStreamStore, subject: str, payload: bytes) -> list[Reply]:
    stream, appended = split_direct_subject(subject)
    assert stream == "DGET"
    request = parse_direct_get(payload, appended)
    last_seq = store.state().last_seq
    if isinstance(request, BadDirectGet):
        frames = bad_request_frames(request, RESPONDER, last_seq)
    else:
        frames = answer_direct_get(request, store, RESPONDER)
    replies = []
    for header, body in frames:
        if header is not None:
            extras = _JETRAFT.findall(header)
            assert extras == [
                b"Jetraft-Node: n2\r\n",
                b"Jetraft-Role: follower\r\n",
                b"Jetraft-Last-Sequence: %d\r\n" % last_seq,
            ]
            header = _JETRAFT.sub(b"", header)
        replies.append(Reply(header, body))
    return replies


TRACE_CASES = [
    "jsm.get_msg('DGET', seq=2, direct=True)",
    "jsm.get_msg('DGET', seq=1, direct=True)",
    "(last_by_subj in body)",
    "(subject appended, empty payload)",
    "(next_by_subj with seq)",
    "next_by_subj with wildcard",
    'batch: {"seq":1,"batch":3}',
    "batch past the end",
    "batch with max_bytes",
    "batch with next_by_subj",
    'multi_last: {"multi_last":["dg.a","dg.c.*"]}',
    "multi_last with up_to_seq",
    "multi_last with batch",
    "start_time (between seq 3 and 4)",
    "start_time with batch",
    "no_hdr",
    '404: {"seq":99}',
    "404: subject appended, no such subject",
    "404 multi_last with no match",
    "408: empty payload",
    "408: {} (nothing set)",
    "408: malformed JSON",
    "408: conflicting options",
    "408: subject appended with a payload",
    "408: subject appended with malformed payload",
]


@pytest.mark.parametrize("marker", TRACE_CASES)
def test_matches_trace_08(dget: MemoryStreamStore, marker: str) -> None:
    subject, payload = client_request(TRACE, marker)
    assert _answer(dget, subject, payload) == server_replies(TRACE, marker)


@pytest.mark.parametrize("marker", ["413: {", "multi_last with batch over 1025 subjects"])
def test_too_many_results_matches_trace(dget: MemoryStreamStore, marker: str) -> None:
    for i in range(1025):
        dget.store_msg(f"dg.many.{i}", None, b"m")
    subject, payload = client_request(TRACE, marker)
    assert _answer(dget, subject, payload) == server_replies(TRACE, marker)


def test_exactly_1024_subjects_is_allowed(dget: MemoryStreamStore) -> None:
    for i in range(1024):
        dget.store_msg(f"dg.many.{i}", None, b"m")
    replies = _answer(dget, "$JS.API.DIRECT.GET.DGET", b'{"multi_last":["dg.many.*"]}')
    assert len(replies) == 1025 and replies[-1].header is not None
    assert replies[-1].header.startswith(b"NATS/1.0 204 EOB\r\n")


def test_mirror_names_itself_and_no_hdr_has_no_extras(dget: MemoryStreamStore) -> None:
    mirror = Responder(node="m1", role=ResponderRole.MIRROR, stream="DGET_M")
    [(header, body)] = answer_direct_get(DirectGetRequest(seq=1), dget, mirror)
    assert body == b"a1"
    assert header is not None and b"Nats-Stream: DGET_M\r\n" in header
    assert header.endswith(b"Jetraft-Node: m1\r\nJetraft-Role: mirror\r\nJetraft-Last-Sequence: 7\r\n\r\n")
    assert answer_direct_get(DirectGetRequest(seq=1, no_hdr=True), dget, mirror) == [(None, b"a1")]


def test_up_to_time(dget: MemoryStreamStore) -> None:
    stamps = _trace_timestamps()
    # up to (not including) the time of seq 4: the last a and nothing under dg.c
    request = DirectGetRequest(multi_last=("dg.a", "dg.c.*"), up_to_time_ns=stamps[4])
    frames = answer_direct_get(request, dget, RESPONDER)
    assert [body for _, body in frames] == [b"a2", b""]
    assert frames[-1][0] is not None and b"Nats-UpTo-Sequence: 3\r\n" in frames[-1][0]
    before_all = DirectGetRequest(multi_last=("dg.>",), up_to_time_ns=stamps[1])
    [(header, _)] = answer_direct_get(before_all, dget, RESPONDER)
    assert header is not None and header.startswith(b"NATS/1.0 404 No Results\r\n")


def test_adr31_rev1_users_example() -> None:
    store = MemoryStreamStore()
    for key, value in [
        ("1234.name", b"Bob"),
        ("1234.surname", b"Smith"),
        ("1234.address", b"1 Main Street"),
        ("1234.address", b"10 Oak Lane"),
    ]:
        store.store_msg(f"$KV.USERS.{key}", None, value)
    users = Responder("n1", ResponderRole.LEADER, "KV_USERS")
    latest = answer_direct_get(DirectGetRequest(multi_last=("$KV.USERS.1234.>",)), store, users)
    assert [body for _, body in latest[:-1]] == [b"Bob", b"Smith", b"10 Oak Lane"]
    as_of_3 = answer_direct_get(DirectGetRequest(multi_last=("$KV.USERS.1234.>",), up_to_seq=3), store, users)
    assert [body for _, body in as_of_3[:-1]] == [b"Bob", b"Smith", b"1 Main Street"]
    two_keys = DirectGetRequest(multi_last=("$KV.USERS.1234.name", "$KV.USERS.1234.address"))
    assert [body for _, body in answer_direct_get(two_keys, store, users)[:-1]] == [b"Bob", b"10 Oak Lane"]


def test_batch_eob_headers(dget: MemoryStreamStore) -> None:
    frames = answer_direct_get(DirectGetRequest(seq=6, batch=5), dget, RESPONDER)
    eob = Reply(frames[-1][0], frames[-1][1])
    assert header_value(eob, "Nats-Num-Pending") == "0"
    assert header_value(eob, "Nats-Last-Sequence") == "7"
    # a batch from a deleted start steps over the gap
    dget.remove_msg(2)
    frames = answer_direct_get(DirectGetRequest(seq=2, batch=1), dget, RESPONDER)
    assert frames[0][1] == b"a2"
    # but a single get of a deleted sequence is 404
    [(header, _)] = answer_direct_get(DirectGetRequest(seq=2), dget, RESPONDER)
    assert header is not None and header.startswith(b"NATS/1.0 404 Message Not Found\r\n")


@pytest.mark.parametrize(
    ("payload", "appended", "expected"),
    [
        (b"", None, EMPTY_REQUEST),
        (b"null", None, EMPTY_REQUEST),
        (b'{"no_hdr":true}', None, EMPTY_REQUEST),
        (b"[]", None, MALFORMED_REQUEST),
        (b'{"seq":"1"}', None, MALFORMED_REQUEST),
        (b'{"seq":-1}', None, MALFORMED_REQUEST),
        (b'{"start_time":"noon"}', None, MALFORMED_REQUEST),
        (b'{"seq":1,"start_time":"2026-11-22T14:19:00Z"}', None, BAD_REQUEST),
        (b'{"last_by_subj":"a","next_by_subj":"a"}', None, BAD_REQUEST),
        (b'{"last_by_subj":"a","batch":2}', None, BAD_REQUEST),
        (b'{"multi_last":["a"],"next_by_subj":"a"}', None, BAD_REQUEST),
        (b'{"multi_last":["a"],"up_to_seq":1,"up_to_time":"2026-11-22T14:19:00Z"}', None, BAD_REQUEST),
        (b'{"seq":1,"batch":-1}', None, BAD_REQUEST),
        (b'{"batch":2}', "dg.a", BAD_REQUEST),
        (b'{"multi_last":["x"]}', "dg.a", BAD_REQUEST),
    ],
)
def test_request_statuses(payload: bytes, appended: str | None, expected: BadDirectGet) -> None:
    assert parse_direct_get(payload, appended) == expected


def test_request_forms_and_extensions() -> None:
    assert parse_direct_get(b'{"seq":3,"next_by_subj":"a.*","batch":2,"max_bytes":10}') == DirectGetRequest(
        seq=3, next_by_subj="a.*", batch=2, max_bytes=10
    )
    # the subject-appended form keeps options that select nothing (as nats-server) and min_last_seq
    assert parse_direct_get(b'{"no_hdr":true,"min_last_seq":5}', "k.v") == DirectGetRequest(
        last_by_subj="k.v", no_hdr=True, min_last_seq=5
    )
    request = parse_direct_get(b'{"last_by_subj":"a","min_last_seq":9}')
    assert isinstance(request, DirectGetRequest) and is_behind(request, 8) and not is_behind(request, 9)
    [(header, body)] = min_last_seq_frames(RESPONDER, 8)
    assert header == (
        b"NATS/1.0 412 Min Last Sequence\r\nJetraft-Node: n2\r\nJetraft-Role: follower\r\n"
        b"Jetraft-Last-Sequence: 8\r\n\r\n"
    )
    assert body == b""
    assert split_direct_subject("$JS.API.DIRECT.GET.KV_x.$KV.x.a.b") == ("KV_x", "$KV.x.a.b")
    assert split_direct_subject("$JS.API.DIRECT.GET.KV_x") == ("KV_x", None)
    with pytest.raises(ValueError):
        split_direct_subject("$JS.API.STREAM.INFO.X")


def test_times_past_the_64_bit_range_are_answered_not_raised() -> None:
    store = MemoryStreamStore()
    store.store_msg("far.a", None, b"1", 1_000)
    responder = Responder("n1", ResponderRole.LEADER, "FAR")
    late = parse_direct_get(b'{"start_time":"2999-01-01T00:00:00Z"}')
    assert isinstance(late, DirectGetRequest)
    frames = answer_direct_get(late, store, responder, 1)
    assert len(frames) == 1 and frames[0][0] is not None and frames[0][0].startswith(b"NATS/1.0 404")
    early = parse_direct_get(b'{"start_time":"1000-01-01T00:00:00Z","batch":5}')
    assert isinstance(early, DirectGetRequest)
    assert answer_direct_get(early, store, responder, 1)[0][1] == b"1"
    everything = parse_direct_get(b'{"multi_last":["far.>"],"up_to_time":"2999-01-01T00:00:00Z"}')
    assert isinstance(everything, DirectGetRequest)
    assert answer_direct_get(everything, store, responder, 1)[0][1] == b"1"


@pytest.mark.parametrize(
    ("subject", "payload", "status"),
    # as a real nats-server 2.15.1 answered each
    [
        ("$JS.API.DIRECT.GET.DGET", b'{"last_by_subj":"a..b"}', b"NATS/1.0 404 Message Not Found"),
        ("$JS.API.DIRECT.GET.DGET", b'{"next_by_subj":"a.>.b"}', b"NATS/1.0 404 Message Not Found"),
        ("$JS.API.DIRECT.GET.DGET", b'{"next_by_subj":"a.","batch":2}', b"NATS/1.0 404 Message Not Found"),
        ("$JS.API.DIRECT.GET.DGET", b'{"multi_last":["a b"]}', b"NATS/1.0 404 No Results"),
        ("$JS.API.DIRECT.GET.DGET.a.>.b", b"", b"NATS/1.0 404 Message Not Found"),
    ],
)
def test_subjects_that_are_no_valid_filter_find_nothing(
    dget: MemoryStreamStore, subject: str, payload: bytes, status: bytes
) -> None:
    [reply] = _answer(dget, subject, payload)
    assert reply.header is not None and reply.header.startswith(status + b"\r\n")
