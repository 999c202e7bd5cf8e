"""Wire codec: what comes off the wire is validated before the core sees it."""

from __future__ import annotations

import pytest

from raft.codec import CodecError, message_from_pb, message_to_pb
from raft.types import Entry, EntryType, Message, MessageType


def _append(entries: tuple[Entry, ...], prev_index: int = 4) -> Message:
    return Message(
        type=MessageType.APPEND,
        from_="n1",
        to="n2",
        term=3,
        index=prev_index,
        log_term=2,
        entries=entries,
        commit=4,
    )


def test_append_with_mixed_entries_round_trips() -> None:
    msg = _append((Entry(3, 5, data=b"a"), Entry(3, 6, EntryType.CONF_CHANGE, b"cc"), Entry(3, 7)))
    pb = message_to_pb("g", msg)
    assert pb.group == "g"
    assert message_from_pb(pb) == msg


def test_entries_that_do_not_follow_the_previous_index_are_refused() -> None:
    pb = message_to_pb("g", _append((Entry(3, 5), Entry(3, 7))))
    with pytest.raises(CodecError, match="not consecutive"):
        message_from_pb(pb)
    pb = message_to_pb("g", _append((Entry(3, 6),)))
    with pytest.raises(CodecError, match="not consecutive"):
        message_from_pb(pb)


def test_unknown_entry_type_is_refused() -> None:
    pb = message_to_pb("g", _append((Entry(3, 5),)))
    pb.entries[0].type = 7
    with pytest.raises(CodecError, match="unknown raft entry type 7"):
        message_from_pb(pb)
