"""A long fuzz run of the client protocol parser (not collected by pytest; CI runs the short
hypothesis run in test_protocol.py).

    .venv/bin/python -m tests.gateway.fuzz_parser [--inputs 1000000] [--seed 1]

Each input is random bytes, or a stream of valid commands mutated (bytes
flipped, inserted, deleted, duplicated, truncated). Every input is parsed
whole and again split at random points; the parser must only ever raise
`ProtocolError`, and both runs must give the same events and the same error.
Small limits (max_payload 256, max_control_line 128) make the limit checks
fire often.
"""

from __future__ import annotations

import argparse
import random
import time

from gateway.events import NEED_DATA, ClientEvent, ProtocolError
from gateway.protocol import (
    ClientCommandParser,
    encode_connect,
    encode_hpub,
    encode_pub,
    encode_sub,
    encode_unsub,
)

SEEDS = [
    encode_connect({"verbose": False, "headers": True, "no_responders": True}),
    b"PING\r\n",
    b"PONG\r\n",
    encode_pub("a.b", b"hello"),
    encode_pub("a", b"x" * 200, reply="_INBOX.1"),
    encode_hpub("h", b"NATS/1.0\r\nK: v\r\n\r\n", b"body", reply="r"),
    encode_sub("a.*", "1"),
    encode_sub("a.>", "2", queue="q"),
    encode_unsub("1"),
    encode_unsub("2", 3),
    b"+OK\r\n",
    b"-ERR 'x'\r\n",
    b'INFO {"a":1}\r\n',
    b"sub a\tq  3\n",
]
ALPHABET = b"PUBSHMGICNTEROKpubs .*>\r\n\t0123456789{}\"-+'"


def mutate(rng: random.Random, data: bytearray) -> None:
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6)
        at = rng.randrange(len(data) + 1)
        if kind == 0 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif kind == 1:
            data[at:at] = bytes([rng.choice(ALPHABET)])
        elif kind == 2 and data:
            del data[at : at + rng.randint(1, 8)]
        elif kind == 3 and data:
            start = rng.randrange(len(data))
            data[at:at] = data[start : start + rng.randint(1, 16)]
        elif kind == 4:
            del data[at:]
        else:
            data[at:at] = str(rng.randint(0, 1000)).encode()


def make_input(rng: random.Random) -> bytes:
    if rng.random() < 0.2:
        return rng.randbytes(rng.randint(0, 300))
    data = bytearray(b"".join(rng.choice(SEEDS) for _ in range(rng.randint(1, 6))))
    mutate(rng, data)
    return bytes(data)


def parse(chunks: list[bytes]) -> tuple[list[ClientEvent], str | None]:
    parser = ClientCommandParser(max_payload=256, max_control_line=128)
    events: list[ClientEvent] = []
    try:
        for chunk in chunks:
            parser.receive_data(chunk)
            while (event := parser.next_event()) is not NEED_DATA:
                events.append(event)  # type: ignore[arg-type]
    except ProtocolError as exc:
        return events, exc.message
    return events, None


def run(inputs: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    stats = {"inputs": 0, "errors": 0, "events": 0}
    for _ in range(inputs):
        data = make_input(rng)
        whole = parse([data])
        cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randint(1, 3)))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        split = parse(chunks)
        if whole != split:
            raise AssertionError(f"split {cuts} changed the result for {data!r}: {whole} != {split}")
        stats["inputs"] += 1
        stats["errors"] += whole[1] is not None
        stats["events"] += len(whole[0])
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    start = time.perf_counter()
    stats = run(args.inputs, args.seed)
    elapsed = time.perf_counter() - start
    print(
        f"{stats['inputs']:,} inputs (seed {args.seed}) in {elapsed:.0f} s: {stats['events']:,} events, "
        f"{stats['errors']:,} inputs ended in a protocol error, no other exception, "
        "split and whole parses identical"
    )


if __name__ == "__main__":
    main()
