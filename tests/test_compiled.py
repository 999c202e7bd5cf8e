"""The modules setup.py compiles with mypyc: which are compiled here, and that each gives the same answers
compiled as its Python source does.

The Python source of each module is loaded a second time under another name (`pure_<module>`), so both
run in this process on the same inputs. Without a compiled build (no C compiler, JETRAFT_COMPILE=0, or a
worktree nobody compiled) the comparisons are skipped and say why; the rest of the suite then runs the
Python source, and against a compiled build it runs the compiled modules.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import itertools
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent

with (ROOT / "pyproject.toml").open("rb") as _file:
    MODULES: list[str] = tomllib.load(_file)["tool"]["jetraft"]["mypyc-modules"]


def source_of(name: str) -> Path:
    return ROOT / (name.replace(".", "/") + ".py")


def binary_of(name: str) -> Path | None:
    """The compiled module loaded for `name`, or None if its Python source was loaded. (Asked of the file
    system: a module compiled by mypyc may give its own __file__ and __spec__ a path that is not there.)"""
    loaded = importlib.import_module(name).__file__ or ""
    if loaded.endswith(".py"):
        return None
    source = source_of(name)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        binary = source.with_name(source.stem + suffix)
        if binary.exists():
            return binary
    raise AssertionError(f"{name} is loaded from {loaded}, which is neither its source nor beside it")


def is_compiled(name: str) -> bool:
    return binary_of(name) is not None


COMPILED = [name for name in MODULES if is_compiled(name)]
needs_compiled = pytest.mark.skipif(
    not COMPILED, reason="no compiled build here (make compile builds one): nothing to compare"
)


def pure(name: str) -> ModuleType:
    """The module's Python source, loaded beside the (maybe compiled) module of that name."""
    alias = "pure_" + name.replace(".", "_")
    if alias not in sys.modules:
        spec = importlib.util.spec_from_file_location(alias, source_of(name))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[alias] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
    return sys.modules[alias]


def both(name: str) -> tuple[ModuleType, ModuleType]:
    """(module as imported, its Python source)."""
    return importlib.import_module(name), pure(name)


def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    """What a call did, comparable across the two builds: its result's repr, or its exception's type and
    message."""
    try:
        return "returned", repr(call())
    except Exception as exc:
        return type(exc).__name__, str(exc)


def test_every_module_or_none_is_compiled(record_property: Callable[[str, object], None]) -> None:
    """A build compiles all of them or leaves all of them Python (setup.py removes a half-made build);
    one compiled and another not would mean a stale or partial build in the tree."""
    record_property("compiled_modules", ",".join(COMPILED) or "none")
    print("compiled:", ", ".join(COMPILED) or "none")
    assert COMPILED in ([], MODULES), f"only some modules are compiled: {COMPILED}"


@needs_compiled
def test_no_compiled_module_is_older_than_its_source() -> None:
    """A compiled module is loaded instead of its `.py`: an edit after compiling would not run at all."""
    stale = []
    for name in MODULES:
        binary = binary_of(name)
        assert binary is not None
        if binary.stat().st_mtime < source_of(name).stat().st_mtime:
            stale.append(name)
    assert not stale, f"{stale} changed after they were compiled: run `make compile` (or `make uncompile`)"


def test_the_pure_modules_really_are_the_sources() -> None:
    for name in ("storage.record", "gateway.protocol"):
        assert pure(name).__file__ == str(source_of(name))


# -- storage.record --------------------------------------------------------------------------------

