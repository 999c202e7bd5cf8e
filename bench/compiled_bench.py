"""CPU per operation of the modules mypyc compiles (setup.py), in-process, by thread CPU time.

    .venv/bin/python bench/compiled_bench.py [--rounds 5] [--cases record,entries,...]

Each case runs a fixed piece of the hot path many times and prints the best of `--rounds` runs of
`time.thread_time` per operation: thread time, because RocksDB's background threads charge
`process_time` for flushes the case did not ask for. It prints which of the compiled modules are
loaded compiled (`storage/record.cpython-*.so`) and which as Python source, so the same command
measures both builds: run it in a tree built with `make compile` and again after `make uncompile`.

Cases: `record` (encode_record + decode_record of a 128-byte message), `entries` (StoreMsg.encode +
decode_entry), `index` (StreamIndex.add over 100 interleaved subjects, then KV-style replace_single),
`seq_set` (add, next_at_or_after, discard), `seq_list` (append, count_at_or_after, remove from the
front), `sublist` (match of cached subjects and of request-reply inboxes), `protocol` (parsing PUBs
and HPUBs), `raft` (three RaftCores on MemoryLogStorage, in-process, committing runs of 64 proposals:
per entry, the core's work on a leader and two followers), `raft_rocks` (the same on each node's
RocksDB Raft log, persisted without fsync after each Ready), `direct_get_memory` and `direct_get_file`
(Direct Get last_by_subj in the subject-appended form, parsed and answered from a MemoryStreamStore
or a RocksStreamStore of 10,000 KV-style messages; the filling is not counted), `msg_get_memory` and
`msg_get_file` (the same as STREAM.MSG.GET requests, JSON in and out), `apply_pub` and
`apply_kv` (bench/apply_bench.py's two shapes in runs of 64, with a RocksStreamStore under /var/tmp).
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import apply_bench

from cluster.direct_get.answer import Responder, ResponderRole, answer_direct_get
from cluster.direct_get.request import DirectGetRequest, parse_direct_get
from cluster.stream.entries import StoreMsg, decode_entry
from cluster.stream.msg_get import answer_msg_get
from gateway.events import NEED_DATA
from gateway.protocol import ClientCommandParser, encode_hpub, encode_pub
from gateway.sublist import Sublist
from raft.core import RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.rocks_log_storage import RocksLogEngine, RocksLogStorage
from raft.types import ConfState, Message, Role
from storage.index import StreamIndex
from storage.interface import StreamStore
from storage.memory import MemoryStreamStore
from storage.record import decode_record, encode_record
from storage.rocks import RocksStreamStore
from storage.seq_list import SeqList
from storage.seq_set import SeqSet

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = b"x" * 128
RAFT_NODES = ("n1", "n2", "n3")
Case = Callable[[], int]  # runs once, returns how many operations it did


def case_record() -> int:
    subject = b"orders.eu.12345"
    count = 50_000
    for seq in range(1, count + 1):
        decode_record(encode_record(subject, None, PAYLOAD, seq, 1_700_000_000_000_000_000), verify_hash=False)
    return count


def case_entries() -> int:
    count = 50_000
    plain = StoreMsg("orders.eu.12345", b"", PAYLOAD, 1_700_000_000_000_000_000)
    with_id = StoreMsg("orders.eu.12345", b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n", PAYLOAD, 1, msg_id="a")
    for at in range(count):
        decode_entry((with_id if at % 4 == 0 else plain).encode())
    return count


def case_index() -> int:
    index = StreamIndex()
    count = 50_000
    subjects = [f"orders.{n}" for n in range(100)]
    for seq in range(1, count + 1):
        index.add(seq, subjects[seq % 100], 200)
    keys = [f"$KV.B.k{n}" for n in range(1000)]
    for seq, key in enumerate(keys, start=count + 1):
        index.add(seq, key, 200)
    seq = count + len(keys)
    rng = random.Random(3)
    old = {key: at for at, key in enumerate(keys, start=count + 1)}
    for _ in range(count):
        key = keys[rng.randrange(len(keys))]
        seq += 1
        index.replace_single(key, old[key], 200, seq, 200)
        old[key] = seq
    return 2 * count


def case_seq_set() -> int:
    seqs = SeqSet()
    count = 100_000
    for seq in range(1, count + 1):
        seqs.add(seq)
    for seq in range(1, count + 1, 7):
        seqs.discard(seq)
    for seq in range(1, count + 1):
        seqs.next_at_or_after(seq)
    return 2 * count + count // 7


def case_seq_list() -> int:
    count = 30_000
    runs, interleaved = SeqList(), SeqList()
    for seq in range(1, count + 1):
        runs.append(seq)
        interleaved.append(seq * 3)
    for seq in range(1, count + 1, 10):
        runs.count_at_or_after(seq)
        interleaved.count_at_or_after(seq * 3)
    for seq in range(1, count // 2):
        runs.remove(seq)
        interleaved.remove(seq * 3)
    return 2 * count + count // 5 + 2 * (count // 2 - 1)


class _Sub:
    __slots__ = ("queue",)

    def __init__(self, queue: str | None) -> None:
        self.queue = queue


def case_sublist() -> int:
    sublist: Sublist[_Sub] = Sublist()
    for n in range(200):
        sublist.insert(f"orders.{n}.>", _Sub(None))
        sublist.insert(f"orders.{n}.*", _Sub("workers"))
    sublist.insert("_INBOX.abcdef.*", _Sub(None))
    sublist.insert("$JS.API.>", _Sub(None))
    count = 100_000
    for at in range(count):
        if at % 2:
            sublist.match(f"orders.{at % 200}.created")
        else:
            sublist.match(f"_INBOX.abcdef.{at}")
    return count


def case_protocol() -> int:
    frames = [
        encode_pub("orders.eu.12345", PAYLOAD, reply="_INBOX.abcdef.1"),
        encode_hpub("orders.eu.12345", b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n", PAYLOAD),
    ]
    chunk = b"".join(frames * 50)
    parser = ClientCommandParser()
    count = 0
    for _ in range(500):
        parser.receive_data(chunk)
        while parser.next_event() is not NEED_DATA:
            count += 1
    return count


def _commit_runs(
    storages: dict[str, MemoryLogStorage | RocksLogStorage], persist: Callable[[str], None]
) -> int:
    """Three RaftCores on `storages`, messages handed over in-process: the leader proposes runs of 64
    entries and every node persists (`persist(node)` after staging), sends, applies and advances each
    Ready until all is quiet. Returns how many entries were committed."""
    conf = ConfState(voters=tuple(storages))
    cores = {
        node_id: RaftCore(RaftConfig(id=node_id), storage, random.Random(node_id))
        for node_id, storage in storages.items()
    }
    pending: list[Message] = []

    def settle() -> None:
        for _ in range(1000):
            for node_id, core in cores.items():
                while core.has_ready():
                    ready = core.ready()
                    storages[node_id].append(ready.entries)
                    if ready.hard_state is not None:
                        storages[node_id].set_hard_state(ready.hard_state)
                    persist(node_id)
                    pending.extend(ready.messages)
                    core.advance(ready)
            if not pending:
                return
            batch = pending[:]
            pending.clear()
            for message in batch:
                cores[message.to].step(message)
        raise AssertionError("the three cores did not settle")

    leader = cores[conf.voters[0]]
    leader.campaign()
    settle()
    assert leader.role is Role.LEADER
    runs = 300
    commands = [PAYLOAD] * 64
    for _ in range(runs):
        leader.propose_many(commands)
        settle()
    assert all(core.applied == leader.commit_index for core in cores.values())
    return runs * len(commands)


def case_raft() -> int:
    """The core's per-entry work on a leader and two followers, with none of the driver's I/O: the log
    in memory (MemoryLogStorage)."""
    conf = ConfState(voters=RAFT_NODES)
    return _commit_runs({node_id: MemoryLogStorage(conf) for node_id in RAFT_NODES}, lambda node_id: None)


def case_raft_rocks() -> int:
    """As `raft`, on each node's RocksDB Raft log (RocksLogStorage, written without fsync after each
    Ready, as a node's driver persists before it sends)."""
    conf = ConfState(voters=RAFT_NODES)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        engines = {node_id: RocksLogEngine(Path(tmp) / node_id) for node_id in RAFT_NODES}
        try:
            storages: dict[str, MemoryLogStorage | RocksLogStorage] = {
                node_id: engine.open_group("g", conf_state=conf) for node_id, engine in engines.items()
            }
            return _commit_runs(storages, lambda node_id: engines[node_id].persist_blocking(sync=False))
        finally:
            for engine in engines.values():
                engine.close()


