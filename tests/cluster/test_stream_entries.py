import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.stream.config import StreamConfig
from cluster.stream.config_check import normalize_stream_config
from cluster.stream.entries import (
    DeleteMsg,
    EntryDecodeError,
    EntryOp,
    Expire,
    Purge,
    Republished,
    Rollup,
    SkipMsgs,
    StoreAtSeq,
    StoreAtSeqs,
    StoreMsg,
    UpdateConfig,
    decode_entry,
)

text = st.text(max_size=40)
optional_text = st.none() | text
optional_seq = st.none() | st.integers(min_value=0, max_value=2**64 - 1)


@settings(max_examples=60, deadline=None)
@given(
    subject=st.text(min_size=1, max_size=60),
    header=st.binary(max_size=200),
    payload=st.binary(max_size=500),
    ts=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    msg_id=text,
    expected_stream=optional_text,
    expected_last_seq=optional_seq,
    expected_subject_seq=optional_seq,
    expected_subject=optional_text,
    expected_msg_id=optional_text,
    rollup=st.sampled_from(list(Rollup)),
)
def test_store_msg_round_trip(**fields: object) -> None:
    entry = StoreMsg(
        subject=fields["subject"],  # type: ignore[arg-type]
        header=fields["header"],  # type: ignore[arg-type]
        payload=fields["payload"],  # type: ignore[arg-type]
        timestamp_ns=fields["ts"],  # type: ignore[arg-type]
        msg_id=fields["msg_id"],  # type: ignore[arg-type]
        expected_stream=fields["expected_stream"],  # type: ignore[arg-type]
        expected_last_seq=fields["expected_last_seq"],  # type: ignore[arg-type]
        expected_last_subject_seq=fields["expected_subject_seq"],  # type: ignore[arg-type]
        expected_last_subject_seq_subject=fields["expected_subject"],  # type: ignore[arg-type]
        expected_last_msg_id=fields["expected_msg_id"],  # type: ignore[arg-type]
        rollup=fields["rollup"],  # type: ignore[arg-type]
    )
    data = entry.encode()
    assert data[0] == EntryOp.STORE_MSG
    assert decode_entry(data) == entry


def test_other_ops_round_trip() -> None:
    cfg = normalize_stream_config(StreamConfig(name="S", subjects=("s.>",), metadata={"k": "v"}))
    for entry in (
        Purge(),
        Purge(filter="s.a", keep=2),
        Purge(seq=12),
        DeleteMsg(seq=9),
        DeleteMsg(seq=10, erase=False),
        UpdateConfig(cfg),
        SkipMsgs(count=3),
        Expire(now_ns=77),
        Expire(now_ns=78, limit=4096),
        Republished(seq=5),
        StoreAtSeq(seq=42, subject="s.x", header=b"NATS/1.0\r\n\r\n", payload=b"p", timestamp_ns=123),
        StoreAtSeqs(()),
        StoreAtSeqs(tuple(StoreAtSeq(seq, "s.y", b"", b"%d" % seq, seq * 10) for seq in (3, 4, 9))),
    ):
        assert decode_entry(entry.encode()) == entry


def test_an_expire_entry_from_before_limits_expires_everything_due() -> None:
    # the body an EXPIRE entry had before it carried a limit: it must replay the same way
    assert decode_entry(bytes([EntryOp.EXPIRE]) + b'{"now":5}') == Expire(now_ns=5, limit=0)


def test_op_codes_are_append_only() -> None:
    # a replayed log depends on these numbers: never renumber, only add
    assert {op.name: op.value for op in EntryOp} == {
        "STORE_MSG": 1,
        "PURGE": 2,
        "DELETE_MSG": 3,
        "UPDATE_CONFIG": 4,
        "STORE_AT_SEQ": 5,
        "SKIP_MSGS": 6,
        "EXPIRE": 7,
        "REPUBLISHED": 8,
        "STORE_BATCH": 9,
        "STORE_AT_SEQS": 10,
    }


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x63{}",
        b"\x01\x00",
        StoreMsg("s", b"", b"abc", 1).encode()[:-1],
        b"\x02{not json",
        b"\x03{}",
    ],
)
def test_bad_entries_raise_decode_error(data: bytes) -> None:
    with pytest.raises(EntryDecodeError):
        decode_entry(data)


def test_a_store_at_seqs_entry_holds_only_messages_at_sequences() -> None:
    data = StoreAtSeqs((StoreAtSeq(1, "s", b"", b"p", 1),)).encode()
    with pytest.raises(EntryDecodeError):
        decode_entry(data[:-1])
    with pytest.raises(EntryDecodeError):
        decode_entry(data + b"\x00")
    inner = StoreMsg("s", b"", b"p", 1).encode()
    smuggled = bytes([EntryOp.STORE_AT_SEQS]) + (1).to_bytes(4, "big") + len(inner).to_bytes(4, "big") + inner
    with pytest.raises(EntryDecodeError, match="only messages at sequences"):
        decode_entry(smuggled)
