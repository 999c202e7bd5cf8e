"""JSON bytes shaped like nats-server's (Go's encoding/json) output.

Clients compare nothing byte for byte, but the traces do, and people diff
them: Go escapes `<`, `>`, `&` and the two Unicode line separators inside
strings, and keeps struct field order, which a Python dict keeps too. Those
characters can only appear inside JSON strings, so replacing them after
encoding is safe.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from cluster.api import go_json_scan

_GO_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def dumps(value: Any) -> bytes:
    """Encode `value` compactly, escaping as Go does; dict order is kept."""
    data = orjson.dumps(value)
    for raw, escaped in _GO_ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


class RequestJSONError(ValueError):
    """A request body that is not the JSON object a JetStream API expects."""


class GoObject(dict[str, Any]):
    """A request object read the way nats-server's strict decoder reads it (Go's encoding/json with
    DisallowUnknownFields): it records the keys its reader looked at, so a key no reader knows is
    refused (`reject_unknown`) rather than accepted and ignored, and it knows its Go struct path
    (`StreamConfigRequest.placement`), which Go's type errors name."""

    __slots__ = ("_nested", "_used", "path")

    def __init__(self, value: dict[str, Any], path: str) -> None:
        super().__init__(value)
        self.path = path
        self._used: set[str] = set()
        self._nested: list[GoObject] = []

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self._used.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._used.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self._used.add(key)
        return super().__contains__(key)

    def nested(self, key: str, value: dict[str, Any]) -> GoObject:
        """`value`, found under `key` (an object, or an item of an array of objects), checked likewise."""
        child = GoObject(value, f"{self.path}.{key}")
        self._nested.append(child)
        return child

    def first_unknown(self) -> str | None:
        for key in dict.keys(self):
            if key not in self._used:
                return key
        for child in self._nested:
            found = child.first_unknown()
            if found is not None:
                return found
        return None


