import dataclasses

import orjson
import pytest

from cluster.api import jsjson
from cluster.api.errors import ApiError, JSErrors
from cluster.runtime.context import STREAM_GROUP_OPTIONS
from cluster.stream.config import (
    PersistMode,
    Placement,
    RePublish,
    Retention,
    StorageType,
    StreamConfig,
    StreamSource,
    SubjectTransformConfig,
    parse_stream_config,
    stream_config_from_bytes,
    stream_config_from_json,
)
from cluster.stream.config_check import (
    check_replicas_placeable,
    check_request_subject,
    decide_create,
    decide_update,
    normalize_stream_config,
    same_config,
    subjects_match_stream,
)
from cluster.stream.replica import group_options_for
from subjects.first_token_index import FirstTokenIndex
from tests.cluster.trace_data import client_json, server_json, server_obj

VERSION = "2.15.1"


def _config_bytes(response: bytes) -> bytes:
    """The `config` object inside a response line, as the server's bytes (dict order kept)."""
    return jsjson.dumps(orjson.loads(response)["config"])


def _created(trace: str, marker: str, streams: dict[str, StreamConfig] | None = None) -> StreamConfig:
    decision = decide_create(parse_stream_config(client_json(trace, marker)), streams or {})
    assert not decision.exists
    return decision.config


def test_r3_create_defaults_match_trace_byte_for_byte() -> None:
    cfg = _created("13-cluster-r3.txt", "add_stream(name='CLUS'")
    expected = _config_bytes(server_json("13-cluster-r3.txt", "add_stream(name='CLUS'"))
    assert jsjson.dumps(cfg.to_json(VERSION)) == expected


def test_limits_create_matches_trace_except_adr31_allow_direct() -> None:
    marker = "add_stream(name='ORDERS'"
    cfg = _created("05-stream-crud.txt", marker)
    expected = orjson.loads(server_json("05-stream-crud.txt", marker))["config"]
    # ADR-31 (followed on purpose, see spec/NOTES.md): max_msgs_per_subject 50 forces allow_direct
    assert expected["allow_direct"] is False and cfg.allow_direct is True
    expected["allow_direct"] = True
    assert jsjson.dumps(cfg.to_json(VERSION)) == jsjson.dumps(expected)


def test_kv_bucket_create_matches_trace() -> None:
    cfg = _created("10-kv.txt", "create_key_value")
    expected = _config_bytes(server_json("10-kv.txt", "create_key_value"))
    assert jsjson.dumps(cfg.to_json(VERSION)) == expected
    assert cfg.metadata["_nats.req.level"] == "1"  # allow_msg_ttl needs API level 1


def test_origin_and_mirror_match_trace() -> None:
    origin = _created("14-cluster-mirror-direct.txt", "add_stream(name='ORIG'")
    assert jsjson.dumps(origin.to_json(VERSION)) == _config_bytes(
        server_json("14-cluster-mirror-direct.txt", "add_stream(name='ORIG'")
    )
    mirror = _created("14-cluster-mirror-direct.txt", "add_stream(name='ORIG_M'", {"ORIG": origin})
    assert jsjson.dumps(mirror.to_json(VERSION)) == _config_bytes(
        server_json("14-cluster-mirror-direct.txt", "add_stream(name='ORIG_M'")
    )
    assert mirror.is_mirror and mirror.mirror_direct and not mirror.allow_direct


def test_mirror_direct_follows_origin_allow_direct() -> None:
    origin = normalize_stream_config(StreamConfig(name="O", subjects=("o.>",)))
    mirror = normalize_stream_config(
        StreamConfig(name="M", mirror=StreamSource(name="O"), mirror_direct=True), {"O": origin}
    )
    assert mirror.mirror_direct is False
    with pytest.raises(ApiError) as info:
        normalize_stream_config(StreamConfig(name="X", subjects=("x",), mirror_direct=True))
    assert info.value.description == "stream has no mirror but does have mirror direct"


