"""The dashboard's pages: a FastAPI router of server-rendered HTML over one :class:`~engramdb.Engram`.

Every page is per agent (``?agent=NAME``) and reads through the public API, so the
agent's scope (its own memories, those shared with it, public ones) and the read
audit apply exactly as for any other caller. Pages::

    /                 pick an agent
    /ui/memories      browse (newest first, paged) or search; filters kind, tag, from/to dates
    /ui/memory        one memory and its history
    /ui/learning      success rate over time per category, with the trend test's verdict
    /ui/failures      recurring failure patterns and the fixes that worked
    /ui/shares        what the agent shared, and what others shared with it
    /ui/audit         the audit trail's verification and the agent's latest entries

Query parameters are validated here (see :mod:`._params`): bad input is a 422 page
with a one-line message; an unknown memory a 404 page (the statuses of the REST API,
:mod:`engramdb.interfaces._status`); never a traceback. All text is
HTML-escaped by the templates (Jinja2 autoescaping); the pages have no JavaScript.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Final
from urllib.parse import urlencode

try:
    from fastapi import APIRouter, Depends, FastAPI, Query, Request
    from fastapi.responses import HTMLResponse
    from jinja2 import Environment, PackageLoader, StrictUndefined
    from starlette.exceptions import HTTPException
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the dashboard needs FastAPI, uvicorn and Jinja2: pip install 'engramdb[rest]'", name=exc.name
    ) from exc

from engramdb import toolkit
from engramdb import validate as check
from engramdb.errors import EngramError
from engramdb.interfaces._status import status_of
from engramdb.models import KINDS, CategoryTrend, Memory

from ._browse import browse
from ._charts import curve
from ._params import NAMES, Params

if TYPE_CHECKING:
    from engramdb import Engram

__all__ = ["Authorize", "create_dashboard", "dashboard_router"]

#: ``authorize(request, agent)`` runs before a page is read, with the agent the request names
#: (None: not named). It returns the agent the page is for, or raises ``HTTPException``
#: (401 or 403, with headers such as ``WWW-Authenticate``) to refuse. See :mod:`._auth`.
Authorize = Callable[[Request, "str | None"], str]

#: Entries shown on the audit page, and shares on the shares page, at most.
_AUDIT_ROWS: Final = 100
_SHARE_ROWS: Final = 500
#: Outcomes per point of a learning curve, on average at least.
_PER_POINT: Final = 4
#: Characters of content shown in a list (the memory's page shows all of it).
_SNIPPET: Final = 300

#: The agent of a request that names none (and has no key to name one).
DEFAULT_AGENT: Final = "default"

_log = logging.getLogger(__name__)


def _declared(
    *,
    agent: Annotated[str | None, Query(description=NAMES["agent"])] = None,
    q: Annotated[str | None, Query(description=NAMES["q"])] = None,
    kind: Annotated[str | None, Query(description=NAMES["kind"])] = None,
    tag: Annotated[str | None, Query(description=NAMES["tag"])] = None,
    from_: Annotated[str | None, Query(alias="from", description=NAMES["from"])] = None,
    to: Annotated[str | None, Query(description=NAMES["to"])] = None,
    limit: Annotated[str | None, Query(description=NAMES["limit"])] = None,
    offset: Annotated[str | None, Query(description=NAMES["offset"])] = None,
    id: Annotated[str | None, Query(description=NAMES["id"])] = None,  # noqa: A002 - the parameter's name
    all: Annotated[str | None, Query(description=NAMES["all"])] = None,  # noqa: A002 - the parameter's name
) -> None:
    """The dashboard's query parameters, all optional text: the pages check them (see :mod:`._params`)."""


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("engramdb.interfaces.web", "templates"),
        autoescape=True,  # every template, every value: memory content is untrusted text
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["pct"] = _pct
    env.filters["num"] = _num
    env.filters["snippet"] = _snippet
    env.filters["brief"] = _brief
    return env


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _num(n: float) -> str:
    return f"{n:,}" if isinstance(n, int) else f"{n:,.2f}".rstrip("0").rstrip(".")


def _snippet(text: str) -> str:
    return text if len(text) <= _SNIPPET else text[: _SNIPPET - 1] + "…"


def _brief(detail: Mapping[str, Any]) -> dict[str, Any]:
    """An audit entry's detail for a table: the ids a read returned are summed up (the memory column has one)."""
    out = {k: v for k, v in detail.items() if k != "ids"}
    ids = detail.get("ids")
    if isinstance(ids, list) and "count" not in out:
        out["count"] = len(ids)
    return out