subjects = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=40)
small_bytes = st.binary(max_size=300)


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(subjects, st.none() | small_bytes, small_bytes, st.integers(0, 2**64 - 1), st.integers(-(2**63), 2**63 - 1))
def test_record_encode_and_decode(subject: str, headers: bytes | None, payload: bytes, seq: int, ts: int) -> None:
    compiled, source = both("storage.record")
    raw = subject.encode()
    record = source.encode_record(raw, headers, payload, seq, ts)
    assert compiled.encode_record(raw, headers, payload, seq, ts) == record
    for module in (compiled, source):
        decoded = module.decode_record(record)
        assert (decoded.subject, decoded.headers, decoded.payload, decoded.seq, decoded.ts_ns) == (
            subject,
            headers,
            payload,
            seq,
            ts,
        )
    for call in ("record_header", "record_headers", "record_ts"):
        assert outcome(lambda call=call: getattr(compiled, call)(record)) == outcome(
            lambda call=call: getattr(source, call)(record)
        )


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.booleans())
def test_record_decode_of_any_bytes(data: bytes, verify: bool) -> None:
    compiled, source = both("storage.record")
    assert outcome(lambda: compiled.decode_record(data, verify_hash=verify)) == outcome(
        lambda: source.decode_record(data, verify_hash=verify)
    )
    for call in ("record_header", "record_headers"):
        assert outcome(lambda call=call: getattr(compiled, call)(data)) == outcome(
            lambda call=call: getattr(source, call)(data)
        )


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(subjects, st.none() | small_bytes, small_bytes, st.integers(8, 400), st.integers(0, 255))
def test_record_decode_of_damaged_records(
    subject: str, headers: bytes | None, payload: bytes, at: int, value: int
) -> None:
    """A record with one byte changed after its length field (subject length, headers length, flags):
    the field checks that only such bytes reach, without the hash to stop them first."""
    compiled, source = both("storage.record")
    record = bytearray(source.encode_record(subject.encode(), headers, payload, 1, 2))
    if at == 8:  # the length field's top byte: the headers flag
        record[3] ^= 0x80
    else:
        record[min(at, len(record) - 1)] = value
    damaged = bytes(record)
    assert outcome(lambda: compiled.decode_record(damaged, verify_hash=False)) == outcome(
        lambda: source.decode_record(damaged, verify_hash=False)
    )
    for call in ("record_header", "record_headers"):
        assert outcome(lambda call=call: getattr(compiled, call)(damaged)) == outcome(
            lambda call=call: getattr(source, call)(damaged)
        )


# -- cluster.stream.entries ------------------------------------------------------------------------

short_text = st.text(max_size=20)
optional_int = st.none() | st.integers(0, 2**64 - 1)


@st.composite
def store_msgs(draw: st.DrawFn, module: ModuleType) -> Any:
    return module.StoreMsg(
        subject=draw(subjects),
        header=draw(small_bytes),
        payload=draw(small_bytes),
        timestamp_ns=draw(st.integers(-(2**63), 2**63 - 1)),
        msg_id=draw(short_text),
        expected_stream=draw(st.none() | short_text),
        expected_last_seq=draw(optional_int),
        expected_last_subject_seq=draw(optional_int),
        expected_last_subject_seq_subject=draw(st.none() | short_text),
        expected_last_msg_id=draw(st.none() | short_text),
        rollup=module.Rollup(draw(st.integers(0, 2))),
    )


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_store_msg_entries_encode_and_decode(data: st.DataObject) -> None:
    compiled, source = both("cluster.stream.entries")
    message = data.draw(store_msgs(source))
    encoded = message.encode()
    fields = {field: getattr(message, field) for field in message.__dataclass_fields__}
    twin = compiled.StoreMsg(**{**fields, "rollup": compiled.Rollup(message.rollup)})
    assert twin.encode() == encoded
    assert repr(compiled.decode_entry(encoded)) == repr(source.decode_entry(encoded)) == repr(message)


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(st.sampled_from(range(0, 12)), st.binary(max_size=60))
def test_entries_decode_of_any_bytes(op: int, rest: bytes) -> None:
    compiled, source = both("cluster.stream.entries")
    data = bytes([op]) + rest
    assert outcome(lambda: compiled.decode_entry(data)) == outcome(lambda: source.decode_entry(data))