def test_list_entry_metadata_has_no_dynamic_keys() -> None:
    cfg = _created("05-stream-crud.txt", "add_stream(name='ORDERS'")
    listed = orjson.loads(server_json("05-stream-crud.txt", "streams_info()"))["streams"][0]["config"]
    assert cfg.to_json()["metadata"] == listed["metadata"] == {"_nats.req.level": "0"}


def test_update_matches_trace_and_dynamic_metadata_is_not_stored() -> None:
    old = _created("05-stream-crud.txt", "add_stream(name='ORDERS'")
    requested = parse_stream_config(client_json("05-stream-crud.txt", "cfg.max_msgs = 2000"))
    assert requested.metadata["_nats.ver"] == "2.15.1"  # nats-py echoes the info's metadata back
    updated = decide_update(old, requested, {"ORDERS": old})
    assert "_nats.ver" not in updated.metadata and "_nats.level" not in updated.metadata
    expected = orjson.loads(server_json("05-stream-crud.txt", "cfg.max_msgs = 2000"))["config"]
    # the request echoes nats-server's `"allow_direct": false`: explicit, so kept (no ADR-31 default)
    assert jsjson.dumps(updated.to_json(VERSION)) == jsjson.dumps(expected)


def test_update_storage_change_error_matches_trace() -> None:
    old = _created("05-stream-crud.txt", "add_stream(name='ORDERS'")
    requested = parse_stream_config(client_json("05-stream-crud.txt", "storage=MEMORY"))
    with pytest.raises(ApiError) as info:
        decide_update(old, requested, {"ORDERS": old})
    assert info.value.to_json() == server_obj("05-stream-crud.txt", "storage=MEMORY")["error"]


def test_create_conflict_error_matches_trace() -> None:
    existing = _created("05-stream-crud.txt", "add_stream(name='ORDERS'")
    requested = parse_stream_config(client_json("05-stream-crud.txt", "name in use"))
    with pytest.raises(ApiError) as info:
        decide_create(requested, {"ORDERS": existing})
    assert info.value.to_json() == server_obj("05-stream-crud.txt", "name in use")["error"]


def test_allow_direct_defaults_true_with_a_per_subject_limit_only_when_left_out() -> None:
    # NOTES.md: ADR-31's default applies to a request without the field; an explicit false is honoured
    kv = b'{"name":"KV_b","subjects":["$KV.b.>"],"max_msgs_per_subject":5%s}'
    assert decide_create(parse_stream_config(kv % b""), {}).config.allow_direct is True
    explicit = decide_create(parse_stream_config(kv % b',"allow_direct":false'), {}).config
    assert explicit.allow_direct is False
    assert b'"allow_direct":false' in explicit.to_bytes()
    assert decide_create(parse_stream_config(kv % b',"allow_direct":false'), {"KV_b": explicit}).exists
    # an update that leaves it out gets the default again, as a create does
    assert decide_update(explicit, parse_stream_config(kv % b""), {"KV_b": explicit}).allow_direct is True
    plain = b'{"name":"P","subjects":["p"]}'
    assert decide_create(parse_stream_config(plain), {}).config.allow_direct is False


def test_identical_recreate_succeeds_after_adr31_adjustment() -> None:
    body = b'{"name":"KV_b","subjects":["$KV.b.>"],"max_msgs_per_subject":5}'
    first = decide_create(parse_stream_config(body), {})
    assert first.config.allow_direct is True
    again = decide_create(parse_stream_config(body), {"KV_b": first.config})
    assert again.exists and again.config == first.config
    # the config as the server printed it (with dynamic metadata) also counts as identical
    echoed = parse_stream_config(jsjson.dumps(first.config.to_json(VERSION)))
    assert decide_create(echoed, {"KV_b": first.config}).exists
    assert same_config(first.config, normalize_stream_config(echoed))