def _fill_kv(store: StreamStore) -> None:
    for seq in range(1, 10_001):
        store.store_msg(f"$KV.b.k{seq % 1000}", None, PAYLOAD, 1_700_000_000_000_000_000 + seq)


def _direct_get(store: StreamStore) -> float:
    """us of thread CPU per Direct Get last_by_subj as jsmodel_bench.py asks it (subject appended): parse,
    read, encode the reply; the 10,000 messages stored first are not counted."""
    _fill_kv(store)
    responder = Responder("n1", ResponderRole.FOLLOWER, "KV_b")
    count = 30_000
    last_seq = store.state().last_seq
    started = time.thread_time()
    for call in range(count):
        request = parse_direct_get(b"", f"$KV.b.k{call % 1000}")
        assert isinstance(request, DirectGetRequest)
        frames = answer_direct_get(request, store, responder, last_seq)
        assert frames[0][0] is not None
    return (time.thread_time() - started) / count * 1e6


def direct_get_memory() -> float:
    return _direct_get(MemoryStreamStore())


def _on_file_store(case: Callable[[StreamStore], float]) -> float:
    """`case` run on a RocksStreamStore of its own in a temporary directory."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        store = RocksStreamStore.open_alone(Path(tmp))
        try:
            return case(store)
        finally:
            store.close()


def direct_get_file() -> float:
    return _on_file_store(_direct_get)


def _msg_get(store: StreamStore) -> float:
    """us of thread CPU per STREAM.MSG.GET last_by_subj (JSON request, JSON reply with the message in
    base64), as jsmodel_bench.py asks it; the 10,000 messages stored first are not counted."""
    _fill_kv(store)
    count = 30_000
    started = time.thread_time()
    for call in range(count):
        reply = answer_msg_get(b'{"last_by_subj":"$KV.b.k%d"}' % (call % 1000), store)
        assert reply.startswith(b'{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message"'), reply
    return (time.thread_time() - started) / count * 1e6


def msg_get_memory() -> float:
    return _msg_get(MemoryStreamStore())


def msg_get_file() -> float:
    return _on_file_store(_msg_get)


def _apply_case(shape: str) -> Callable[[], float]:
    def run() -> float:
        with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
            return apply_bench.run(shape, 20_000, 64, Path(tmp), clock=time.thread_time)

    return run


CASES: dict[str, Callable[[], float]] = {
    "record": lambda: measure(case_record),
    "entries": lambda: measure(case_entries),
    "index": lambda: measure(case_index),
    "seq_set": lambda: measure(case_seq_set),
    "seq_list": lambda: measure(case_seq_list),
    "sublist": lambda: measure(case_sublist),
    "protocol": lambda: measure(case_protocol),
    "raft": lambda: measure(case_raft),
    "raft_rocks": lambda: measure(case_raft_rocks),
    "direct_get_memory": direct_get_memory,
    "direct_get_file": direct_get_file,
    "msg_get_memory": msg_get_memory,
    "msg_get_file": msg_get_file,
    "apply_pub": _apply_case("pub_async"),
    "apply_kv": _apply_case("kv_put"),
}


def measure(case: Case) -> float:
    """us of thread CPU per operation."""
    started = time.thread_time()
    operations = case()
    return (time.thread_time() - started) / operations * 1e6


def compiled_or_not() -> dict[str, bool]:
    """Each module setup.py compiles (pyproject.toml's [tool.jetraft] mypyc-modules): loaded compiled?"""
    with (ROOT / "pyproject.toml").open("rb") as file:
        names = tomllib.load(file)["tool"]["jetraft"]["mypyc-modules"]
    return {name: not importlib.import_module(name).__file__.endswith(".py") for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    compiled = compiled_or_not()
    print("compiled:", ", ".join(name for name, yes in compiled.items() if yes) or "none")
    print("pure Python:", ", ".join(name for name, yes in compiled.items() if not yes) or "none")
    for name in args.cases.split(","):
        best = min(CASES[name]() for _ in range(args.rounds))
        print(f"{name:10s} {best:7.3f} us/op", flush=True)


if __name__ == "__main__":
    main()