@needs_compiled
def test_other_entries_encode_and_decode() -> None:
    compiled, source = both("cluster.stream.entries")
    for name, args in [
        ("Purge", ("a.>", 3, 2)),
        ("DeleteMsg", (7, False)),
        ("SkipMsgs", (5,)),
        ("Expire", (1_700_000_000_000_000_000, 10)),
        ("Republished", (9,)),
        ("StoreAtSeq", (12, "a.b", b"NATS/1.0\r\n\r\n", b"payload", 1)),
    ]:
        encoded = getattr(source, name)(*args).encode()
        assert getattr(compiled, name)(*args).encode() == encoded
        assert repr(compiled.decode_entry(encoded)) == repr(source.decode_entry(encoded))
    batch = [source.StoreMsg("a.b", b"", b"x", 1), source.StoreMsg("a.c", b"", b"y", 2, msg_id="m")]
    encoded = source.StoreBatch("b1", tuple(batch)).encode()
    assert repr(compiled.decode_entry(encoded)) == repr(source.decode_entry(encoded))


# -- storage.seq_set, storage.seq_list, storage.index, storage.subject_tree ------------------------

operations = st.lists(st.tuples(st.sampled_from("adnpcif"), st.integers(0, 9000)), max_size=120)


@needs_compiled
@settings(max_examples=200, deadline=None)
@given(operations)
def test_seq_set_answers(steps: list[tuple[str, int]]) -> None:
    compiled, source = both("storage.seq_set")
    sets = (compiled.SeqSet(), source.SeqSet())
    for op, seq in steps:
        answers = []
        for seqs in sets:
            if op == "a":
                answers.append(seqs.add(seq))
            elif op == "d":
                answers.append(seqs.discard(seq))
            elif op == "n":
                answers.append((seqs.next_at_or_after(seq), seqs.next_at_or_after(seq - 100)))
            elif op == "p":
                answers.append((seqs.prev_at_or_before(seq), seqs.prev_at_or_before(seq - 100)))
            elif op == "c":
                answers.append(seqs.count_at_or_after(seq))
            elif op == "i":
                answers.append((list(seqs.iter_range(seq, seq + 300)), list(seqs.missing_in(seq, seq + 50))))
            else:
                answers.append((seqs.first(), seqs.last(), len(seqs), seq in seqs, seqs.chunks()))
        assert answers[0] == answers[1], (op, seq)


@needs_compiled
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.integers(2, 5)), min_size=1, max_size=12), operations)
def test_seq_list_answers(runs: list[tuple[int, int]], steps: list[tuple[str, int]]) -> None:
    compiled, source = both("storage.seq_list")
    seqs: list[int] = []
    at = 0
    for length, gap in runs:  # long runs and short ones, so both representations are met
        seqs.extend(range(at + gap, at + gap + length))
        at = seqs[-1]
    lists = (compiled.SeqList(seqs), source.SeqList(seqs))
    for op, seq in steps:
        seq %= at + 20
        answers = []
        for found in lists:
            if op == "a":
                answers.append(found.append(found.last + 1 + seq % 3) if len(found) else None)
            elif op in "dp":
                answers.append(found.remove(seq))
            elif op == "n":
                answers.append((found.next_at_or_after(seq), found.last_at_or_before(seq)))
            elif op == "c":
                answers.append(found.count_at_or_after(seq))
            elif op == "i":
                answers.append(list(found.iter_from(seq)))
            else:
                answers.append((list(found), list(found.runs()), len(found), found.run_count))
        assert answers[0] == answers[1], (op, seq)


