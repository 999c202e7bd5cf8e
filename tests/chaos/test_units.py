"""The pure parts: slicing arithmetic, attribute parsing, address handling."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chaos.toxiproxy.addresses import join_host_port, resolve_listen, split_host_port
from chaos.toxiproxy.errors import ApiError
from chaos.toxiproxy.toxics import (
    TOXIC_TYPES,
    Direction,
    LatencyToxic,
    SlicerToxic,
    ToxicEntry,
    build_toxic,
    parse_toxicity,
)


@given(
    size=st.integers(min_value=0, max_value=5000),
    average=st.integers(min_value=1, max_value=300),
    variation_fraction=st.floats(min_value=0, max_value=0.999),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_slices_cover_the_chunk_in_order_and_are_small_enough(
    size: int, average: int, variation_fraction: float, seed: int
) -> None:
    variation = int(average * variation_fraction)
    slicer = SlicerToxic(average_size=average, size_variation=variation)
    bounds = slicer.slice_bounds(size, random.Random(seed))
    assert bounds[0][0] == 0 and bounds[-1][1] == size
    for (_, end), (start, _) in itertools.pairwise(bounds):
        assert end == start
    for start, end in bounds:
        assert end - start <= average + variation
        assert end > start or size == 0


def test_build_toxic_defaults_merges_and_ignores_unknown_attributes() -> None:
    fresh = build_toxic("latency", {"latency": 10, "colour": "red"})
    assert fresh == LatencyToxic(latency=10, jitter=0)
    assert build_toxic("latency", {"jitter": 3}, fresh) == LatencyToxic(latency=10, jitter=3)
    assert build_toxic("latency", None, fresh) == fresh
    assert set(TOXIC_TYPES) == {
        "noop",
        "latency",
        "bandwidth",
        "timeout",
        "reset_peer",
        "slow_close",
        "slicer",
        "limit_data",
    }


@pytest.mark.parametrize(
    ("type_name", "attributes"),
    [
        ("latency", {"latency": True}),
        ("latency", {"latency": 1.0}),
        ("bandwidth", {"rate": -5}),
        ("limit_data", "lots"),
        ("slicer", {"average_size": 0}),
        ("slicer", {"average_size": 3, "size_variation": 9}),
    ],
)
def test_build_toxic_rejects_bad_attributes_as_400(type_name: str, attributes: object) -> None:
    with pytest.raises(ApiError) as raised:
        build_toxic(type_name, attributes)
    assert raised.value.status == 400
    assert raised.value.message.startswith("bad request body: ")


def test_toxic_json_prints_whole_toxicity_as_an_integer() -> None:
    entry = ToxicEntry("t", Direction.UPSTREAM, 1.0, LatencyToxic(latency=5))
    assert entry.to_json()["toxicity"] == 1
    assert isinstance(entry.to_json()["toxicity"], int)
    half = ToxicEntry("t", Direction.UPSTREAM, 0.5, LatencyToxic())
    assert half.to_json()["toxicity"] == 0.5


def test_toxicity_is_kept_as_toxiproxy_float32() -> None:
    assert parse_toxicity(0.123456789) == 0.12345679
    assert parse_toxicity(0.1) == 0.1
    assert parse_toxicity(1) == 1.0
    with pytest.raises(ApiError):
        parse_toxicity(1e39)


def test_direction_parsing_is_case_insensitive_and_strict() -> None:
    assert Direction.parse("UpStream") is Direction.UPSTREAM
    with pytest.raises(ApiError) as raised:
        Direction.parse("both")
    assert raised.value.status == 400


def test_addresses() -> None:
    assert split_host_port("127.0.0.1:8474") == ("127.0.0.1", 8474)
    assert split_host_port("[::1]:80") == ("::1", 80)
    assert split_host_port(":0") == ("", 0)
    assert join_host_port("::1", 80) == "[::1]:80"
    assert join_host_port("127.0.0.1", 0) == "127.0.0.1:0"
    for bad in ["nonsense", "127.0.0.1:", "1:2:3", "127.0.0.1:70000", "host:port"]:
        with pytest.raises(ValueError):
            split_host_port(bad)
    assert resolve_listen("") == ("127.0.0.1", 0)
    assert resolve_listen(":5") == ("127.0.0.1", 5)
    assert resolve_listen("localhost:0") == ("127.0.0.1", 0)
