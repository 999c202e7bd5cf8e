"""CONSUMER.UNPIN bodies, answered for a consumer without that priority group (no consumer here pins a
client: the pinned_client policy is refused): each expected answer is nats-server 2.15.1's to the same
body."""

from __future__ import annotations

import pytest

from cluster.api.errors import ApiError
from cluster.consumer.unpin import parse_unpin_group, unpin

NOT_SPECIFIED = (10025, "invalid JSON: consumer group not specified")
BAD_NAME = (
    10162,
    "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters",
)
SEEN_ON_NATS_SERVER = [
    (b"", (10025, "invalid JSON: unexpected end of JSON input")),
    (b"{", (10025, "invalid JSON: unexpected end of JSON input")),
    (b"nul", (10025, "invalid JSON: unexpected end of JSON input")),
    (b"null", NOT_SPECIFIED),
    (b"{}", NOT_SPECIFIED),
    (b'{"group":""}', NOT_SPECIFIED),
    (
        b'{"group":5}',
        (
            10025,
            "invalid JSON: json: cannot unmarshal number into Go struct field JSApiConsumerUnpinRequest.group"
            " of type string",
        ),
    ),
    (b'{"group":"g","x":1}', (10160, "Provided priority group does not exist for this consumer")),
    (b'{"group":"bad group"}', BAD_NAME),
    (b'{"group":"abcdefghijklmnopq"}', BAD_NAME),
    (b'{"group":"g"} x', (10025, "invalid JSON: invalid character 'x' after top-level value")),
    (b'{"group":"g"}{"group":"h"}', (10025, "invalid JSON: invalid character '{' after top-level value")),
    (
        b"[]",
        (10025, "invalid JSON: json: cannot unmarshal array into Go value of type server.JSApiConsumerUnpinRequest"),
    ),
    (b'{"a":1,}', (10025, "invalid JSON: invalid character '}' looking for beginning of object key string")),
]


@pytest.mark.parametrize(("body", "error"), SEEN_ON_NATS_SERVER)
def test_unpin_answers_as_nats_server(body: bytes, error: tuple[int, str]) -> None:
    with pytest.raises(ApiError) as refused:
        unpin((), parse_unpin_group(body))
    assert (refused.value.to_json()["err_code"], refused.value.to_json()["description"]) == error


def test_a_consumer_with_the_group_is_unpinned() -> None:
    assert unpin(("g",), "g") == b'{"type":"io.nats.jetstream.api.v1.consumer_unpin_response"}'