@needs_compiled
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("arx"), st.integers(0, 30), st.integers(1, 400)), max_size=120))
def test_stream_index_answers(steps: list[tuple[str, int, int]]) -> None:
    compiled, source = both("storage.index")
    indexes = (compiled.StreamIndex(), source.StreamIndex())
    names = [f"s.{n % 5}.{n}" for n in range(31)]
    live: dict[int, tuple[str, int]] = {}
    seq = 0
    for op, key, size in steps:
        subject = names[key]
        if op == "a" or not live:
            seq += 1
            live[seq] = (subject, size)
            for index in indexes:
                index.add(seq, subject, size)
        elif op == "r":
            gone = sorted(live)[key % len(live)]
            for index in indexes:
                index.remove(gone, *live[gone])
            del live[gone]
        else:  # replace_single on a subject holding one message
            single = [at for at, (name, _) in live.items() if sum(1 for n, _ in live.values() if n == name) == 1]
            if not single:
                continue
            old = single[key % len(single)]
            seq += 1
            for index in indexes:
                index.replace_single(live[old][0], old, live[old][1], seq, size)
            live[seq] = (live.pop(old)[0], size)
        views = []
        for index in indexes:
            views.append(
                (
                    index.msgs,
                    index.bytes,
                    index.first_seq,
                    repr(index.filtered_state(key, ">")),
                    repr(index.filtered_state(1, "s.1.*")),
                    repr(index.filtered_state(key, "s.*.>")),
                    index.last_seq_matching("s.2.>", seq),
                    index.next_seq("s.*.*", key, lambda at: live[at][0]),
                    sorted(index.matching_subjects("s.3.*")),
                    index.single_size(subject, seq),
                )
            )
        assert views[0] == views[1], (op, key, size)


@needs_compiled
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.sampled_from("abc"), min_size=1, max_size=4)), max_size=60))
def test_subject_tree_answers(steps: list[tuple[bool, list[str]]]) -> None:
    compiled, source = both("storage.subject_tree")
    trees = (compiled.SubjectTree(), source.SubjectTree())
    for insert, tokens in steps:
        subject = ".".join(tokens)
        answers = [tree.insert(subject) if insert else tree.remove(subject) for tree in trees]
        assert answers[0] == answers[1]
        for filter_ in ("a.>", "*.b", "*.*.c", ">", subject):
            assert sorted(trees[0].match(filter_)) == sorted(trees[1].match(filter_))
        assert sorted(trees[0]) == sorted(trees[1]) and len(trees[0]) == len(trees[1])


# -- gateway.sublist, gateway.protocol -------------------------------------------------------------


class _Entry:
    __slots__ = ("name", "queue")

    def __init__(self, name: str, queue: str | None) -> None:
        self.name = name
        self.queue = queue


tokens = st.sampled_from(["a", "b", "c", "*"])
filters = st.lists(tokens, min_size=1, max_size=4).map(".".join) | st.lists(tokens, max_size=3).map(
    lambda head: ".".join([*head, ">"])
)
literal = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=5).map(".".join)


@needs_compiled
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), filters, st.sampled_from([None, "q1", "q2"]), literal), max_size=60))
def test_sublist_answers(steps: list[tuple[bool, str, str | None, str]]) -> None:
    compiled, source = both("gateway.sublist")
    sublists = (compiled.Sublist(cache_size=8), source.Sublist(cache_size=8))
    inserted: list[tuple[str, _Entry]] = []

    def names(result: Any) -> tuple[list[str], list[tuple[str, list[str]]]]:
        return (
            sorted(entry.name for entry in result.plain),
            sorted((queue, sorted(entry.name for entry in members)) for queue, members in result.queues),
        )

    for number, (insert, filter_, queue, subject) in enumerate(steps):
        if insert or not inserted:
            entry = _Entry(f"e{number}", queue)
            inserted.append((filter_, entry))
            for sublist in sublists:
                sublist.insert(filter_, entry)
        else:
            gone_filter, gone = inserted.pop(number % len(inserted))
            assert sublists[0].remove(gone_filter, gone) == sublists[1].remove(gone_filter, gone)
        assert names(sublists[0].match(subject)) == names(sublists[1].match(subject))
        assert len(sublists[0]) == len(sublists[1])


