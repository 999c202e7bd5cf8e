"""A LEADER.STEPDOWN's placement, as nats-server 2.15.1 reads it (getStepDownPreferredPlacement)."""

from __future__ import annotations

import json

import pytest

from cluster.api.errors import ApiError
from cluster.api.stepdown import stepdown_candidates

VOTERS = ("n1", "n2", "n3")
TAGS = {"n2": ("az:1",), "n3": ("az:2", "ssd")}  # n1 leads; a peer missing here is not connected


def candidates(body: object, connected: dict[str, tuple[str, ...]] = TAGS) -> list[str] | None:
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    return stepdown_candidates(payload, "n1", VOTERS, connected.get, "jetraft")


@pytest.mark.parametrize("body", [b"", b"nul", b'"x"', {}, {"placement": None}])
def test_no_placement_lets_any_peer_take_over(body: object) -> None:
    assert candidates(body) is None


@pytest.mark.parametrize(
    ("placement", "allowed"),
    [
        ({"cluster": "jetraft"}, ["n2", "n3"]),
        ({"tags": ["ssd"]}, ["n3"]),
        ({"cluster": "jetraft", "tags": ["az:1"]}, ["n2"]),
        ({"preferred": "n3"}, ["n3"]),
    ],
)
def test_a_placement_narrows_the_peers(placement: dict[str, object], allowed: list[str]) -> None:
    assert candidates({"placement": placement}) == allowed


@pytest.mark.parametrize(
    ("placement", "connected", "description"),
    [
        # as a 3-node nats-server cluster answered {"placement": {"cluster": "nowhere"}}
        ({"cluster": "nowhere"}, TAGS, "no replacement peer connected"),
        # the others in the words of nats-server's source
        ({"tags": ["gpu"]}, TAGS, "no replacement peer connected"),
        ({}, {}, "no replacement peer connected"),
        ({"preferred": "n1"}, TAGS, 'preferred server "n1" is already leader'),
        ({"preferred": "n9"}, TAGS, 'preferred server "n9" not known'),
    ],
)
def test_no_peer_fits(placement: dict[str, object], connected: dict[str, tuple[str, ...]], description: str) -> None:
    with pytest.raises(ApiError) as refused:
        candidates({"placement": placement}, connected)
    assert refused.value.to_json() == {"code": 400, "err_code": 10005, "description": description}


def test_a_bad_body_is_invalid_json() -> None:
    with pytest.raises(ApiError) as refused:
        candidates({"placement": {"cluster": "jetraft"}, "force": True})
    assert refused.value.to_json()["description"] == 'invalid JSON: json: unknown field "force"'


def test_a_placement_that_is_no_object_is_refused_in_gos_words() -> None:
    with pytest.raises(ApiError) as refused:
        candidates({"placement": 5})
    assert refused.value.to_json()["description"] == (
        "invalid JSON: json: cannot unmarshal number into Go struct field JSApiLeaderStepdownRequest.placement"
        " of type server.Placement"
    )