def dashboard_router(
    get_mem: Callable[[], Engram], *, authorize: Authorize | None = None, prefix: str = ""
) -> APIRouter:
    """The dashboard's pages as a router: ``app.include_router(dashboard_router(lambda: mem))``.

    ``get_mem`` returns the store to read (called per request). ``authorize`` (see
    :data:`Authorize`) decides who may see which agent's pages; without it, anyone who
    can reach the server can, as with the REST API's ``agent`` parameter. ``prefix``
    mounts the pages under a path (links follow it).
    """
    env = _environment()
    # The parameters are read and checked by each page (so bad ones get the dashboard's 422 page); declaring
    # them here, unchecked, tells FastAPI (and an app that refuses undeclared parameters) that they exist.
    router = APIRouter(prefix=prefix, dependencies=[Depends(_declared)])
    base = prefix.rstrip("/")

    def url(page: str, params: Mapping[str, Any] | None = None) -> str:
        path = f"{base}/" if page == "" else f"{base}/ui/{page}"
        query = urlencode({k: v for k, v in (params or {}).items() if v is not None and v != ""})
        return f"{path}?{query}" if query else path

    def render(name: str, code: int = 200, headers: Mapping[str, str] | None = None, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(url=url, kinds=sorted(KINDS), **context)
        return HTMLResponse(html, status_code=code, headers=dict(headers) if headers else None)

    def page(request: Request, name: str, build: Callable[[Params, Engram, str], dict[str, Any]]) -> HTMLResponse:
        """Validate, authorize, read, render; every failure becomes an HTML page with one line."""
        agent: str | None = None
        try:
            params = Params({k: request.query_params.getlist(k) for k in request.query_params})
            params.reject_unknown()
            requested = params.requested_agent()
            if authorize is not None:
                agent = check.agent_name(authorize(request, requested))
            else:
                agent = requested if requested is not None else DEFAULT_AGENT
            context = build(params, get_mem(), agent)
            return render(name, agent=agent, current=name.removesuffix(".html"), **context)
        except HTTPException as exc:
            return _error(exc.status_code, str(exc.detail), agent, dict(exc.headers or {}))
        except EngramError as exc:
            return _error(status_of(exc), str(exc), agent)
        except Exception:  # noqa: BLE001 - a bug still gets a page, never a traceback
            # A bug: the traceback goes to the server's log, never to the browser.
            _log.exception("dashboard error on %s", request.url.path)
            return _error(500, "internal server error", agent)

    def _error(status: int, message: str, agent: str | None, headers: Mapping[str, str] | None = None) -> HTMLResponse:
        return render("error.html", status, headers, status=status, message=_one_line(message), agent=agent, current="")

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(request: Request) -> HTMLResponse:
        """Pick an agent."""
        return render("index.html", agent=None, current="")

    @router.get("/ui/memories", response_class=HTMLResponse, include_in_schema=False)
    def memories(request: Request) -> HTMLResponse:
        """Browse or search an agent's memories."""

        def build(params: Params, mem: Engram, agent: str) -> dict[str, Any]:
            q = params.browse(agent)
            result = browse(mem, q)
            form = q.form()
            prev_offset = max(0, q.offset - q.limit)
            return {
                "form": form,
                "result": result,
                "searching": q.query is not None,
                "prev_url": url("memories", {**form, "offset": prev_offset or None}) if q.offset > 0 else None,
                "next_url": url("memories", {**form, "offset": q.offset + q.limit}) if result.more else None,
            }

        return page(request, "memories.html", build)

    @router.get("/ui/memory", response_class=HTMLResponse, include_in_schema=False)
    def memory(request: Request) -> HTMLResponse:
        """One memory and its history."""

        def build(params: Params, mem: Engram, agent: str) -> dict[str, Any]:
            found: Memory = mem.get(params.memory_id(), agent=agent)
            # History is the owner's: a memory shared with this agent shows without it.
            changes = mem.history(found.id, agent=agent) if found.agent == agent else None
            return {"memory": found, "changes": changes}

        return page(request, "memory.html", build)

    @router.get("/ui/learning", response_class=HTMLResponse, include_in_schema=False)
    def learning(request: Request) -> HTMLResponse:
        """Learning curves per category, with each trend's verdict."""

        def build(params: Params, mem: Engram, agent: str) -> dict[str, Any]:
            trends: list[CategoryTrend] = mem.learning.trends(agent=agent)
            records = mem.learning.outcomes(agent=agent)
            # Finer buckets than the report's (4 outcomes a point on average, not 8): the chart
            # draws each point's confidence band, so a noisy point shows as one.
            curves = [
                {"trend": trend, "points": points, "bucket": bucket, "chart": curve(points, bucket=bucket)}
                for trend, bucket, points in toolkit.learning_curves(records, trends, min_per_point=_PER_POINT)
            ]
            return {"curves": curves, "outcomes": len(records)}

        return page(request, "learning.html", build)

    @router.get("/ui/failures", response_class=HTMLResponse, include_in_schema=False)
    def failures(request: Request) -> HTMLResponse:
        """Recurring failure patterns (``?all=1``: every pattern) and their fixes."""

        def build(params: Params, mem: Engram, agent: str) -> dict[str, Any]:
            show_all = params.flag("all", default=False)
            return {"patterns": mem.failures.patterns(agent=agent, recurring=not show_all), "show_all": show_all}

        return page(request, "failures.html", build)

    @router.get("/ui/shares", response_class=HTMLResponse, include_in_schema=False)
    def shares(request: Request) -> HTMLResponse:
        """Shares the agent made, and shares that reach it."""

        def build(params: Params, mem: Engram, agent: str) -> dict[str, Any]:
            made = mem.sharing.list(from_agent=agent)
            received = mem.sharing.list(to_agent=agent)
            return {
                "made": made[-_SHARE_ROWS:][::-1],
                "made_total": len(made),
                "received": received[-_SHARE_ROWS:][::-1],
                "received_total": len(received),
                "rows": _SHARE_ROWS,
            }

        return page(request, "shares.html", build)

    @router.get("/ui/audit", response_class=HTMLResponse, include_in_schema=False)
    def audit(request: Request) -> HTMLResponse:
        """Whether the audit trail is intact, and the agent's latest entries."""

        def build(params: Params, mem: Engram, agent: str) -> dict[str, Any]:
            limit = params.integer("limit", default=_AUDIT_ROWS, low=1, high=1000)
            return {"verification": mem.audit.verification(), "events": mem.audit.log(agent=agent, limit=limit)}

        return page(request, "audit.html", build)

    return router


def create_dashboard(mem: Engram, *, authorize: Authorize | None = None) -> FastAPI:
    """A standalone app serving only the dashboard of ``mem`` (``engram serve`` mounts the router instead)."""
    app = FastAPI(title="engramdb dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(dashboard_router(lambda: mem, authorize=authorize))
    return app


def _one_line(message: str) -> str:
    return " ".join(message.split()) or "failed"