commands = st.sampled_from(
    [
        b"PUB a.b 5\r\nhello\r\n",
        b"PUB a.b _INBOX.x 0\r\n\r\n",
        b"HPUB a.b 22 27\r\nNATS/1.0\r\nX-A: 1\r\n\r\nhello\r\n",
        b"SUB a.* q 1\r\n",
        b"UNSUB 1 5\r\n",
        b"PING\r\n",
        b"pong\n",
        b'CONNECT {"verbose":false}\r\n',
        b"PUB a.b 3\r\nabcd\r\n",
        b"PUB a.b x\r\n",
        b"BOGUS\r\n",
    ]
)


def _parse(module: ModuleType, chunks: list[bytes]) -> list[tuple[str, str]]:
    from gateway.events import NEED_DATA

    parser = module.ClientCommandParser(max_payload=64, max_control_line=64)
    seen = []
    for chunk in chunks:
        parser.receive_data(chunk)
        for _ in range(100):  # every chunk holds fewer than 100 events
            step = outcome(parser.next_event)
            seen.append(step)
            if step[0] != "returned" or step[1] == repr(NEED_DATA):
                break
        if seen and seen[-1][0] != "returned":
            break
    return seen


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.lists(commands | st.binary(max_size=12), max_size=12), st.lists(st.integers(0, 200), max_size=4))
def test_protocol_parser_answers(parts: list[bytes], cuts: list[int]) -> None:
    compiled, source = both("gateway.protocol")
    stream = b"".join(parts)
    bounds = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    chunks = [stream[low:high] for low, high in itertools.pairwise(bounds)]
    assert _parse(compiled, chunks) == _parse(source, chunks)


# -- storage.rocks, cluster.stream.machine (the compiled modules they use are the same in both runs) -----

entry_steps = st.lists(
    st.tuples(
        st.sampled_from(["pub", "pub", "pub", "dedup", "expect", "delete", "purge", "expire"]), st.integers(0, 30)
    ),
    min_size=1,
    max_size=50,
)


@needs_compiled
@settings(max_examples=60, deadline=None)
@given(entry_steps, st.sampled_from([0, 1, 2]), st.sampled_from([1, 4, 16]))
def test_file_stream_replica_answers(steps: list[tuple[str, int]], per_subject: int, batch: int) -> None:
    """The same committed entries applied by the compiled state machine on the compiled file store, and
    by both as Python source: the same result for every entry, and the same store after every run."""
    from cluster.stream.config import stream_config_from_json
    from cluster.stream.config_check import normalize_stream_config
    from cluster.stream.entries import DeleteMsg, Expire, Purge, StoreMsg
    from raft.types import Entry

    config = {"name": "S", "subjects": ["s.>"], "duplicate_window": 60_000_000_000, "allow_msg_ttl": True}
    if per_subject:
        config["max_msgs_per_subject"] = per_subject
    cfg = normalize_stream_config(stream_config_from_json(config))
    entries = []
    for index, (op, k) in enumerate(steps, start=1):
        subject = f"s.{k % 5}"
        ts = 1_700_000_000_000_000_000 + index * 1_000_000
        if op == "pub":
            headers = b"NATS/1.0\r\nNats-TTL: 30\r\n\r\n" if k % 3 == 0 else b""
            entry: Any = StoreMsg(subject, headers, b"x" * k, ts)
        elif op == "dedup":
            entry = StoreMsg(subject, b"", b"d", ts, msg_id=f"id{k % 4}")
        elif op == "expect":
            entry = StoreMsg(subject, b"", b"e", ts, expected_last_seq=k % 8)
        elif op == "delete":
            entry = DeleteMsg(seq=k % 12, erase=bool(k % 2))
        elif op == "expire":  # past the 30 s Nats-TTL of some messages, or not
            entry = Expire(now_ns=ts + (40_000_000_000 if k % 2 else 0), limit=k % 3)
        else:
            entry = Purge(filter=subject if k % 2 else "", keep=k % 3)
        entries.append(Entry(term=1, index=index, data=entry.encode()))

    builds = [
        (importlib.import_module("storage.rocks"), importlib.import_module("cluster.stream.machine")),
        (pure("storage.rocks"), pure("cluster.stream.machine")),
    ]
    seen = []
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        for number, (rocks, machine) in enumerate(builds):
            store = rocks.RocksStreamStore.open_alone(Path(tmp) / f"build-{number}")
            replica = machine.StreamStateMachine(store, cfg, sync_writes=False)
            answers: list[object] = []
            for at in range(0, len(entries), batch):
                answers.append([repr(result) for result in replica.apply(entries[at : at + batch])])
                answers.append(repr(store.state(include_deleted=True)))
                answers.append(repr(sorted(store.subjects_state(">").items())))
                answers.append(outcome(lambda store=store: store.load_last_msg("s.*")))
            store.close()
            seen.append(answers)
    assert seen[0] == seen[1]


