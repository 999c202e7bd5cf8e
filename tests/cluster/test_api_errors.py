import re

import orjson
import pytest

from cluster.api.errors import ApiError, ErrorSpec, JSErrors, error_response
from tests.cluster.trace_data import all_server_errors

SPECS = {name: spec for name, spec in vars(JSErrors).items() if isinstance(spec, ErrorSpec)}


def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{\w+\}", template)
    return re.compile(".*".join(re.escape(p) for p in parts) + r"\Z", re.S)


def test_err_codes_are_unique() -> None:
    codes = [spec.err_code for spec in SPECS.values()]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("error", all_server_errors(), ids=lambda e: f"{e['err_code']}:{e['description']}")
def test_every_error_in_the_traces_is_in_the_table(error: dict[str, object]) -> None:
    matching = [spec for spec in SPECS.values() if spec.err_code == error["err_code"]]
    assert matching, f"err_code {error['err_code']} missing from JSErrors"
    spec = matching[0]
    assert spec.code == error["code"]
    assert _template_regex(spec.template).match(str(error["description"]))


def test_known_codes_from_errors_json() -> None:
    # spot checks against nats-server's server/errors.json (the brief's list, each verified)
    expected = {
        "STREAM_NOT_FOUND": (404, 10059, "stream not found"),
        "STREAM_NAME_EXIST": (400, 10058, "stream name already in use with a different configuration"),
        "STREAM_SUBJECT_OVERLAP": (400, 10065, "subjects overlap with an existing stream"),
        "STREAM_WRONG_LAST_SEQUENCE": (400, 10071, "wrong last sequence: {seq}"),
        "STREAM_WRONG_LAST_MSG_ID": (400, 10070, "wrong last msg ID: {id}"),
        "STREAM_NOT_MATCH": (400, 10060, "expected stream does not match"),
        "STREAM_MESSAGE_EXCEEDS_MAXIMUM": (400, 10054, "message size exceeds maximum allowed"),
        "NO_MESSAGE_FOUND": (404, 10037, "no message found"),
        "INSUFFICIENT_RESOURCES": (503, 10023, "insufficient resources"),
        "STREAM_REPLICAS_NOT_SUPPORTED": (500, 10074, "replicas > 1 not supported in non-clustered mode"),
        "BAD_REQUEST": (400, 10003, "bad request"),
        "STREAM_INVALID_CONFIG": (500, 10052, "{err}"),
        "STREAM_MSG_DELETE_FAILED": (500, 10057, "{err}"),
        "STREAM_PURGE_FAILED": (500, 10110, "{err}"),
        "STREAM_MIN_LAST_SEQ": (412, 10180, "min last sequence"),
    }
    for name, (code, err_code, template) in expected.items():
        spec = SPECS[name]
        assert (spec.code, spec.err_code, spec.template) == (code, err_code, template), name


def test_error_json_and_response() -> None:
    err = JSErrors.SEQUENCE_NOT_FOUND(seq=9)
    assert isinstance(err, ApiError)
    assert err.to_json() == {"code": 400, "err_code": 10043, "description": "sequence 9 not found"}
    body = error_response(
        "io.nats.jetstream.api.v1.stream_purge_response",
        JSErrors.STREAM_PURGE_FAILED(err="stream purge not permitted"),
        purged=0,
    )
    # byte for byte as trace 09
    assert body == (
        b'{"type":"io.nats.jetstream.api.v1.stream_purge_response","error":{"code":500,"err_code":10110,'
        b'"description":"stream purge not permitted"},"purged":0}'
    )
    assert orjson.loads(body)["error"]["err_code"] == 10110


def test_spec_matches_and_equality() -> None:
    err = JSErrors.STREAM_NOT_FOUND()
    assert JSErrors.STREAM_NOT_FOUND.matches(err)
    assert not JSErrors.STREAM_NAME_EXIST.matches(err)
    assert err == ApiError(404, 10059, "stream not found")
    assert str(err) == "stream not found"