@pytest.mark.parametrize(
    ("body", "description"),
    [
        (b'{"name":"S","future_field":{"x":1}}', 'invalid JSON: json: unknown field "future_field"'),
        (b'{"name":"S","placement":{"cluster":"c","zone":"z"}}', 'invalid JSON: json: unknown field "zone"'),
        (b'{"name":"S","sources":[{"name":"O","start":1}]}', 'invalid JSON: json: unknown field "start"'),
        (
            b'{"name":"S","max_msgs":"lots"}',
            "invalid JSON: json: cannot unmarshal string into Go struct field StreamConfigRequest.max_msgs"
            " of type int64",
        ),
        (
            b'{"name":"S","placement":{"cluster":5}}',
            "invalid JSON: json: cannot unmarshal number into Go struct field"
            " StreamConfigRequest.placement.cluster of type string",
        ),
        (b"[]", "invalid JSON: json: cannot unmarshal array into Go value of type server.StreamConfigRequest"),
        (b'{"name":"S"', "invalid JSON: unexpected EOF"),
    ],
)
def test_unknown_fields_and_wrong_types_are_refused_as_nats_server_refuses_them(
    body: bytes, description: str
) -> None:
    # nats-server 2.15 decodes requests strictly: a field it does not know is an error, never ignored
    with pytest.raises(ApiError) as info:
        parse_stream_config(body)
    assert (info.value.code, info.value.err_code, info.value.description) == (400, 10025, description)


def test_metadata_keys_are_free_and_wrong_types_rejected() -> None:
    cfg = parse_stream_config(b'{"name":"S","subjects":["s"],"metadata":{"any.key":"v"},"allow_msg_ttl":true}')
    assert cfg.metadata == {"any.key": "v"} and cfg.allow_msg_ttl
    with pytest.raises(ApiError) as info:
        parse_stream_config(b"{nope")
    assert info.value.err_code == 10025
    with pytest.raises(ApiError):
        parse_stream_config(b'{"name":"S","retention":"forever"}')


def _invalid(cfg: StreamConfig, streams: dict[str, StreamConfig] | None = None) -> ApiError:
    with pytest.raises(ApiError) as info:
        decide_create(cfg, streams or {})
    return info.value