# -- raft.core with raft.progress, raft.raft_log, raft.read_index (raft.types, raft.log_storage shared) --


def _pure_raft_core() -> ModuleType:
    """raft/core.py as Python, wired to the Python sources of the progress tracker, the in-memory log and
    the read queue (the names it imported from them are rebound), so a run of it runs none of the four
    compiled. Entries, messages and the MemoryLogStorage are raft.types' and raft.log_storage's as
    imported: the same objects in both runs, so their reprs compare."""
    core = pure("raft.core")
    progress, raft_log, read_index = pure("raft.progress"), pure("raft.raft_log"), pure("raft.read_index")
    core.Progress, core.ProgressState = progress.Progress, progress.ProgressState
    core.RaftLog, core.LogInvariantError = raft_log.RaftLog, raft_log.LogInvariantError
    core.ReadIndexQueue = read_index.ReadIndexQueue
    return core


RAFT_IDS = ("n1", "n2", "n3")
raft_steps = st.lists(
    st.tuples(
        st.sampled_from(["tick", "tick", "campaign", "propose", "propose", "process", "process", "deliver",
                         "deliver", "deliver", "drop", "read", "down", "up", "transfer"]),
        st.integers(0, 2),
        st.integers(0, 40),
    ),
    min_size=1,
    max_size=120,
)


