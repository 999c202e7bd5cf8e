"""JSON bytes shaped like nats-server's (Go's encoding/json) output.

Clients compare nothing byte for byte, but the traces do, and people diff
them: Go escapes `<`, `>`, `&` and the two Unicode line separators inside
strings, and keeps struct field order, which a Python dict keeps too. Those
characters can only appear inside JSON strings, so replacing them after
encoding is safe.
"""

from __future__ import annotations

from typing import Any

import orjson

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


def loads_object(payload: bytes | bytearray | memoryview | str) -> dict[str, Any]:
    """Decode a request body that must be a JSON object (empty body: empty object)."""
    raw = bytes(payload) if not isinstance(payload, str) else payload.encode()
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RequestJSONError(str(exc)) from None
    if value is None:
        # Go decodes `null` into a struct as "nothing set"
        return {}
    if not isinstance(value, dict):
        raise RequestJSONError(f"cannot unmarshal {type(value).__name__} into a request object")
    return value


def _type_error(key: str, value: Any, wanted: str) -> RequestJSONError:
    kind = {bool: "bool", str: "string", int: "number", float: "number", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )
    return RequestJSONError(f"json: cannot unmarshal {kind} into field {key} of type {wanted}")


def get_int(obj: dict[str, Any], key: str, default: int = 0, *, unsigned: bool = False) -> int:
    """An integer field; `null` or absence gives `default`, as Go leaves the zero value."""
    value = obj.get(key)
    if value is None:
        return default
    wanted = "uint64" if unsigned else "int64"
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(key, value, wanted)
    if unsigned and value < 0:
        raise RequestJSONError(f"json: cannot unmarshal number {value} into field {key} of type uint64")
    return value


def get_bool(obj: dict[str, Any], key: str, default: bool = False) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _type_error(key, value, "bool")
    return value


def get_str(obj: dict[str, Any], key: str, default: str = "") -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _type_error(key, value, "string")
    return value


def get_str_list(obj: dict[str, Any], key: str) -> list[str]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _type_error(key, value, "[]string")
    for item in value:
        if not isinstance(item, str):
            raise _type_error(key, item, "string")
    return list(value)


def get_object(obj: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _type_error(key, value, "object")
    return value


def get_str_map(obj: dict[str, Any], key: str) -> dict[str, str] | None:
    value = get_object(obj, key)
    if value is None:
        return None
    for item in value.values():
        if not isinstance(item, str):
            raise _type_error(key, item, "string")
    return dict(value)
