from collections.abc import Callable

import pytest

from cluster.api.errors import ApiError
from cluster.meta.placement import NodeInfo, PlacementError, choose_peers, known_nodes
from cluster.meta.server_limits import check_cluster_update, nodes_without_room
from cluster.runtime.server_limits import NodeHoldings, ServerJetStreamLimits, limit_labels, split_labels
from cluster.stream.config import StreamConfig, stream_config_from_json

NODES = [
    NodeInfo("n1", frozenset({"az:1"})),
    NodeInfo("n2", frozenset({"az:2"})),
    NodeInfo("n3", frozenset({"az:3"})),
    NodeInfo("m1", frozenset({"mirror"})),
]


def test_plain_streams_avoid_mirror_nodes_and_balance_load() -> None:
    assert choose_peers(3, NODES, {}) == ["n1", "n2", "n3"]
    assert choose_peers(1, NODES, {"n1": 2, "n2": 1, "n3": 1}) == ["n2"]


def test_mirror_streams_go_to_mirror_nodes() -> None:
    assert choose_peers(1, NODES, {}, is_mirror=True) == ["m1"]
    # not enough mirror nodes for R3: fall back to the whole cluster
    assert sorted(choose_peers(3, NODES, {"m1": 0, "n1": 5}, is_mirror=True)) == ["m1", "n2", "n3"]


def test_tags_and_exclusions() -> None:
    assert choose_peers(1, NODES, {}, required_tags=["az:2"]) == ["n2"]
    assert choose_peers(2, NODES, {}, exclude=["n1"]) == ["n2", "n3"]
    offline = [NodeInfo("n1"), NodeInfo("n2", online=False), NodeInfo("n3")]
    assert choose_peers(2, offline, {}) == ["n1", "n3"]


@pytest.mark.parametrize("replicas", [5, 4])
def test_too_few_nodes_is_the_servers_error(replicas: int) -> None:
    with pytest.raises(PlacementError, match="no suitable peers for placement"):
        choose_peers(replicas, NODES, {})


def test_zero_replicas_rejected() -> None:
    with pytest.raises(PlacementError):
        choose_peers(0, NODES, {})



def test_known_nodes_come_from_routes_that_are_up() -> None:
    labels = {"n2": ("az:2",), "m1": ("mirror",), "n3": None}  # n3's route is down
    nodes = known_nodes(["n1", "n2", "n3", "m1"], "n1", ["az:1"], labels.get)
    assert nodes == [
        NodeInfo("n1", frozenset({"az:1"})),
        NodeInfo("n2", frozenset({"az:2"})),
        NodeInfo("n3", online=False),
        NodeInfo("m1", frozenset({"mirror"})),
    ]
    # the peers' tags count: a plain R3 stream has no third node besides the mirror node
    with pytest.raises(PlacementError):
        choose_peers(3, nodes, {})
    assert choose_peers(2, nodes, {}) == ["n1", "n2"]


def test_chosen_nodes_come_first_in_turn() -> None:
    # every R3 stream on all three nodes, so the same load everywhere: the first peer (the one that
    # stands for leader at once) goes to the node listed first least often
    assert choose_peers(3, NODES, {}, first_in={"n1": 1}) == ["n2", "n3", "n1"]
    assert choose_peers(3, NODES, {}, first_in={"n1": 1, "n2": 1}) == ["n3", "n1", "n2"]
    # which nodes carry the stream is still decided by load alone
    assert choose_peers(1, NODES, {"n1": 2, "n2": 1, "n3": 1}, first_in={"n2": 5}) == ["n2"]


WORKERS = [NodeInfo(f"n{node}/w{worker}") for node in (1, 2, 3) for worker in (0, 1)]


def test_no_two_replicas_of_a_group_share_a_machine() -> None:
    # n1/w0 and n1/w1 are the least loaded members, but they share a machine
    load = {"n1/w0": 0, "n1/w1": 0, "n2/w0": 3, "n2/w1": 1, "n3/w0": 2, "n3/w1": 2}
    chosen = choose_peers(3, WORKERS, load)
    assert sorted(chosen) == ["n1/w0", "n2/w1", "n3/w0"]
    # the machines n2 and n3 both carry 4: by name
    assert sorted(choose_peers(2, WORKERS, load)) == ["n1/w0", "n2/w1"]


def test_too_few_machines_for_the_replicas_even_with_enough_workers() -> None:
    two_machines = [n for n in WORKERS if not n.name.startswith("n3")]
    with pytest.raises(PlacementError, match="no suitable peers for placement"):
        choose_peers(3, two_machines, {})


def test_a_machine_s_groups_spread_over_its_workers() -> None:
    load: dict[str, int] = {}
    firsts: dict[str, int] = {}
    for _ in range(4):
        peers = choose_peers(3, WORKERS, load, first_in=firsts)
        for peer in peers:
            load[peer] = load.get(peer, 0) + 1
        firsts[peers[0]] = firsts.get(peers[0], 0) + 1
    assert load == {name: 2 for name in (n.name for n in WORKERS)}
    # the four first peers (leaders-to-be) went to four different workers, on every machine
    assert len(firsts) == 4 and {name.split("/")[0] for name in firsts} == {"n1", "n2", "n3"}