def _kind(value: Any) -> str:
    return {bool: "bool", str: "string", int: "number", float: "number", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def decode_go(raw: bytes) -> Any:
    """The value Go's Decoder makes of `raw`, or RequestJSONError with Go's words (cluster/api/
    go_json_scan.py). Several objects one after another are read into the same request, as Go reads
    each into the same struct: a later field overrides an earlier one. A body with no value is None.

    A body orjson reads is one valid value, which Go reads the same: the byte-by-byte scan (about a
    hundred times slower) runs only for what orjson refuses."""
    try:
        return orjson.loads(raw) if raw.strip(b" \t\r\n") else None
    except orjson.JSONDecodeError:
        pass
    try:
        spans = go_json_scan.scan_values(raw)
    except go_json_scan.GoSyntaxError as exc:
        raise RequestJSONError(str(exc)) from None
    value: Any = None
    for start, end in spans:
        part = _loads_valid(raw[start:end])
        if isinstance(value, dict) and isinstance(part, dict):
            value = {**value, **part}
        elif part is not None or value is None:
            value = part
    return value


def _loads_valid(raw: bytes) -> Any:
    """A value Go's scanner accepted. Go reads bytes that are no UTF-8 as U+FFFD; orjson refuses them,
    and numbers past 64 bits, which Python's own reader takes (the field's type check then refuses)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return _without_lone_surrogates(json.loads(text))


def _without_lone_surrogates(value: Any) -> Any:
    """Go reads a `\\uD800` escape that pairs with nothing as U+FFFD (Python's reader keeps it)."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


def loads_request(
    payload: bytes | bytearray | memoryview | str, go_type: str, *, objects_only: bool = False
) -> GoObject:
    """Decode a JetStream API request body as nats-server decodes it into `server.<go_type>`; an empty
    body or `null` is an empty request. Call `reject_unknown` once every field was read.

    `objects_only`: the requests nats-server reads only when the body starts like a JSON object or
    array (its isJSONObjectOrArray: names, lists, infos, purges, stepdowns); any other body is empty."""
    raw = bytes(payload) if not isinstance(payload, str) else payload.encode()
    if objects_only and raw.lstrip(b" \t\r\n")[:1] not in (b"{", b"["):
        return GoObject({}, go_type)
    value = decode_go(raw)
    if value is None:
        return GoObject({}, go_type)
    if not isinstance(value, dict):
        raise RequestJSONError(
            f"json: cannot unmarshal {_kind(value)} into Go value of type server.{go_type}"
        )
    return GoObject(value, go_type)


def unmarshal_request(payload: bytes | bytearray | memoryview, go_type: str) -> GoObject:
    """A request body read as nats-server reads the few it hands to json.Unmarshal (CONSUMER.UNPIN):
    one value and nothing after it, unknown fields let through, Go's words without an offset."""
    raw = bytes(payload)
    try:
        value = orjson.loads(raw)  # one valid value, read as json.Unmarshal reads it (see decode_go)
    except orjson.JSONDecodeError:
        try:
            start, end = go_json_scan.scan_unmarshal(raw)
        except go_json_scan.GoSyntaxError as exc:
            raise RequestJSONError(exc.words) from None
        value = _loads_valid(raw[start:end])
    if value is None:
        return GoObject({}, go_type)
    if not isinstance(value, dict):
        raise RequestJSONError(f"json: cannot unmarshal {_kind(value)} into Go value of type server.{go_type}")
    return GoObject(value, go_type)


def reject_unknown(obj: dict[str, Any]) -> None:
    """nats-server refuses a request holding a field it does not know: so does jetraft, for every
    field its readers did not look at (a request that is a plain dict is not checked)."""
    if isinstance(obj, GoObject):
        key = obj.first_unknown()
        if key is not None:
            raise RequestJSONError(f'json: unknown field "{key}"')


def is_empty_request(payload: bytes | bytearray | memoryview) -> bool:
    """nats-server's isEmptyRequest: nothing, or a JSON object with no field."""
    raw = bytes(payload)
    if not raw or raw == b"{}":
        return True
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and not value


def nested_object(obj: dict[str, Any], key: str, value: dict[str, Any]) -> dict[str, Any]:
    """An object found under `key` of `obj` (an item of an array of objects): checked as `obj` is."""
    return obj.nested(key, value) if isinstance(obj, GoObject) else value


def loads_object(payload: bytes | bytearray | memoryview | str) -> dict[str, Any]:
    """Decode a request body that must be a JSON object (empty body: empty object)."""
    raw = bytes(payload) if not isinstance(payload, str) else payload.encode()
    if not raw.strip():
        return {}
    value = decode_go(raw)
    if value is None:
        # Go decodes `null` into a struct as "nothing set"
        return {}
    if not isinstance(value, dict):
        raise RequestJSONError(f"cannot unmarshal {type(value).__name__} into a request object")
    return value


def type_error(obj: dict[str, Any], key: str, value: Any, wanted: str) -> RequestJSONError:
    """Go's words for a field of the wrong type: `...into Go struct field <Type>.<path> of type <t>`."""
    where = f"Go struct field {obj.path}.{key}" if isinstance(obj, GoObject) else f"field {key}"
    return RequestJSONError(f"json: cannot unmarshal {_kind(value)} into {where} of type {wanted}")


def get_int(obj: dict[str, Any], key: str, default: int = 0, *, unsigned: bool = False) -> int:
    """An integer field; `null` or absence gives `default`, as Go leaves the zero value."""
    value = obj.get(key)
    if value is None:
        return default
    wanted = "uint64" if unsigned else "int64"
    if isinstance(value, bool) or not isinstance(value, int):
        raise type_error(obj, key, value, wanted)
    if unsigned and value < 0:
        where = f"Go struct field {obj.path}.{key}" if isinstance(obj, GoObject) else f"field {key}"
        raise RequestJSONError(f"json: cannot unmarshal number {value} into {where} of type uint64")
    return value


def get_bool(obj: dict[str, Any], key: str, default: bool = False) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise type_error(obj, key, value, "bool")
    return value


def get_str(obj: dict[str, Any], key: str, default: str = "") -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise type_error(obj, key, value, "string")
    return value


def get_str_list(obj: dict[str, Any], key: str) -> list[str]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise type_error(obj, key, value, "[]string")
    for item in value:
        if not isinstance(item, str):
            raise type_error(obj, key, item, "string")
    return list(value)


def get_object(obj: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise type_error(obj, key, value, "object")
    return nested_object(obj, key, value)


def get_str_map(obj: dict[str, Any], key: str) -> dict[str, str] | None:
    """A map of strings (metadata): any key is known."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise type_error(obj, key, value, "map[string]string")
    for item in value.values():
        if not isinstance(item, str):
            raise type_error(obj, key, item, "string")
    return dict(value)
