"""The Toxiproxy HTTP API on aiohttp: the routes, status codes and JSON of the real server (api.go).

Successful answers are compact JSON; errors are `{"error": ..., "status": ...}`
with the error's status, sent as text/plain the way Go's `http.Error` does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import structlog
from aiohttp import web

from chaos.toxiproxy.collection import ProxyCollection, ProxySpec, ToxicSpec
from chaos.toxiproxy.errors import BAD_REQUEST_BODY, INVALID_TOXIC_TYPE, MISSING_FIELD, ApiError
from chaos.toxiproxy.proxy import Proxy
from chaos.toxiproxy.toxics import TOXIC_TYPES, Direction, parse_toxicity

VERSION = "2.12.0-jetraft"
DEFAULT_LISTEN = "127.0.0.1:0"

log = structlog.get_logger("toxiproxy")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_COLLECTION = web.AppKey("collection", ProxyCollection)


def create_app(collection: ProxyCollection) -> web.Application:
    app = web.Application(middlewares=[_refuse_browsers, _answer_errors])
    app[_COLLECTION] = collection
    routes = [
        web.post("/reset", _reset),
        web.get("/proxies", _proxy_index, allow_head=False),
        web.post("/proxies", _proxy_create),
        web.post("/populate", _populate),
        web.get("/proxies/{proxy:[^/]+}", _proxy_show, allow_head=False),
        web.post("/proxies/{proxy:[^/]+}", _proxy_update),
        web.patch("/proxies/{proxy:[^/]+}", _proxy_update),
        web.delete("/proxies/{proxy:[^/]+}", _proxy_delete),
        web.get("/proxies/{proxy:[^/]+}/toxics", _toxic_index, allow_head=False),
        web.post("/proxies/{proxy:[^/]+}/toxics", _toxic_create),
        web.get("/proxies/{proxy:[^/]+}/toxics/{toxic:[^/]+}", _toxic_show, allow_head=False),
        web.post("/proxies/{proxy:[^/]+}/toxics/{toxic:[^/]+}", _toxic_update),
        web.patch("/proxies/{proxy:[^/]+}/toxics/{toxic:[^/]+}", _toxic_update),
        web.delete("/proxies/{proxy:[^/]+}/toxics/{toxic:[^/]+}", _toxic_delete),
        web.get("/version", _version, allow_head=False),
    ]
    app.router.add_routes(routes)
    return app


# --- middlewares ---------------------------------------------------------------


@web.middleware
async def _refuse_browsers(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Toxiproxy's guard against a web page driving the API from a browser
    if request.headers.get("User-Agent", "").startswith("Mozilla/"):
        return web.Response(status=403, text="User agent not allowed\n")
    return await handler(request)


@web.middleware
async def _answer_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as error:
        return _error_response(error)
    except web.HTTPNotFound:
        return web.Response(status=404, text="404 page not found\n")
    except web.HTTPMethodNotAllowed:
        return web.Response(status=405)
    except web.HTTPException:
        raise
    except Exception as exc:
        log.exception("api handler failed", method=request.method, path=request.path)
        return _error_response(ApiError(str(exc) or type(exc).__name__, 500))


def _error_response(error: ApiError) -> web.Response:
    body = orjson.dumps(error.to_json()) + b"\n"
    return web.Response(
        status=error.status,
        body=body,
        headers={"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"},
    )


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(data), content_type="application/json")


# --- request bodies ----------------------------------------------------------------


async def _read_json(request: web.Request) -> object:
    body = await request.read()
    if not body.strip():
        raise BAD_REQUEST_BODY.wrapping("EOF")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BAD_REQUEST_BODY.wrapping(str(exc)) from None


def _object(value: object, what: str) -> dict[str, Any]:
    """A JSON object, as Go decodes into a struct: `null` is an empty one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BAD_REQUEST_BODY.wrapping(f"{what} must be a JSON object")
    return value