def test_a_replacement_avoids_every_machine_of_the_stream() -> None:
    nodes = [*WORKERS, NodeInfo("n4/w0"), NodeInfo("n4/w1")]
    assert choose_peers(1, nodes, {"n4/w0": 1}, exclude=["n1/w0", "n2/w1", "n3/w0"]) == ["n4/w1"]


def _file(name: str, max_bytes: int, storage: str = "file") -> StreamConfig:
    return stream_config_from_json({"name": name, "max_bytes": max_bytes, "storage": storage, "num_replicas": 3})


def test_a_nodes_limits_travel_in_its_labels_beside_its_tags() -> None:
    limits = ServerJetStreamLimits(max_memory=None, max_storage=1000)
    labels = ("az:1", *limit_labels(limits))
    assert split_labels(labels) == (frozenset({"az:1"}), limits)
    assert split_labels(("az:1",)) == (frozenset({"az:1"}), ServerJetStreamLimits())
    nodes = known_nodes(["n1", "n2"], "n1", labels, {"n2": ("az:2", "$jetraft.js.max_memory=5")}.get)
    assert nodes == [
        NodeInfo("n1", frozenset({"az:1"}), limits=limits),
        NodeInfo("n2", frozenset({"az:2"}), limits=ServerJetStreamLimits(max_memory=5)),
    ]


SMALL_N1 = [
    NodeInfo("n1", limits=ServerJetStreamLimits(max_storage=1000)),
    NodeInfo("n2", limits=ServerJetStreamLimits(max_storage=10000)),
    NodeInfo("n3"),  # no limit configured
]


def test_a_node_without_room_for_max_bytes_is_left_out_as_nats_server_does() -> None:
    peers = {"C": ["n1", "n2", "n3"], "M": ["n1", "n2", "n3"]}
    streams = {"C": _file("C", 500), "M": _file("M", 900, "memory")}
    # 600 beside C's 500 on n1 (limit 1000): not there; memory streams reserve file storage nowhere
    assert nodes_without_room(_file("D", 600), SMALL_N1, streams, peers.__getitem__) == {"n1"}
    assert nodes_without_room(_file("D", 500), SMALL_N1, streams, peers.__getitem__) == frozenset()
    # a stream without max_bytes is placed whatever the room, as nats-server
    assert nodes_without_room(_file("E", -1), SMALL_N1, streams, peers.__getitem__) == frozenset()
    assert choose_peers(2, SMALL_N1, {}, without_room={"n1"}) == ["n2", "n3"]
    with pytest.raises(PlacementError, match=r"^no suitable peers for placement, insufficient storage$"):
        choose_peers(3, SMALL_N1, {}, without_room={"n1"})
    # a node left out by its tags is not short of storage
    tagged = [NodeInfo("n1", limits=ServerJetStreamLimits(max_storage=0)), NodeInfo("n2")]
    with pytest.raises(PlacementError, match=r"^no suitable peers for placement$"):
        choose_peers(1, tagged, {}, required_tags=["az:9"], without_room={"n1"})


def test_an_update_growing_max_bytes_must_fit_on_every_node_of_the_stream() -> None:
    peers = {"C": ["n1", "n2", "n3"], "B": ["n2"]}
    streams = {"C": _file("C", 500), "B": _file("B", 9000)}
    check_cluster_update(streams["C"], _file("C", 1000), SMALL_N1, streams, peers.__getitem__)  # 500 more fit
    with pytest.raises(ApiError) as refused:
        check_cluster_update(streams["C"], _file("C", 1001), SMALL_N1, streams, peers.__getitem__)
    assert refused.value.err_code == 10047
    # on n2, B's 9000 and C's 500: 500 more fill its 10000 exactly, one byte more does not fit
    check_cluster_update(streams["B"], _file("B", 9500), SMALL_N1, streams, peers.__getitem__)
    with pytest.raises(ApiError):
        check_cluster_update(streams["B"], _file("B", 9501), SMALL_N1, streams, peers.__getitem__)


def test_node_holdings_read_only_the_stores_that_changed() -> None:
    holdings = NodeHoldings()
    reads: list[str] = []

    def store(name: str, in_memory: bool, size: int) -> Callable[[], tuple[bool, int]]:
        def measure() -> tuple[bool, int]:
            reads.append(name)
            return in_memory, size

        return measure

    first, second, third = object(), object(), object()
    holdings.changed(first, store("first", True, 100))
    holdings.changed(second, store("second", False, 40))
    assert (holdings.held(True), holdings.held(False)) == (100, 40)
    assert reads == ["first", "second"]
    holdings.changed(first, store("first", True, 150))
    holdings.changed(third, store("third", True, 7))
    assert holdings.held(True) == 157
    assert reads == ["first", "second", "first", "third"]  # the second store is not read again
    holdings.gone(first)
    holdings.gone(first)  # twice is harmless
    assert (holdings.held(True), holdings.held(False)) == (7, 40)
    holdings.changed(second, store("second", False, 1))
    holdings.gone(second)  # gone before it was read: not counted
    assert holdings.held(False) == 0