@pytest.mark.parametrize(
    ("cfg", "err_code", "description"),
    [
        (
            StreamConfig(name=""),
            10052,
            "stream name is required and can not contain '.', '*', '>', '\\', '/'",
        ),
        (
            StreamConfig(name="a.b"),
            10052,
            "stream name is required and can not contain '.', '*', '>', '\\', '/'",
        ),
        (StreamConfig(name="x" * 256), 10052, "stream name is too long, maximum allowed is 255"),
        (StreamConfig(name="S", subjects=("a..b",)), 10052, "invalid subject"),
        # as in nats-server, the overlap check meets a literal duplicate first
        (StreamConfig(name="S", subjects=("a", "a")), 10052, 'subject "a" overlaps with "a"'),
        (StreamConfig(name="S", subjects=("a.*", "a.b")), 10052, 'subject "a.*" overlaps with "a.b"'),
        (StreamConfig(name="S", subjects=(">",)), 10052, "capturing all subjects requires no-ack to be true"),
        (
            StreamConfig(name="S", subjects=("$JS.API.>",)),
            10052,
            "subjects that overlap with jetstream api require no-ack to be true",
        ),
        (StreamConfig(name="S", max_age=-1), 10052, "max age can not be negative"),
        (StreamConfig(name="S", max_age=5), 10052, "max age needs to be >= 100ms"),
        (StreamConfig(name="S", duplicate_window=-1), 10052, "duplicates window can not be negative"),
        (
            StreamConfig(name="S", max_age=10**9, duplicate_window=2 * 10**9),
            10052,
            "duplicates window can not be larger then max age",
        ),
        (StreamConfig(name="S", num_replicas=6), 10052, "maximum replicas is 5"),
        (StreamConfig(name="S", num_replicas=-1), 10133, "replicas count cannot be negative"),
        (
            StreamConfig(name="S", deny_purge=True, allow_rollup_hdrs=True),
            10052,
            "roll-ups require the purge permission",
        ),
        (StreamConfig(name="S", sealed=True), 10052, "stream configuration for create can not be sealed"),
        (
            StreamConfig(name="M", subjects=("m",), mirror=StreamSource(name="O")),
            10034,
            "stream mirrors can not contain subjects",
        ),
        (
            StreamConfig(name="M", mirror=StreamSource(name="O"), sources=(StreamSource(name="P"),)),
            10031,
            "stream mirrors can not also contain other sources",
        ),
        (StreamConfig(name="M", mirror=StreamSource(name="a.b")), 10142, "mirrored stream name is invalid"),
        (
            StreamConfig(name="S", sources=(StreamSource(name="A"), StreamSource(name="A"))),
            10140,
            "duplicate source configuration detected",
        ),
        (
            StreamConfig(name="S", allow_msg_counter=True),
            10052,
            "message counters are not supported by jetraft",
        ),
        (
            StreamConfig(name="S", discard_new_per_subject=True),
            10052,
            "discard new per subject requires discard new policy to be set",
        ),
        # subject delete markers (ADR-43), as nats-server 2.15.1 answered them
        (
            StreamConfig(name="S", subject_delete_marker_ttl=500_000_000),
            10052,
            "subject delete marker TTL must be at least 1 second",
        ),
        (
            StreamConfig(name="S", subject_delete_marker_ttl=-5),
            10052,
            "subject delete marker TTL must not be negative",
        ),
        (
            StreamConfig(name="S", subject_delete_marker_ttl=10**9, deny_purge=True, allow_rollup_hdrs=True),
            10052,
            "roll-ups require the purge permission",
        ),
        (
            StreamConfig(name="M", mirror=StreamSource(name="O"), subject_delete_marker_ttl=10**9),
            10052,
            "subject delete markers forbidden on mirrors",
        ),
        (
            StreamConfig(name="M", mirror=StreamSource(name="O"), subject_delete_marker_ttl=10**8),
            10052,
            "subject delete marker TTL must be at least 1 second",
        ),
    ],
)
def test_invalid_configs(cfg: StreamConfig, err_code: int, description: str) -> None:
    error = _invalid(cfg)
    assert (error.err_code, error.description) == (err_code, description)


def test_subject_delete_markers_turn_on_ttls_and_rollups() -> None:
    # nats-server 2.15.1 (not pedantic): the same request gave these fields back
    for requested in (
        StreamConfig(name="S", subject_delete_marker_ttl=10**9),
        StreamConfig(name="S", subject_delete_marker_ttl=10**9, deny_purge=True),
        StreamConfig(name="S", subject_delete_marker_ttl=10**9, allow_rollup_hdrs=False),
    ):
        cfg = decide_create(requested, {}).config
        assert (cfg.allow_msg_ttl, cfg.allow_rollup_hdrs, cfg.deny_purge) == (True, True, False)
        assert cfg.metadata["_nats.req.level"] == "1"
        assert cfg.to_json()["subject_delete_marker_ttl"] == 10**9
    ttl_only = decide_create(StreamConfig(name="T", allow_msg_ttl=True), {}).config
    with pytest.raises(ApiError) as info:
        decide_update(ttl_only, dataclasses.replace(ttl_only, allow_msg_ttl=False), {"T": ttl_only})
    assert info.value.description == "message TTL status can not be disabled"
    with_markers = decide_update(
        ttl_only, dataclasses.replace(ttl_only, subject_delete_marker_ttl=2 * 10**9), {"T": ttl_only}
    )
    assert with_markers.subject_delete_marker_ttl == 2 * 10**9 and with_markers.allow_rollup_hdrs


