from dataclasses import dataclass, field

import orjson

from cluster.api.errors import JSErrors
from cluster.stream.config import StreamConfig, StreamSource, SubjectTransformConfig
from cluster.stream.config_check import normalize_stream_config
from cluster.stream.dedup import DedupWindow
from cluster.stream.entries import Rollup
from cluster.stream.publish import (
    UNPARSABLE_SEQ,
    Accepted,
    Duplicate,
    Rejected,
    decision_ack,
    duplicate_ack,
    error_ack,
    prepare_publish,
    pub_ack,
)
from gateway.headers import encode_headers
from tests.cluster.trace_data import section, server_json

NOW = 1_700_000_000_000_000_000
PUBS = normalize_stream_config(
    StreamConfig(name="PUBS", subjects=("pubs.>",), max_msg_size=512, duplicate_window=60 * 10**9)
)


@dataclass
class FakeView:
    """The applied state of trace 06's stream, kept by hand for the pure checks."""

    last_seq: int = 0
    last_msg_id: str = ""
    per_subject: dict[str, int] = field(default_factory=dict)
    window: DedupWindow = field(default_factory=lambda: DedupWindow(60 * 10**9))

    def last_seq_for_subject(self, subject: str) -> int:
        return self.per_subject.get(subject, 0)

    def duplicate_of(self, msg_id: str, now_ns: int) -> int | None:
        return self.window.lookup(msg_id, now_ns)

    def store(self, decision: Accepted) -> int:
        self.last_seq += 1
        entry = decision.entry
        self.per_subject[entry.subject] = self.last_seq
        self.last_msg_id = entry.msg_id
        self.window.record(entry.msg_id, self.last_seq, entry.timestamp_ns)
        return self.last_seq


def _hdr(**fields: str) -> bytes:
    return encode_headers([(k.replace("_", "-"), v) for k, v in fields.items()])


def _publish(view: FakeView, subject: str, payload: bytes, headers: dict[str, str] | None = None) -> bytes:
    """Decide a publish as the leader would, store accepted ones, and give the PubAck bytes."""
    header = encode_headers(list(headers.items())) if headers else b""
    decision = prepare_publish(PUBS, subject, header, payload, NOW, view)
    if isinstance(decision, Accepted):
        return pub_ack("PUBS", view.store(decision))
    return decision_ack("PUBS", decision)


def test_trace_06_publish_sequence_byte_for_byte() -> None:
    trace = "06-publish-puback.txt"
    view = FakeView()
    steps = [
        ("js.publish('pubs.a', b'first')", "pubs.a", b"first", None),
        ("b'second', headers={'Nats-Msg-Id'", "pubs.a", b"second", {"Nats-Msg-Id": "msg-1"}),
        ("b'second again'", "pubs.a", b"second again", {"Nats-Msg-Id": "msg-1"}),
        ("(last is 2: mismatch)", "pubs.b", b"x", {"Nats-Expected-Last-Sequence": "1"}),
        (
            "b'ok', headers={'Nats-Expected-Last-Sequence': '2'}",
            "pubs.b",
            b"ok",
            {"Nats-Expected-Last-Sequence": "2"},
        ),
        ("(last on pubs.a is 2: mismatch)", "pubs.a", b"y", {"Nats-Expected-Last-Subject-Sequence": "1"}),
        ("b'z'", "pubs.a", b"z", {"Nats-Expected-Last-Subject-Sequence": "2"}),
        ("(0 = subject must be empty: ok)", "pubs.new", b"n", {"Nats-Expected-Last-Subject-Sequence": "0"}),
        ("(subject not empty: mismatch)", "pubs.new", b"n2", {"Nats-Expected-Last-Subject-Sequence": "0"}),
        ("Nats-Expected-Last-Msg-Id': 'nope'", "pubs.c", b"c", {"Nats-Expected-Last-Msg-Id": "nope"}),
        ("stream='OTHER'", "pubs.c", b"c", {"Nats-Expected-Stream": "OTHER"}),
        ("b'B' * 700", "pubs.big", b"B" * 700, None),
    ]
    for marker, subject, payload, headers in steps:
        # the ack nats-py got (`S: {` line), compared as bytes
        expected = next(line[3:].encode() for line in section(trace, marker) if line.startswith("S: {"))
        assert _publish(view, subject, payload, headers) == expected, marker
    assert view.last_seq == 5


