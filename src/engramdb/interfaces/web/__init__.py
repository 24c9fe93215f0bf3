"""A web dashboard for engramdb: server-rendered pages per agent, mounted by ``engram serve`` at ``/``.

``dashboard_router(get_mem, authorize=...)`` is a FastAPI router to include in an app;
``create_dashboard(mem)`` a standalone app; ``api_key_authorizer(keys)`` limits each
request to its API key's agent (keys also accepted by HTTP Basic authentication, so a
browser can send one). Browse and search memories, a memory's
history, learning curves, recurring failures and their fixes, shares, and the audit
trail's verification. No JavaScript: HTML and inline SVG rendered on the server.

Requires the ``rest`` extra: ``pip install 'engramdb[rest]'``.
"""

from engramdb.interfaces.web._auth import api_key_authorizer
from engramdb.interfaces.web.app import Authorize, create_dashboard, dashboard_router

__all__ = ["Authorize", "api_key_authorizer", "create_dashboard", "dashboard_router"]