def _run_raft(core_module: ModuleType, steps: list[tuple[str, int, int]], seed: int) -> list[object]:
    """Three cores on MemoryLogStorage, driven by `steps` (messages wait until a step delivers or drops
    them); after each step, what the step did and each node's observable state."""
    import random

    from raft.log_storage import MemoryLogStorage
    from raft.types import ConfState, Message

    conf = ConfState(voters=RAFT_IDS)
    storages = {node_id: MemoryLogStorage(conf) for node_id in RAFT_IDS}
    cores = {
        node_id: core_module.RaftCore(
            core_module.RaftConfig(id=node_id, election_tick=6, heartbeat_tick=2),
            storages[node_id],
            random.Random(f"{seed}-{node_id}"),
        )
        for node_id in RAFT_IDS
    }
    pending: list[Message] = []
    seen: list[object] = []

    def process(node_id: str) -> object:
        core, storage = cores[node_id], storages[node_id]
        if not core.has_ready():
            return None
        ready = core.ready()
        if ready.snapshot is not None:
            storage.apply_snapshot(ready.snapshot)
        storage.append(ready.entries)
        if ready.hard_state is not None:
            storage.set_hard_state(ready.hard_state)
        pending.extend(ready.messages)
        core.advance(ready)
        return ready

    def settle() -> None:
        for _ in range(200):
            for node_id in RAFT_IDS:
                for _ in range(50):
                    if process(node_id) is None:
                        break
            if not pending:
                return
            batch = pending[:]
            pending.clear()
            for message in batch:
                seen.append(outcome(lambda message=message: cores[message.to].step(message)))
        raise AssertionError("the three cores did not settle")

    cores[RAFT_IDS[seed % 3]].campaign()  # the schedule starts with a leader (it may lose it)
    settle()
    for number, (op, at, k) in enumerate(steps):
        node_id = RAFT_IDS[at]
        core = cores[node_id]
        if op == "tick":
            did = outcome(lambda core=core, k=k: [core.tick() for _ in range(k % 8 + 1)])
        elif op == "campaign":
            did = outcome(core.campaign)
        elif op == "propose":
            did = outcome(lambda core=core, k=k: core.propose_many([b"c%d" % n for n in range(k % 5 + 1)]))
        elif op == "process":
            did = outcome(lambda node_id=node_id: process(node_id))
        elif op == "read":
            did = outcome(lambda core=core, number=number: core.read_index(b"r%d" % number))
        elif op == "down":
            did = outcome(lambda core=core, k=k: core.peer_down(RAFT_IDS[k % 3]))
        elif op == "up":
            did = outcome(lambda core=core, k=k: core.peer_up(RAFT_IDS[k % 3]))
        elif op == "transfer":
            did = outcome(lambda core=core, k=k: core.transfer_leader(RAFT_IDS[k % 3]))
        elif not pending:
            did = ("nothing pending", "")
        else:
            message = pending.pop(k % len(pending))
            did = outcome(lambda message=message: cores[message.to].step(message)) if op == "deliver" else (
                "dropped", repr(message))
        seen.append(did)
        seen.append([
            (repr(c.role), c.term, c.vote, c.leader_id, c.commit_index, c.applied, c.last_index,
             sorted((peer, repr(p.state), p.match, p.next) for peer, p in c.progress.items()))
            for c in cores.values()
        ])
    settle()  # then everything delivered until quiet: the logs must agree too
    seen.append([repr(c.log_entries(c.first_index, c.last_index + 1)) for c in cores.values()])
    return seen


@needs_compiled
@settings(max_examples=80, deadline=None)
@given(raft_steps, st.integers(0, 3))
def test_raft_core_answers(steps: list[tuple[str, int, int]], seed: int) -> None:
    """The same schedule of ticks, campaigns, proposals, reads, peer reports, leadership transfers and
    message deliveries and drops, run by the compiled core and by its Python source: the same outcome of
    every step, the same roles, terms, votes, commit and applied indexes and replication progress after
    each, and the same logs once all is delivered."""
    compiled = _run_raft(importlib.import_module("raft.core"), steps, seed)
    assert compiled == _run_raft(_pure_raft_core(), steps, seed)


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.sampled_from([0, 1, 2]), st.text(max_size=6), st.lists(st.text(max_size=4), max_size=3),
       st.lists(st.text(max_size=4), max_size=3))
def test_raft_conf_change_records(data: bytes, change: int, node: str, voters: list[str], learners: list[str]) -> None:
    """A membership change entry's payload: encoded, decoded (any bytes too) and applied to a membership."""
    learners = [learner for learner in learners if learner not in voters]  # ConfState refuses both
    compiled, source = both("raft.types")
    assert outcome(lambda: compiled.ConfChangeRecord.decode(data)) == outcome(
        lambda: source.ConfChangeRecord.decode(data)
    )
    records = [
        module.ConfChangeRecord(
            module.ConfChange(module.ConfChangeType(change), node, data),
            module.ConfState(voters=tuple(voters), learners=tuple(learners)),
        )
        for module in (compiled, source)
    ]
    encoded = records[1].encode()
    assert records[0].encode() == encoded
    assert repr(compiled.ConfChangeRecord.decode(encoded)) == repr(records[0])
    assert repr(source.ConfChangeRecord.decode(encoded)) == repr(records[1])
    assert outcome(lambda: records[0].change.apply_to(records[0].conf_state)) == outcome(
        lambda: records[1].change.apply_to(records[1].conf_state)
    )


# -- cluster.direct_get.request, cluster.direct_get.answer (the store is storage.memory's, shared) -----

