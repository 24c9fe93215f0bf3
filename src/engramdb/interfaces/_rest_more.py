"""Mounts the parity operations of :mod:`._ops_more` on the REST app, one route each (from their table).

A GET route reads its argument model from the query string, POST and DELETE from the JSON
body; unknown parameters or fields are refused as everywhere else in the API.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Body, FastAPI, Query
from pydantic import BaseModel

from engramdb.interfaces._ops_more import ROUTES, Route

if TYPE_CHECKING:
    from engramdb import Engram
    from engramdb.interfaces._access import Caller

__all__ = ["mount_more"]


def _endpoint(mem: Engram, route: Route, who: Any) -> Any:
    tool = route.tool

    def endpoint(who: Caller, args: Any) -> dict[str, Any]:
        return tool.call(mem, who, args)

    where = Query() if route.method == "GET" else Body()
    # FastAPI reads the parameters' types from the signature: the argument model is only known here.
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("who", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=who),
            inspect.Parameter("args", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Annotated[tool.args, where]),
        ],
        return_annotation=dict[str, Any],
    )
    endpoint.__name__ = tool.name
    endpoint.__doc__ = tool.description
    return endpoint


def mount_more(
    app: FastAPI | APIRouter, mem: Engram, who: Any, *, results: Mapping[str, type[BaseModel]] | None = None
) -> None:
    """Add every route of :data:`~engramdb.interfaces._ops_more.ROUTES` to ``app``; ``who`` is the caller dependency,
    ``results`` the response model of each operation (by its name)."""
    for route in ROUTES:
        area = route.path.strip("/").split("/")[0]
        app.add_api_route(
            route.path,
            _endpoint(mem, route, who),
            response_model=(results or {}).get(route.tool.name),
            methods=[route.method],
            status_code=route.status,
            tags=[area],
            name=route.tool.name,
            summary=route.tool.name.replace("_", " "),
            description=route.tool.description,
        )