def test_limits_below_minus_one_are_unlimited_unless_pedantic() -> None:
    """nats-server 2.15.1: max_msgs -2 comes back -1; with `pedantic: true` it is refused (10157)."""
    cfg = decide_create(StreamConfig(name="S", max_msgs=-2, max_bytes=-5, max_consumers=-9), {}).config
    assert (cfg.max_msgs, cfg.max_bytes, cfg.max_consumers) == (-1, -1, -1)
    with pytest.raises(ApiError) as info:
        decide_create(StreamConfig(name="S", max_msgs=-2), {}, pedantic=True)
    assert info.value.to_json() == {"code": 400, "err_code": 10157, "description": "pedantic mode: max_msgs must be set to -1"}


@pytest.mark.parametrize(
    ("cfg", "err_code", "description"),
    [
        # each from a nats-server 2.15.1 answer to the same request with `pedantic: true`
        (StreamConfig(name="S", max_age=10**9), 10157, "pedantic mode: duplicate window cannot be bigger than max age"),
        (
            StreamConfig(name="S", subject_delete_marker_ttl=2 * 10**9, allow_rollup_hdrs=True),
            10052,
            "subject delete marker cannot be set if message TTLs are disabled",
        ),
        (
            StreamConfig(name="S", subject_delete_marker_ttl=2 * 10**9, allow_msg_ttl=True),
            10052,
            "subject delete marker cannot be set if roll-ups are disabled",
        ),
        (
            StreamConfig(name="S", allow_msg_schedules=True),
            10052,
            "message scheduling cannot be set if roll-ups are disabled",
        ),
        (
            StreamConfig(name="S", republish=RePublish(src="", dest="rp.>")),
            10157,
            "pedantic mode: republish source can not be empty",
        ),
        (
            StreamConfig(
                name="S",
                subjects=("p8",),
                subject_transform=SubjectTransformConfig("p8", "q8"),
                republish=RePublish(src=">", dest=">"),
            ),
            10157,
            "pedantic mode: implicit republish based on subject transform",
        ),
    ],
)
def test_pedantic_mode_refuses_what_nats_server_would_adjust(cfg: StreamConfig, err_code: int, description: str) -> None:
    decide_create(cfg, {})  # without pedantic mode: adjusted, accepted
    with pytest.raises(ApiError) as info:
        decide_create(cfg, {}, pedantic=True)
    assert (info.value.err_code, info.value.description) == (err_code, description)


def test_pedantic_mode_takes_a_config_that_needs_no_adjusting() -> None:
    origin = decide_create(StreamConfig(name="ORIG", subjects=("orig",), allow_direct=True), {}).config
    mirror = StreamConfig(name="M", mirror=StreamSource(name="ORIG"))
    with pytest.raises(ApiError) as info:
        decide_create(mirror, {"ORIG": origin}, pedantic=True)
    assert info.value.description == "pedantic mode: origin stream has direct get set, mirror has it disabled"
    direct = dataclasses.replace(mirror, mirror_direct=True)
    assert decide_create(direct, {"ORIG": origin}, pedantic=True).config.mirror_direct
    assert decide_create(StreamConfig(name="P", subjects=("p",)), {}, pedantic=True).config.max_msgs == -1


def test_subjects_overlap_between_streams() -> None:
    orders = normalize_stream_config(StreamConfig(name="ORDERS", subjects=("orders.>",)))
    error = _invalid(StreamConfig(name="NEW", subjects=("orders.eu.*",)), {"ORDERS": orders})
    assert error.to_json() == {
        "code": 400,
        "err_code": 10065,
        "description": "subjects overlap with an existing stream",
    }
    # no overlap with a disjoint subject space, and the default subject is the name
    ok = decide_create(StreamConfig(name="OTHER"), {"ORDERS": orders})
    assert ok.config.subjects == ("OTHER",)
    # an update may keep its own subjects
    assert decide_update(orders, dataclasses.replace(orders, max_msgs=5), {"ORDERS": orders}).max_msgs == 5


