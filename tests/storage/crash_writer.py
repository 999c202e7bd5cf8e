"""A writer process for the crash-recovery tests: it fills a RocksStreamStore until it is killed.

    python -m tests.storage.crash_writer PATH {sync,nosync} [--seconds 30] [--stores N]

The workload is a pure function of the group number, so a test can replay any
prefix of it into a MemoryStreamStore and compare: group `g` (from 1) stores
`group_size(g)` messages in one write group whose metadata is `g`, like the
stream layer recording the Raft applied index. On start the writer resumes
after the group the store's metadata names. It prints `open G` once the store
is open and `ack G LAST_SEQ` after each group has returned (for `sync`, after
its fsync), flushing each line: a printed ack is an acknowledged write.

The `nosync` workload runs with max_msgs_per_subject, so most groups also
delete messages: a torn group would show as a wrong count, byte total or
subject set, not only as missing messages.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time

from storage.config import StoreConfig
from storage.interface import StreamStore
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine

BASE_TS_NS = 1_700_000_000_000_000_000
SUBJECTS = 97
MAX_GROUP = 300
# Larger records make a group's RocksDB write (and WAL append) long enough that
# some kills land inside it rather than between groups.
MAX_PAYLOAD = 4096
_HEADERS = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n"


def config_for(mode: str) -> StoreConfig:
    if mode == "sync":
        return StoreConfig()
    return StoreConfig(max_msgs_per_subject=3)


def group_size(group: int) -> int:
    return random.Random(group).randint(1, MAX_GROUP)


def message_for(seq: int) -> tuple[str, bytes | None, bytes, int]:
    """(subject, headers, payload, ts_ns) of the message written as sequence `seq`."""
    subject = f"crash.s{seq % SUBJECTS}.{'even' if seq % 2 == 0 else 'odd'}"
    headers = _HEADERS % seq if seq % 5 == 0 else None
    length = (seq * 7919) % MAX_PAYLOAD
    payload = (seq.to_bytes(8, "big") * (length // 8 + 1))[:length]
    return subject, headers, payload, BASE_TS_NS + seq * 1000


def write_group(store: StreamStore, group: int, *, sync: bool) -> int:
    """Writes group `group` in one write group; returns the store's last sequence after it."""
    with store.write_group(sync=sync) as handle:
        last = 0
        for _ in range(group_size(group)):
            # store_msg picks the sequence; the message content follows from it.
            seq = store.state().last_seq + 1
            subject, headers, payload, ts_ns = message_for(seq)
            last = store.store_msg(subject, headers, payload, ts_ns).seq
            assert last == seq
        handle.meta = str(group).encode()
    return last


def applied_group(store: StreamStore) -> int:
    return int(store.metadata or b"0")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("mode", choices=("sync", "nosync"))
    parser.add_argument("--seconds", type=float, default=30.0, help="stop by itself after this long")
    parser.add_argument(
        "--stores", type=int, default=0, help="this many stores of one engine, each written by its own thread"
    )
    args = parser.parse_args(argv)
    if args.stores:
        return _run_shared(args.path, args.mode, args.seconds, args.stores)
    store = RocksStreamStore.open_alone(args.path, config_for(args.mode))
    group = applied_group(store)
    print(f"open {group}", flush=True)
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        group += 1
        last_seq = write_group(store, group, sync=args.mode == "sync")
        print(f"ack {group} {last_seq}", flush=True)
    store.close()
    print("done", flush=True)
    return 0


def shared_store_name(index: int) -> str:
    return f"s{index}"


def _run_shared(path: str, mode: str, seconds: float, count: int) -> int:
    """The same workload in `count` stores of one engine at once, one thread each (as replicas apply and
    sync through worker threads): prints `open NAME G` for each, then `ack NAME G LAST_SEQ`."""
    engine = StreamStoreEngine(path)
    stores = {
        shared_store_name(i): RocksStreamStore(engine, shared_store_name(i), config_for(mode)) for i in range(count)
    }
    out = threading.Lock()
    for name, store in stores.items():
        print(f"open {name} {applied_group(store)}", flush=True)
    deadline = time.monotonic() + seconds

    def writer(name: str, store: RocksStreamStore) -> None:
        group = applied_group(store)
        while time.monotonic() < deadline:
            group += 1
            last_seq = write_group(store, group, sync=mode == "sync")
            with out:
                print(f"ack {name} {group} {last_seq}", flush=True)

    threads = [threading.Thread(target=writer, args=item) for item in stores.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
