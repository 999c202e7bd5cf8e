"""/healthz's judgement (cluster/node/health.py): what keeps a node from serving, and the grace that
keeps healthy nodes from flapping through elections and redials."""

from __future__ import annotations

from cluster.node.health import HealthJudge, StreamView, observe

PEERS = ["n2", "n3"]
ALL_UP = {"n2": True, "n3": True}


def test_a_node_with_its_routes_and_stream_leaders_reachable_has_no_problem() -> None:
    streams = [StreamView("A", "n2", False), StreamView("B", "n1", True)]
    assert observe("n1", PEERS, ALL_UP, streams) == []


def test_one_peer_down_of_three_is_no_problem_for_a_stream_led_elsewhere() -> None:
    assert observe("n1", PEERS, {"n2": True, "n3": False}, [StreamView("A", "n2", False)]) == []


def test_routes_down_to_a_majority_are_a_problem() -> None:
    problems = observe("n1", PEERS, {"n2": False, "n3": False}, [])
    assert problems == ["routes down to a majority of the cluster: n2, n3"]
    # five nodes: two of four peers down still leaves a majority of three
    five = ["n2", "n3", "n4", "n5"]
    assert observe("n1", five, {"n2": True, "n3": True, "n4": False, "n5": False}, []) == []
    assert observe("n1", five, {"n2": True, "n3": False, "n4": False, "n5": False}, []) != []


def test_a_stream_whose_leader_is_unreachable_or_unknown_is_a_problem() -> None:
    # the route to n3 is down one way at least: nothing published here reaches the stream's leader
    problems = observe("n1", PEERS, {"n2": True, "n3": False}, [StreamView("A", "n3", False)])
    assert problems == ["stream A: its leader n3 is not reachable over the routes"]
    assert observe("n1", PEERS, ALL_UP, [StreamView("B", None, False)]) == ["stream B: no leader"]


def test_a_single_node_is_healthy_alone() -> None:
    assert observe("n1", [], {}, [StreamView("A", "n1", True)]) == []


def test_a_problem_counts_only_once_it_has_lasted_the_grace_without_a_break() -> None:
    judge = HealthJudge(grace=5.0)
    election = ["stream A: no leader"]
    assert judge.judge(election, now=100.0) == []
    assert judge.judge(election, now=104.9) == []
    assert judge.judge([], now=105.0) == []  # a leader came: the clock restarts
    assert judge.judge(election, now=106.0) == []
    assert judge.judge(election, now=110.9) == []
    assert judge.judge(election, now=111.0) == election
    # another problem has its own clock
    both = [*election, "routes down to a majority of the cluster: n2, n3"]
    assert judge.judge(both, now=112.0) == election
    assert judge.judge(both, now=117.0) == both


def test_healthz_waits_for_the_node_to_be_current_with_its_meta_leader() -> None:
    """Healthy before it knows its streams, a restarted node would turn unhealthy again on learning of
    one it has not caught up with: nats-server's 503 until the meta layer is current avoids that flap."""
    from types import SimpleNamespace

    from cluster.node.jetstream_monitor import JetStreamMonitor

    meta = SimpleNamespace(leader_id="n2", replicas={}, current=False)
    # another account's JetStream (its own meta group): the node is healthy only once it is current too
    other = SimpleNamespace(leader_id=None, replicas={}, current=False, ctx=SimpleNamespace(account="B"))
    node = SimpleNamespace(
        meta=meta,
        account_jetstreams=[SimpleNamespace(meta=other)],
        config=SimpleNamespace(name="n1"),
        serving_problems=lambda: ([], {"n2": True}),
    )
    monitor = JetStreamMonitor(node)  # type: ignore[arg-type]
    status, body = monitor.healthz({})
    assert (status, body["error"]) == (503, "JetStream has not established contact with a meta leader")
    other.leader_id = "n3"
    status, body = monitor.healthz({})
    assert (status, body["error"]) == (503, "JetStream is not current with the meta leader")
    meta.current = True
    assert monitor.healthz({})[1]["error"] == "JetStream is not current with the meta leader"
    other.current = True
    assert monitor.healthz({})[0] == 200
    other.replicas["S-x"] = SimpleNamespace(name="ORDERS", role=None, caught_up=False)
    status, body = monitor.healthz({})
    assert (status, body["error"]) == (503, "JetStream stream 'B > ORDERS' is not current")