def test_update_rules() -> None:
    base = normalize_stream_config(StreamConfig(name="S", subjects=("s",), deny_delete=True, deny_purge=True))
    streams = {"S": base}
    cases = [
        (dataclasses.replace(base, name="T"), "stream configuration name must match original"),
        (
            dataclasses.replace(base, deny_delete=False),
            "stream configuration update can not cancel deny message deletes",
        ),
        (
            dataclasses.replace(base, deny_purge=False),
            "stream configuration update can not cancel deny purge",
        ),
    ]
    for requested, description in cases:
        with pytest.raises(ApiError) as info:
            decide_update(base, requested, streams)
        assert info.value.description == description
    wq = normalize_stream_config(StreamConfig(name="W", subjects=("w",)))
    with pytest.raises(ApiError) as info:
        decide_update(wq, dataclasses.replace(wq, retention=Retention.WORKQUEUE), {"W": wq})
    assert "workqueue" in info.value.description
    sealed = decide_update(base, dataclasses.replace(base, sealed=True), streams)
    assert sealed.sealed and sealed.deny_delete and sealed.deny_purge and sealed.max_age == 0
    mirror = normalize_stream_config(StreamConfig(name="M", mirror=StreamSource(name="O")))
    with pytest.raises(ApiError) as info:
        decide_update(mirror, dataclasses.replace(mirror, mirror=StreamSource(name="P")), {"M": mirror})
    assert info.value.err_code == 10055


def test_request_subject_checks_and_placement() -> None:
    cfg = StreamConfig(name="A")
    with pytest.raises(ApiError) as info:
        check_request_subject("B", cfg)
    assert info.value.err_code == 10056
    check_request_subject("A", cfg)
    r5 = normalize_stream_config(StreamConfig(name="CLUS5", subjects=("clus5.>",), num_replicas=5))
    with pytest.raises(ApiError) as info:
        check_replicas_placeable(r5, cluster_size=3)
    assert info.value.to_json() == server_obj("13-cluster-r3.txt", "num_replicas=5")["error"]


def test_names_filter_and_bytes_round_trip() -> None:
    cfg = normalize_stream_config(
        StreamConfig(
            name="ORDERS", subjects=("orders.>",), storage=StorageType.MEMORY, metadata={"team": "x"}
        )
    )
    assert subjects_match_stream("orders.new", cfg)
    assert not subjects_match_stream("returns.new", cfg)
    assert stream_config_from_bytes(cfg.to_bytes()) == cfg


def test_max_direct_lag_metadata() -> None:
    assert StreamConfig(name="S", metadata={"jetraft.max_direct_lag": "100"}).max_direct_lag == 100
    assert StreamConfig(name="S", metadata={"jetraft.max_direct_lag": "soon"}).max_direct_lag is None
    assert StreamConfig(name="S").max_direct_lag is None
    assert JSErrors.STREAM_INVALID_CONFIG.code == 500


@pytest.mark.parametrize(
    ("src", "dest"),
    # each refused by a real nats-server 2.15.1 with 10052
    [("o4.*", "rp.s4.*"), (">", "rp.s10"), ("e2.a", "rp.>"), ("e1.*", "rp.e1.$2"), ("e6.a", "rp.e6.$1")],
)
def test_republish_mappings_nats_server_refuses(src: str, dest: str) -> None:
    cfg = StreamConfig(
        name="S", subjects=("o4.*", "e1.*", "e2.a", "e6.a"), republish=RePublish(src=src, dest=dest)
    )
    error = _invalid(cfg)
    assert (error.err_code, error.description) == (
        10052,
        f"stream configuration for republish with transform from '{src}' to '{dest}' not valid",
    )


@pytest.mark.parametrize(
    ("src", "dest"),
    [
        ("e1.*", "rp.e1.$1"),
        ("e1.*", "rp.{{wildcard(1)}}"),
        (">", "rp.>"),
        ("e1.*", "rp.all"),
        ("e1.*", "rp.{{partition(3,1)}}"),
    ],
)
def test_republish_mappings_accepted(src: str, dest: str) -> None:
    cfg = StreamConfig(name="S", subjects=("e1.*",), republish=RePublish(src=src, dest=dest))
    decide_create(cfg, {})