def test_duplicate_and_domain_acks() -> None:
    assert duplicate_ack("PUBS", 2) == b'{"stream":"PUBS","seq":2,"duplicate": true}'
    assert pub_ack("S", 7, domain="hub") == b'{"stream":"S","domain":"hub","seq":7}'
    assert duplicate_ack("S", 7, domain="hub") == b'{"stream":"S","domain":"hub","seq":7,"duplicate": true}'
    body = orjson.loads(error_ack("S", JSErrors.STREAM_NOT_MATCH()))
    assert body == {"error": JSErrors.STREAM_NOT_MATCH().to_json(), "stream": "S", "seq": 0}


def test_header_fields_are_lifted_into_the_entry() -> None:
    header = encode_headers(
        [
            ("Nats-Msg-Id", "m1"),
            ("Nats-Expected-Last-Sequence", "4"),
            ("Nats-Expected-Last-Subject-Sequence", "3"),
            ("Nats-Expected-Last-Subject-Sequence-Subject", "pubs.other"),
            ("Nats-Expected-Last-Msg-Id", "m0"),
            ("Nats-Expected-Stream", "PUBS"),
        ]
    )
    decision = prepare_publish(PUBS, "pubs.a", header, b"x", NOW)
    assert isinstance(decision, Accepted)
    entry = decision.entry
    assert (entry.msg_id, entry.expected_last_seq, entry.expected_last_subject_seq) == ("m1", 4, 3)
    assert entry.expected_last_subject_seq_subject == "pubs.other"
    assert (entry.expected_last_msg_id, entry.expected_stream) == ("m0", "PUBS")
    assert entry.header == header and entry.timestamp_ns == NOW


def test_subject_override_for_expected_subject_sequence() -> None:
    view = FakeView(last_seq=9, per_subject={"pubs.other": 9})
    header = encode_headers(
        [
            ("Nats-Expected-Last-Subject-Sequence", "9"),
            ("Nats-Expected-Last-Subject-Sequence-Subject", "pubs.other"),
        ]
    )
    assert isinstance(prepare_publish(PUBS, "pubs.a", header, b"x", NOW, view), Accepted)
    alone = encode_headers([("Nats-Expected-Last-Subject-Sequence-Subject", "pubs.other")])
    decision = prepare_publish(PUBS, "pubs.a", alone, b"x", NOW, view)
    assert isinstance(decision, Rejected) and decision.error.err_code == 10193


def test_unparsable_expected_sequence_never_matches() -> None:
    view = FakeView(last_seq=3)
    header = encode_headers([("Nats-Expected-Last-Sequence", "three")])
    decision = prepare_publish(PUBS, "pubs.a", header, b"x", NOW, view)
    assert isinstance(decision, Rejected)
    assert decision.error.description == "wrong last sequence: 3"
    unchecked = prepare_publish(PUBS, "pubs.a", header, b"x", NOW)
    assert isinstance(unchecked, Accepted) and unchecked.entry.expected_last_seq == UNPARSABLE_SEQ


def test_rollup_rules() -> None:
    sub = encode_headers([("Nats-Rollup", "sub")])
    denied = prepare_publish(PUBS, "pubs.a", sub, b"x", NOW)
    assert isinstance(denied, Rejected)
    assert denied.error.to_json() == {"code": 500, "err_code": 10111, "description": "rollup not permitted"}
    kv = normalize_stream_config(StreamConfig(name="KV", subjects=("kv.>",), allow_rollup_hdrs=True))
    ok = prepare_publish(kv, "kv.a", encode_headers([("Nats-Rollup", "ALL")]), b"x", NOW)
    assert isinstance(ok, Accepted) and ok.entry.rollup is Rollup.ALL
    bad = prepare_publish(kv, "kv.a", encode_headers([("Nats-Rollup", "most")]), b"x", NOW)
    assert isinstance(bad, Rejected) and bad.error.description == 'rollup value invalid: "most"'


def test_config_level_rejections() -> None:
    mirror = normalize_stream_config(StreamConfig(name="M", mirror=StreamSource(name="PUBS")))
    assert isinstance(prepare_publish(mirror, "pubs.a", b"", b"x", NOW), Rejected)
    sealed = StreamConfig(name="PUBS", subjects=("pubs.>",), sealed=True, max_msg_size=-1)
    decision = prepare_publish(sealed, "pubs.a", b"", b"x", NOW)
    assert isinstance(decision, Rejected) and decision.error.err_code == 10109
    # headers count towards max_msg_size
    header = encode_headers([("X-Pad", "p" * 500)])
    decision = prepare_publish(PUBS, "pubs.a", header, b"x", NOW)
    assert isinstance(decision, Rejected) and decision.error.err_code == 10054
    decision = prepare_publish(PUBS, "pubs.a", b"garbage", b"x", NOW)
    assert isinstance(decision, Rejected) and decision.error.err_code == 10003