def _field(body: dict[str, Any], key: str, kind: type[str] | type[bool], what: str) -> Any:
    """`body[key]` if present and not null, checked to be of `kind`; None when absent."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, kind):
        raise BAD_REQUEST_BODY.wrapping(f"{what} field {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _check_addressable(name: str, what: str) -> None:
    # Toxiproxy takes such a name, and then no URL can reach that proxy or toxic again (not even to
    # delete it): refused here, the one place this server is stricter than the real one.
    if "/" in name:
        raise BAD_REQUEST_BODY.wrapping(f"{what} name {name!r} can not contain '/'")


def _proxy_spec(body: dict[str, Any], position: str = "") -> ProxySpec:
    # every field's type is checked before any is found missing, as decoding comes first in Toxiproxy
    name = _field(body, "name", str, "proxy") or ""
    upstream = _field(body, "upstream", str, "proxy") or ""
    listen = _field(body, "listen", str, "proxy") or DEFAULT_LISTEN
    enabled = _field(body, "enabled", bool, "proxy")
    if not name:
        raise MISSING_FIELD.wrapping(f"name{position}")
    _check_addressable(name, "proxy")
    if not upstream:
        raise MISSING_FIELD.wrapping(f"upstream{position}")
    return ProxySpec(name, listen, upstream, True if enabled is None else enabled)


def _toxic_spec(body: dict[str, Any]) -> ToxicSpec:
    # the order of checks, and the defaults, are Toxiproxy's
    stream = Direction.parse(_field(body, "stream", str, "toxic") or "downstream")
    type_name = _field(body, "type", str, "toxic") or ""
    name = _field(body, "name", str, "toxic") or f"{type_name}_{stream.value}"
    toxicity = parse_toxicity(body["toxicity"]) if body.get("toxicity") is not None else 1.0
    if type_name not in TOXIC_TYPES:
        raise INVALID_TOXIC_TYPE
    _check_addressable(name, "toxic")
    return ToxicSpec(name, type_name, stream, toxicity, body.get("attributes"))


# --- handlers ------------------------------------------------------------------------


def _collection(request: web.Request) -> ProxyCollection:
    return request.app[_COLLECTION]


def _proxy(request: web.Request) -> Proxy:
    return _collection(request).get(request.match_info["proxy"])


async def _version(_request: web.Request) -> web.Response:
    return web.Response(
        body=f'{{"version": "{VERSION}"}}\n'.encode(),
        headers={"Content-Type": "application/json;charset=utf-8"},
    )


async def _reset(request: web.Request) -> web.Response:
    await _collection(request).reset()
    return web.Response(status=204)


async def _proxy_index(request: web.Request) -> web.Response:
    # Go marshals a map with its keys sorted
    proxies = sorted(_collection(request).proxies(), key=lambda proxy: proxy.name)
    return _json({proxy.name: proxy.to_json() for proxy in proxies})


async def _proxy_create(request: web.Request) -> web.Response:
    spec = _proxy_spec(_object(await _read_json(request), "proxy"))
    proxy = await _collection(request).create(spec)
    return _json(proxy.to_json(), status=201)


async def _populate(request: web.Request) -> web.Response:
    try:
        body = await _read_json(request)
    except ApiError as error:
        return _json({**error.to_json(), "proxies": None}, status=error.status)
    status, answer = await populate(_collection(request), body)
    return _json(answer, status=status)


async def populate(collection: ProxyCollection, body: object) -> tuple[int, dict[str, Any]]:
    """Create or replace the proxies listed in `body` (a JSON array); the status and answer of /populate.

    Every entry is checked before any proxy is created. The answer lists the
    proxies populated, with the error if one stopped the run.
    """
    try:
        if not isinstance(body, list):
            raise BAD_REQUEST_BODY.wrapping("expected a JSON array of proxies")
        specs = [
            _proxy_spec(_object(item, "proxy"), f" at proxy {index}")
            for index, item in enumerate(body, start=1)
        ]
    except ApiError as error:
        return error.status, {**error.to_json(), "proxies": None}
    proxies, error = await collection.populate(specs)
    # Go marshals an empty list of proxies as null
    listed = [proxy.to_json() for proxy in proxies] or None
    if error is not None:
        return error.status, {**error.to_json(), "proxies": listed}
    return 201, {"proxies": listed}


async def _proxy_show(request: web.Request) -> web.Response:
    return _json(_proxy(request).to_json())


async def _proxy_update(request: web.Request) -> web.Response:
    name = request.match_info["proxy"]
    _collection(request).get(name)  # 404 before the body is looked at, as Toxiproxy does
    body = _object(await _read_json(request), "proxy")
    proxy = await _collection(request).update(
        name,
        listen=_field(body, "listen", str, "proxy"),
        upstream=_field(body, "upstream", str, "proxy"),
        enabled=_field(body, "enabled", bool, "proxy"),
    )
    return _json(proxy.to_json())


async def _proxy_delete(request: web.Request) -> web.Response:
    await _collection(request).remove(request.match_info["proxy"])
    return web.Response(status=204)


async def _toxic_index(request: web.Request) -> web.Response:
    return _json([entry.to_json() for entry in _proxy(request).toxics()])


async def _toxic_create(request: web.Request) -> web.Response:
    proxy = _proxy(request)
    spec = _toxic_spec(_object(await _read_json(request), "toxic"))
    entry = await _collection(request).add_toxic(proxy.name, spec)
    return _json(entry.to_json())


async def _toxic_show(request: web.Request) -> web.Response:
    return _json(_proxy(request).get_toxic(request.match_info["toxic"]).to_json())


async def _toxic_update(request: web.Request) -> web.Response:
    proxy = _proxy(request)
    proxy.get_toxic(request.match_info["toxic"])
    body = _object(await _read_json(request), "toxic")
    toxicity = parse_toxicity(body["toxicity"]) if body.get("toxicity") is not None else None
    entry = await _collection(request).update_toxic(
        proxy.name, request.match_info["toxic"], body.get("attributes"), toxicity
    )
    return _json(entry.to_json())


async def _toxic_delete(request: web.Request) -> web.Response:
    await _collection(request).remove_toxic(request.match_info["proxy"], request.match_info["toxic"])
    return web.Response(status=204)