ORIG = normalize_stream_config(StreamConfig(name="ORIG", subjects=("orig",)))


@pytest.mark.parametrize(
    ("body", "err_code", "description"),
    # nats-server 2.15.1 (a 3-node cluster) refused these with these errors
    [
        (
            {"name": "M3", "mirror": {"name": "ORIG", "consumer": {"name": "c.x", "deliver_subject": "d"}}},
            10213,
            "stream mirror consumer config is invalid",
        ),
        (
            {"name": "S1", "sources": [{"name": "ORIG", "consumer": {"name": "c", "deliver_subject": "d.*"}}]},
            10215,
            "stream source consumer config is invalid",
        ),
        (
            {
                "name": "S2",
                "sources": [{"name": "ORIG", "opt_start_seq": 2, "consumer": {"name": "c", "deliver_subject": "d"}}],
            },
            10215,
            "stream source consumer config is invalid",
        ),
        (
            {"name": "S3", "sources": [{"name": "ORIG", "external": {"api": "$JS.x.API", "deliver": "a.*"}}]},
            10024,
            "stream external delivery prefix a.* must not contain wildcards",
        ),
        (
            {"name": "S4", "sources": [{"name": "ORIG", "external": {"api": "$JS.API", "deliver": ""}}]},
            10021,
            "stream external api prefix $JS.API must not overlap with $JS.API",
        ),
        (
            {"name": "X2", "subjects": ["x2"], "persist_mode": "async", "num_replicas": 3},
            10052,
            "async persist mode is not supported on replicated streams",
        ),
        (
            {"name": "X3", "subjects": ["x3"], "subject_delete_marker_ttl": 500000000},
            10052,
            "subject delete marker TTL must be at least 1 second",
        ),
        (
            {"name": "X7", "subjects": ["x7"], "allow_msg_counter": True, "discard": "new"},
            10052,
            "counter stream cannot use discard new",
        ),
    ],
)
def test_nats_server_checks_come_before_jetraft_refusals(
    body: dict[str, object], err_code: int, description: str
) -> None:
    error = _invalid(parse_stream_config(orjson.dumps(body)), {"ORIG": ORIG})
    assert (error.err_code, error.description) == (err_code, description)


@pytest.mark.parametrize(
    "body",
    # accepted by nats-server 2.15.1, not implemented by jetraft: refused rather than ignored
    [
        {"name": "M2", "mirror": {"name": "ORIG", "consumer": {"name": "c", "deliver_subject": "d"}}},
        {"name": "S5", "sources": [{"name": "ORIG", "external": {"api": "$JS.x.API", "deliver": ""}}]},
    ],
)
def test_settings_jetraft_does_not_implement_are_refused(body: dict[str, object]) -> None:
    error = _invalid(parse_stream_config(orjson.dumps(body)), {"ORIG": ORIG})
    assert error.err_code == 10052 and "not supported by jetraft" in error.description


def test_placement_in_another_cluster_and_placement_changes() -> None:
    elsewhere = normalize_stream_config(StreamConfig(name="P", subjects=("p",), placement=Placement(cluster="x")))
    with pytest.raises(ApiError) as info:
        check_replicas_placeable(elsewhere, cluster_size=3, cluster_name="jetraft")
    # as nats-server answers a placement in a cluster it does not know
    assert info.value.to_json() == {"code": 400, "err_code": 10005, "description": "no suitable peers for placement"}
    here = dataclasses.replace(elsewhere, placement=Placement(cluster="jetraft"))
    check_replicas_placeable(here, cluster_size=3, cluster_name="jetraft")
    with pytest.raises(ApiError) as info:
        decide_update(here, dataclasses.replace(here, placement=Placement(tags=("a",))), {"P": here})
    assert info.value.err_code == 10052  # nats-server would move the stream; jetraft does not move streams


