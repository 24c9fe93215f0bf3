"""How the REST API reads a request and answers an error: strict JSON, known query parameters, one-line errors.

A body is strict JSON (UTF-8, no key twice in one object, no NaN, Infinity or out-of-range numbers) and a query
names only the endpoint's parameters, else a 422 saying what and where. The library's errors, a malformed request
and a crash become ``{"error": "<one line>"}`` with the status :mod:`._status` gives it, never a traceback.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from engramdb.errors import EngramError, ValidationError
from engramdb.interfaces._status import status_of

__all__ = ["StrictJSONRoute", "add_error_handlers", "no_unknown_query"]

# The REST server's own logger: its storage warnings and crash reports keep the name they always had.
_log = logging.getLogger("engramdb.interfaces.rest")


def add_error_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` as one line of JSON with its status."""
    app.add_exception_handler(EngramError, on_engram_error)
    app.add_exception_handler(RequestValidationError, on_bad_request)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(Exception, on_crash)


# -- errors --------------------------------------------------------------------------------------------


def _one_line(message: str) -> str:
    return " ".join(message.split()) or "failed"


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": _one_line(message)}, status_code=status, headers=headers)


async def on_engram_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EngramError)
    status = status_of(exc)
    if status == 503:  # the details (paths, SQL) go to the log, not to the client
        _log.warning("storage error on %s %s: %s", request.method, request.url.path, exc)
    # The class name lets a client raise the same error (the remote Engram): the status alone is coarser.
    headers = {"X-Engram-Error": type(exc).__name__} | ({"WWW-Authenticate": "Bearer"} if status == 401 else {})
    return _error(status, str(exc), headers)


async def on_bad_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return _error(422, _validation_message(exc.errors()))


async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, str(exc.detail), dict(exc.headers) if exc.headers else None)


async def on_crash(request: Request, exc: Exception) -> JSONResponse:
    # A bug: the traceback goes to the server's log, never to the client (it may show data or paths).
    _log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return _error(500, "internal server error")


def _validation_message(errors: Sequence[Any]) -> str:
    """Pydantic's errors as one line: ``body.content: Field required; query.limit: ...`` (no input values)."""
    whole_body = [err for err in errors if tuple(err.get("loc", ())) == ("body",)]
    if whole_body:  # "body: Field required" says nothing to someone who sent no body or a list
        if whole_body[0].get("type") == "missing":
            return "the request body is empty: send a JSON object"
        return "the request body must be a JSON object"
    parts = []
    for err in errors[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "invalid"))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "invalid request: " + "; ".join(parts)


def _query_names(dependant: Dependant) -> set[str]:
    names = set()
    for p in dependant.query_params:
        model = p.field_info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):  # a query model: its fields are the parameters
            names |= {f.alias or n for n, f in model.model_fields.items()}
            continue
        names.add(p.alias)
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def no_unknown_query(request: Request) -> None:
    """Reject query parameters the endpoint does not take (a typo would silently change nothing).

    Only on the API's routes (also their unversioned aliases, outside the schema), not on the
    dashboard's pages: they check their own parameters and answer a bad one with their own HTML 422 page.
    """
    route = request.scope.get("route")
    if not isinstance(route, StrictJSONRoute) or not request.query_params:
        return
    known = _query_names(route.dependant)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        raise ValidationError(f"unknown query parameter {', '.join(repr(u) for u in unknown[:5])}")


# -- request bodies ------------------------------------------------------------------------------------


class _BadJSON(Exception):
    """A body that is not strict JSON; raised inside the decoder's hooks, turned into a 422 by ``_parse_body``."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # {"content": "a", "content": "b"} would otherwise keep "b" silently: which one did the client mean?
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _BadJSON(f"the key {key[:100]!r} appears twice in one object")
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise _BadJSON(f"{name} is not a JSON value")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):  # 1e400 would become inf, which JSON cannot carry back
        raise _BadJSON(f"the number {literal[:40]} is out of range")
    return value


def _parse_body(body: bytes) -> Any:
    """The request body as strict JSON (UTF-8, no duplicate keys, no NaN/Infinity), or a 422 saying why not."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(422, f"the request body is not valid UTF-8 (byte {exc.start})") from exc
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise HTTPException(
            422, f"the request body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from exc
    except _BadJSON as exc:
        raise HTTPException(422, f"the request body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise HTTPException(422, "the request body is not valid JSON: nested too deeply") from exc


class _StrictJSONRequest(Request):
    """A request whose ``json()`` is :func:`_parse_body`: FastAPI's own would answer a bad body with a vague
    ``body.1: JSON decode error`` or a 400 ``There was an error parsing the body``."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = _parse_body(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """Every API route reads its body through :class:`_StrictJSONRequest` (FastAPI's custom request class recipe),
    and answers with only the fields its result has (its response model's optional fields are left out when the
    library's ``to_dict()`` has no such key, not sent as null)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        kwargs["response_model_exclude_unset"] = True
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJSONRequest(request.scope, request.receive))

        return strict