def test_dedup_window_expiry_and_forgetting() -> None:
    window = DedupWindow(1000)
    window.record("a", 1, 100)
    window.record("b", 2, 600)
    assert window.lookup("a", 1099) == 1
    assert window.lookup("a", 1100) is None
    window.expire(1100)
    assert window.items() == [("b", 2, 600)]
    window.record("b", 5, 1200)  # a re-used id (after its message left) moves to the back
    assert window.lookup("b", 1300) == 5 and window.seqs() == [5]
    window.forget_seqs([2, 5])
    assert len(window) == 0
    window.reset(0)
    window.record("c", 9, 1)
    assert len(window) == 0  # disabled


def test_duplicate_wins_over_expected_headers_for_retries() -> None:
    view = FakeView()
    first = prepare_publish(
        PUBS, "pubs.a", _hdr(Nats_Msg_Id="r", Nats_Expected_Last_Sequence="0"), b"x", NOW, view
    )
    assert isinstance(first, Accepted)
    view.store(first)
    retry = prepare_publish(
        PUBS, "pubs.a", _hdr(Nats_Msg_Id="r", Nats_Expected_Last_Sequence="0"), b"x", NOW, view
    )
    assert retry == Duplicate(1)
    assert server_json("06-publish-puback.txt", "b'second again'") == duplicate_ack("PUBS", 2)


def test_nats_ttl_needs_allow_msg_ttl_and_a_valid_value() -> None:
    # answers of a clustered nats-server 2.15.1, per value, without and with allow_msg_ttl
    ttls = normalize_stream_config(StreamConfig(name="T", subjects=("t.>",), allow_msg_ttl=True))
    disabled = orjson.loads(error_ack("PUBS", JSErrors.MESSAGE_TTL_DISABLED()))
    assert disabled == {
        "error": {"code": 400, "err_code": 10166, "description": "per-message TTL is disabled"},
        "stream": "PUBS",
        "seq": 0,
    }
    cases = {
        "5": (10166, None),
        "never": (10166, None),
        "abc": (10166, 10165),
        "0": (10166, 10165),
        "500ms": (10166, 10165),
        "-1": (10166, 10165),
        "1e3": (10166, 10165),
        "00": (None, None),  # zero: no TTL at all
        "1.5s": (10166, None),
        "1h": (10166, None),
    }
    for value, (without, with_ttl) in cases.items():
        header = _hdr(Nats_TTL=value)
        for cfg, expected in ((PUBS, without), (ttls, with_ttl)):
            decision = prepare_publish(cfg, "pubs.a" if cfg is PUBS else "t.a", header, b"x", NOW, FakeView())
            if expected is None:
                assert isinstance(decision, Accepted), (value, cfg.name)
                assert decision.entry.header == header  # stored as sent; the marker floor is applied later
            else:
                assert isinstance(decision, Rejected) and decision.error.err_code == expected, (value, cfg.name)


def test_a_ttl_error_comes_before_duplicate_detection() -> None:
    view = FakeView()
    first = prepare_publish(PUBS, "pubs.a", _hdr(Nats_Msg_Id="m"), b"x", NOW, view)
    assert isinstance(first, Accepted)
    view.store(first)
    again = prepare_publish(PUBS, "pubs.a", _hdr(Nats_Msg_Id="m", Nats_TTL="5"), b"x", NOW, view)
    assert isinstance(again, Rejected) and again.error == JSErrors.MESSAGE_TTL_DISABLED()


def test_subject_transform_maps_the_stored_subject_and_expectations_use_it() -> None:
    # as a real nats-server 2.15.1 stored them (tests/test_subject_transform.py has the full set)
    cfg = normalize_stream_config(
        StreamConfig(
            name="T", subjects=("in.>",), subject_transform=SubjectTransformConfig("in.*.*", "out.$2.$1")
        )
    )
    decision = prepare_publish(cfg, "in.a.b", b"", b"x", NOW)
    assert isinstance(decision, Accepted) and decision.entry.subject == "out.b.a"
    for unmapped in ("in.a", "in.a.b.c", "in.*.b"):  # the source takes neither: stored as published
        decision = prepare_publish(cfg, unmapped, b"", b"x", NOW)
        assert isinstance(decision, Accepted) and decision.entry.subject == unmapped
    # Nats-Expected-Last-Subject-Sequence is about the subject the message is stored under
    view = FakeView(last_seq=4, per_subject={"out.b.a": 4})
    headers = encode_headers([("Nats-Expected-Last-Subject-Sequence", "4")])
    assert isinstance(prepare_publish(cfg, "in.a.b", headers, b"x", NOW, view), Accepted)