DIRECT_GET_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "seq": st.integers(0, 34) | st.just(-1),
    "last_by_subj": st.sampled_from(["d.a", "d.b", "d.*", "d.>", "x", "d..a"]),
    "next_by_subj": st.sampled_from(["d.a", "d.*", ">", "d."]),
    "batch": st.integers(0, 30),
    "max_bytes": st.sampled_from([0, 1, 10, 30, 100, 400, -1]),
    "start_time": st.sampled_from(["2023-11-14T22:13:20.000000010Z", "1970-01-01T00:00:00Z", "bad"]),
    "multi_last": st.lists(st.sampled_from(["d.a", "d.*", "d.>", "y"]), min_size=1, max_size=3),
    "up_to_seq": st.integers(0, 34),
    "up_to_time": st.sampled_from(["2023-11-14T22:13:20.000000020Z", "2000-01-01T00:00:00Z"]),
    "no_hdr": st.booleans(),
    "min_last_seq": st.integers(0, 34),
}


@st.composite
def direct_get_fields(draw: st.DrawFn) -> dict[str, Any]:
    """One to three of a Direct Get's fields, mostly with values that make a valid request; batches
    (the longest answers) more often than the rest."""
    names = [*sorted(DIRECT_GET_VALUES), "batch", "batch", "batch"]
    keys = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    return {key: draw(DIRECT_GET_VALUES[key]) for key in keys}


def _direct_get_store() -> Any:
    from storage.memory import MemoryStreamStore

    store = MemoryStreamStore()
    for seq in range(1, 31):
        headers = b"NATS/1.0\r\nX-N: %d\r\n\r\n" % seq if seq % 3 == 0 else None
        store.store_msg(f"d.{'abc'[seq % 3]}", headers, b"p" * seq, 1_700_000_000_000_000_000 + seq)
    for seq in (4, 5, 17):
        store.remove_msg(seq)
    return store


def _direct_get_answer(
    request_module: ModuleType,
    answer_module: ModuleType,
    store: Any,
    body: bytes,
    appended: str | None,
    last_seq: int,
    role: str,
) -> list[object]:
    request = request_module.parse_direct_get(body, appended)
    responder = answer_module.Responder("n1", answer_module.ResponderRole(role), "S")
    seen: list[object] = [repr(request)]
    if isinstance(request, request_module.DirectGetRequest):
        seen.append(answer_module.is_behind(request, last_seq))
        seen.append(outcome(lambda: answer_module.answer_direct_get(request, store, responder, None)))
        seen.append(outcome(lambda: answer_module.answer_direct_get(request, store, responder, max(last_seq, 0))))
    else:
        seen.append(outcome(lambda: answer_module.bad_request_frames(request, responder, 7)))
    seen.append(outcome(lambda: answer_module.min_last_seq_frames(responder, 9)))
    return seen


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(direct_get_fields(), st.none() | st.none() | st.sampled_from(["d.a", "d.c", "d.*", "nope"]),
       st.integers(-1, 40), st.sampled_from(["leader", "follower", "mirror"]), st.integers(0, 9), st.binary(max_size=20))
def test_direct_get_answers(
    fields: dict[str, Any], appended: str | None, last_seq: int, role: str, json_or_raw: int, raw: bytes
) -> None:
    """The same Direct Get body (JSON from the request's fields, or raw bytes), with and without an
    appended subject, parsed and answered from the same store by the compiled modules and their Python
    sources: the same request or status, and the same reply frames."""
    import json

    store = _direct_get_store()
    body = json.dumps(fields).encode() if json_or_raw else raw
    answers = [
        _direct_get_answer(request_module, answer_module, store, body, appended, last_seq, role)
        for request_module, answer_module in (
            (importlib.import_module("cluster.direct_get.request"), importlib.import_module("cluster.direct_get.answer")),
            (pure("cluster.direct_get.request"), pure("cluster.direct_get.answer")),
        )
    ]
    assert answers[0] == answers[1]
