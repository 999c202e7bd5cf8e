"""The seeded fault schedule and which nodes and links each fault hits (pure: no I/O, no clock).

`plan` turns a seed into the sequence of faults of a run: each step waits
`quiet` seconds, applies its fault for `duration` seconds, heals it, then
the runner checks liveness before the next. Targets that depend on the
cluster at that moment (the stream leader) are chosen when the step runs,
by `targets`, from the step's own seeded `choice`: the same seed and the same
leader give the same nodes and links.

Links are the Toxiproxy proxies `<source>-to-<target>`: what `source` sends
`target` (its calls, and their answers). Cutting one direction leaves the
other's calls, and their answers, flowing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

KILL_LEADER = "kill-leader"
KILL_FOLLOWER = "kill-follower"
KILL_MAJORITY = "kill-majority"
PAUSE_LEADER = "pause-leader"
PAUSE_FOLLOWER = "pause-follower"
PARTITION_ONE = "partition-one"
PARTITION_MAJORITY = "partition-majority"
PARTITION_BRIDGE = "partition-bridge"
PARTITION_ONE_WAY = "partition-one-way"
ISOLATE_LEADER = "isolate-leader"
LATENCY = "latency"
PEER_REMOVE = "peer-remove"
CORRUPT_BITS = "corrupt-bits"
CORRUPT_TRUNCATE = "corrupt-truncate"
LOST_UNSYNCED = "lost-unsynced"

FAULTS: dict[str, str] = {
    KILL_LEADER: "kill -9 the stream leader, restart it at heal",
    KILL_FOLLOWER: "kill -9 a follower of the stream, restart it at heal",
    KILL_MAJORITY: "kill -9 a majority of the nodes, restart them at heal",
    PAUSE_LEADER: "SIGSTOP the stream leader, SIGCONT at heal",
    PAUSE_FOLLOWER: "SIGSTOP a follower, SIGCONT at heal",
    PARTITION_ONE: "cut every link to and from one node (a minority)",
    PARTITION_MAJORITY: "split the nodes into a majority and a minority, no link between the two",
    PARTITION_BRIDGE: "cut two halves apart except one node that still sees both",
    PARTITION_ONE_WAY: "cut one direction only: what one node sends to every other, or what it receives",
    ISOLATE_LEADER: "cut every link to and from the stream leader",
    LATENCY: "slow every link to and from one node (50-500 ms, with jitter)",
    PEER_REMOVE: "membership change under load: STREAM.PEER.REMOVE of a follower replica (needs --nodes 4+)",
    CORRUPT_BITS: "kill -9 a follower, flip 16 random bits in its data files, restart it at heal",
    CORRUPT_TRUNCATE: "kill -9 a follower, cut its newest write-ahead logs short, restart it at heal",
    LOST_UNSYNCED: "kill -9 any node and drop what it wrote after its last fsync, restart it at heal",
}
# what the cluster is expected to survive, on 3 nodes: a replica can only be replaced with a spare node, so
# `all` leaves peer removal out; `membership` asks for it
SURVIVABLE = [name for name in FAULTS if name != PEER_REMOVE]
# `--faults` shorthands
GROUPS: dict[str, list[str]] = {
    "all": SURVIVABLE,
    "corrupt": [CORRUPT_BITS, CORRUPT_TRUNCATE],
    "crash": [LOST_UNSYNCED],
    "membership": [PEER_REMOVE],
    "kill": [KILL_LEADER, KILL_FOLLOWER, KILL_MAJORITY],
    "pause": [PAUSE_LEADER, PAUSE_FOLLOWER],
    "partition": [PARTITION_ONE, PARTITION_MAJORITY, PARTITION_BRIDGE, PARTITION_ONE_WAY, ISOLATE_LEADER],
}


def parse_faults(text: str) -> list[str]:
    """`kill-leader,partition` -> the fault names, groups expanded, each once, in order; ValueError if unknown."""
    chosen: list[str] = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        names = GROUPS.get(part, [part])
        for name in names:
            if name not in FAULTS:
                known = ", ".join([*GROUPS, *FAULTS])
                raise ValueError(f"unknown fault {name!r} (known: {known})")
            if name not in chosen:
                chosen.append(name)
    if not chosen:
        raise ValueError("no fault given")
    return chosen


@dataclass(frozen=True, slots=True)
class FaultStep:
    index: int
    kind: str
    quiet: float  # seconds of no fault before this one
    duration: float  # seconds the fault lasts
    choice: int  # seeds the choice of targets when the step runs


def plan(
    seed: int,
    kinds: list[str],
    total: float,
    fault_seconds: tuple[float, float] = (3.0, 8.0),
    quiet_seconds: tuple[float, float] = (1.0, 4.0),
) -> list[FaultStep]:
    """The faults that fit in `total` seconds (counting quiet and fault time only; liveness checks come on
    top), drawn from `kinds` by `seed`."""
    if not kinds:
        raise ValueError("no fault kinds to plan")
    rng = random.Random(seed)
    steps: list[FaultStep] = []
    elapsed = 0.0
    while True:
        quiet = round(rng.uniform(*quiet_seconds), 2)
        duration = round(rng.uniform(*fault_seconds), 2)
        if elapsed + quiet + duration > total:
            return steps
        steps.append(FaultStep(len(steps), rng.choice(kinds), quiet, duration, rng.getrandbits(32)))
        elapsed += quiet + duration


@dataclass(frozen=True, slots=True)
class Targets:
    """What one fault does: nodes to kill -9 or SIGSTOP, links to cut, nodes whose links to slow."""

    kill: tuple[str, ...] = ()
    pause: tuple[str, ...] = ()
    cut: tuple[tuple[str, str], ...] = ()
    lag: tuple[str, ...] = ()
    corrupt: tuple[str, ...] = ()  # killed first (in `kill`), their files damaged while down
    corrupt_mode: str = ""
    remove_peer: tuple[str, ...] = ()
    latency_ms: int = 0
    jitter_ms: int = 0
    notes: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, object]:
        record: dict[str, object] = {}
        if self.kill:
            record["kill"] = list(self.kill)
        if self.pause:
            record["pause"] = list(self.pause)
        if self.cut:
            record["cut"] = [f"{source}-to-{target}" for source, target in self.cut]
        if self.lag:
            record["lag"] = list(self.lag)
            record["latency_ms"] = self.latency_ms
            record["jitter_ms"] = self.jitter_ms
        if self.remove_peer:
            record["remove_peer"] = list(self.remove_peer)
        if self.corrupt:
            record["corrupt"] = list(self.corrupt)
            record["corrupt_mode"] = self.corrupt_mode
        record.update(self.notes)
        return record


def _between(group_a: list[str], group_b: list[str]) -> tuple[tuple[str, str], ...]:
    """Both directions of every link between the two groups."""
    return tuple((a, b) for a in group_a for b in group_b) + tuple((b, a) for a in group_a for b in group_b)


def targets(
    kind: str, nodes: list[str], leader: str | None, choice: int, replicas: list[str] | None = None
) -> Targets:
    """The nodes and links `kind` hits, given the stream leader now (None when nobody leads: any node) and
    its replicas (default: every node)."""
    rng = random.Random(choice)
    ordered = sorted(nodes)
    leader_now = leader if leader in ordered else rng.choice(ordered)
    followers = [node for node in ordered if node != leader_now] or ordered
    majority = len(ordered) // 2 + 1
    if kind == KILL_LEADER:
        return Targets(kill=(leader_now,))
    if kind == KILL_FOLLOWER:
        return Targets(kill=(rng.choice(followers),))
    if kind == KILL_MAJORITY:
        return Targets(kill=tuple(sorted(rng.sample(ordered, majority))))
    if kind == PAUSE_LEADER:
        return Targets(pause=(leader_now,))
    if kind == PAUSE_FOLLOWER:
        return Targets(pause=(rng.choice(followers),))
    if kind in (PARTITION_ONE, ISOLATE_LEADER):
        alone = leader_now if kind == ISOLATE_LEADER else rng.choice(ordered)
        return Targets(cut=_between([alone], [node for node in ordered if node != alone]))
    if kind == PARTITION_MAJORITY:
        shuffled = rng.sample(ordered, len(ordered))
        return Targets(cut=_between(shuffled[:majority], shuffled[majority:]))
    if kind == PARTITION_BRIDGE:
        shuffled = rng.sample(ordered, len(ordered))
        bridge, rest = shuffled[0], shuffled[1:]
        half = (len(rest) + 1) // 2
        return Targets(cut=_between(rest[:half], rest[half:]), notes={"bridge": bridge})
    if kind == PARTITION_ONE_WAY:
        node = rng.choice(ordered)
        others = [other for other in ordered if other != node]
        if rng.random() < 0.5:
            return Targets(
                cut=tuple((node, other) for other in others), notes={"one_way": f"{node} -> others"}
            )
        return Targets(cut=tuple((other, node) for other in others), notes={"one_way": f"others -> {node}"})
    if kind in (CORRUPT_BITS, CORRUPT_TRUNCATE):
        victim = rng.choice(followers)
        return Targets(
            kill=(victim,), corrupt=(victim,), corrupt_mode="bits" if kind == CORRUPT_BITS else "truncate"
        )
    if kind == LOST_UNSYNCED:
        victim = rng.choice(ordered)
        return Targets(kill=(victim,), corrupt=(victim,), corrupt_mode="unsynced")
    if kind == PEER_REMOVE:
        members = sorted(replicas) if replicas else ordered
        return Targets(remove_peer=(rng.choice([node for node in members if node != leader_now] or members),))
    if kind == LATENCY:
        return Targets(
            lag=(rng.choice(ordered),),
            latency_ms=rng.choice([50, 100, 250, 500]),
            jitter_ms=rng.choice([0, 20, 50]),
        )
    raise ValueError(f"unknown fault {kind!r}")