def test_async_persist_mode_on_an_r1_file_stream_is_kept_and_its_group_does_not_fsync() -> None:
    cfg = decide_create(parse_stream_config(b'{"name":"A","subjects":["a"],"persist_mode":"async"}'), {}).config
    assert cfg.persist_mode is PersistMode.ASYNC
    assert cfg.to_json(VERSION)["persist_mode"] == "async"
    assert group_options_for(cfg, STREAM_GROUP_OPTIONS).sync is False
    plain = decide_create(parse_stream_config(b'{"name":"P","subjects":["p"]}'), {}).config
    assert group_options_for(plain, STREAM_GROUP_OPTIONS) is STREAM_GROUP_OPTIONS
    # as nats-server: the mode is chosen at creation
    with pytest.raises(ApiError) as info:
        decide_update(cfg, parse_stream_config(b'{"name":"A","subjects":["a"]}'), {"A": cfg})
    assert info.value.description == "stream configuration update can not change persist mode"


@pytest.mark.parametrize(
    "request_json",
    [
        {"name": "plain"},
        {
            "name": "rich",
            "description": "every kind of field",
            "subjects": ["a.>", "b.*"],
            "retention": "interest",
            "max_consumers": 3,
            "max_msgs": 10,
            "max_bytes": 1000,
            "max_age": 60_000_000_000,
            "max_msgs_per_subject": 2,
            "max_msg_size": 100,
            "discard": "new",
            "discard_new_per_subject": True,
            "storage": "memory",
            "num_replicas": 3,
            "duplicate_window": 1_000_000_000,
            "placement": {"cluster": "c", "tags": ["x", "y"]},
            "sources": [{"name": "o1", "filter_subject": "f.>"}, {"name": "o2", "opt_start_seq": 5}],
            "republish": {"src": "a.>", "dest": "r.>", "headers_only": True},
            "subject_transform": {"src": "b.*", "dest": "t.{{wildcard(1)}}"},
            "consumer_limits": {"inactive_threshold": 5_000_000_000, "max_ack_pending": 9},
            "metadata": {"owner": "me"},
            "allow_rollup_hdrs": True,
            "allow_direct": True,
            "deny_delete": True,
            "allow_msg_ttl": True,
            "subject_delete_marker_ttl": 2_000_000_000,
        },
        {"name": "mirror", "mirror": {"name": "origin", "opt_start_seq": 3}, "mirror_direct": True},
    ],
)
def test_a_created_config_parses_back_from_its_json_unchanged(request_json: dict[str, object]) -> None:
    # the meta leader hands the config it decided to the new replica and to its config cache, where
    # every other node parses the assignment's JSON: both must be the same config
    decided = decide_create(parse_stream_config(orjson.dumps(request_json)), {}).config
    assert stream_config_from_json(decided.to_json()) == decided


def test_create_overlap_check_with_the_subject_index_decides_as_the_full_scan() -> None:
    existing = {
        name: StreamConfig(name=name, subjects=subjects)
        for name, subjects in {
            "A": ("orders.*",),
            "B": ("*.shipped",),
            "C": ("items.>", "stock"),
            "M": (),
        }.items()
    }
    index = FirstTokenIndex()
    for name, cfg in existing.items():
        index.set(name, cfg.subjects)
    for subjects in [("orders.new",), ("x.shipped",), ("items",), ("items.a.b",), ("stock.x",), ("*",), (">",),
                     ("other",), ("stock",), ("orders",), ("new", "orders.>")]:  # fmt: skip
        requested = StreamConfig(name="N", subjects=subjects)
        outcomes = []
        for with_index in (None, index):
            try:
                decide_create(dataclasses.replace(requested, no_ack=True), existing, subjects=with_index)
                outcomes.append("created")
            except ApiError as error:
                outcomes.append(error.err_code)
        assert outcomes[0] == outcomes[1], subjects
    assert outcomes == [10065, 10065]  # the last one overlaps A
