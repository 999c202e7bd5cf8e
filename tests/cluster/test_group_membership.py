"""The steps a consumer's leader takes to move its group to a new peer set, one server at a time."""

from __future__ import annotations

from cluster.consumer.assignment import ConsumerAssignment
from cluster.meta.machine import MetaMachine, MetaOp, encode_meta_entry
from cluster.runtime.group_membership import next_change
from cluster.stream.assignment import StreamAssignment
from raft.types import ConfChange, ConfChangeType


def test_add_the_replacement_first_then_remove_the_old_peer() -> None:
    assert next_change("a", {"a", "b", "c"}, {"a", "b", "d"}) == ConfChange(ConfChangeType.ADD_VOTER, "d")
    assert next_change("a", {"a", "b", "c", "d"}, {"a", "b", "d"}) == ConfChange(
        ConfChangeType.REMOVE_NODE, "c"
    )
    assert next_change("a", {"a", "b", "d"}, {"a", "b", "d"}) is None


def test_a_leader_being_removed_hands_over_to_a_staying_peer() -> None:
    assert next_change("c", {"a", "b", "c", "d"}, {"a", "b", "d"}) == "a"


def test_peer_remove_moves_the_streams_consumers_in_the_same_entry() -> None:
    machine = MetaMachine()
    machine.apply(encode_meta_entry(MetaOp.ASSIGN_STREAM, StreamAssignment("S", {}, ["a", "b", "c"], 1).to_json()))
    for name, peers in (("all", ["a", "b", "c"]), ("one", ["a"]), ("moved", ["c"])):
        machine.apply(encode_meta_entry(MetaOp.ASSIGN_CONSUMER, ConsumerAssignment("S", name, {}, peers, 2).to_json()))
    machine.apply(encode_meta_entry(MetaOp.SET_STREAM_PEERS, {"name": "S", "peers": ["a", "b", "d"]}))
    consumers = machine.consumers["S"]
    assert (consumers["all"].peers, consumers["all"].epoch) == (["a", "b", "d"], 2)
    assert (consumers["one"].peers, consumers["one"].epoch) == (["a"], 1)  # not on the removed peer
    assert (consumers["moved"].peers, consumers["moved"].epoch) == (["d"], 2)
    # the epoch survives a meta snapshot, so a restarted node starts the replacement without voters
    restored = MetaMachine()
    restored.restore(machine.snapshot())
    assert restored.consumers["S"]["all"].epoch == 2


def test_a_rescaled_stream_takes_its_consumers_along_in_the_same_entry() -> None:
    """As nats-server scales them: a durable with no num_replicas of its own follows the stream; one of
    its own size keeps it, no larger than the stream (its config says so); an ephemeral stays R1."""
    machine = MetaMachine()
    machine.apply(encode_meta_entry(MetaOp.ASSIGN_STREAM, StreamAssignment("S", {}, ["a", "b", "c"], 1).to_json()))
    durable = {"durable_name": "d"}
    consumers = (
        ("inherits", durable, ["b", "a", "c"]),
        ("three", {**durable, "num_replicas": 3}, ["a", "b", "c"]),
        ("one", {}, ["c"]),  # an ephemeral: R1
    )
    for name, config, peers in consumers:
        machine.apply(encode_meta_entry(MetaOp.ASSIGN_CONSUMER, ConsumerAssignment("S", name, config, peers, 2).to_json()))
    down = {"name": "S", "config": {"num_replicas": 1}, "peers": ["b"]}
    machine.apply(encode_meta_entry(MetaOp.UPDATE_STREAM, down))
    by_name = machine.consumers["S"]
    assert (machine.streams["S"].peers, machine.streams["S"].epoch) == (["b"], 2)
    assert [by_name[n].peers for n in ("inherits", "three", "one")] == [["b"], ["b"], ["b"]]
    assert by_name["three"].config["num_replicas"] == 1
    up = {"name": "S", "config": {"num_replicas": 3}, "peers": ["b", "d", "a"]}
    machine.apply(encode_meta_entry(MetaOp.UPDATE_STREAM, up))
    assert [by_name[n].peers for n in ("inherits", "three", "one")] == [["b", "d", "a"], ["b"], ["b"]]
    assert machine.load() == {"b": 1, "d": 1, "a": 1}
    # an update that leaves num_replicas alone carries no peers and moves nothing
    machine.apply(encode_meta_entry(MetaOp.UPDATE_STREAM, {"name": "S", "config": {"num_replicas": 3}}))
    assert (machine.streams["S"].peers, machine.streams["S"].epoch) == (["b", "d", "a"], 3)
