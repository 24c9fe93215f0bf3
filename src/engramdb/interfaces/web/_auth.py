"""Who may see which agent's dashboard: the REST API's API keys, also accepted the way a browser sends them.

``api_key_authorizer(keys)`` is an :data:`~engramdb.interfaces.web.app.Authorize` hook
with the policy of :mod:`engramdb.interfaces._access`: with keys in the store, a request
must carry one and sees its key's agent (an admin key: any agent); without keys, the
caller is trusted if the server allows it. A browser cannot add ``Authorization: Bearer``
to a link it follows, so the key is also taken from HTTP Basic authentication (any user
name, the key as password): a refused request answers 401 with
``WWW-Authenticate: Basic``, and the browser asks for it once and sends it on every page.
"""

from __future__ import annotations

import base64
import binascii
from typing import Final

try:
    from fastapi import Request
    from starlette.exceptions import HTTPException
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("the dashboard needs FastAPI: pip install 'engramdb[rest]'", name=exc.name) from exc

from engramdb import ApiKeys
from engramdb.errors import AccessDenied
from engramdb.interfaces._access import NotAuthenticated, authenticate, token_from_headers

from .app import Authorize

__all__ = ["REALM", "api_key_authorizer"]

REALM: Final = "engramdb dashboard"


def _basic_password(header: str | None) -> str | None:
    """The password of ``Authorization: Basic ...`` (the API key), else None."""
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic" or not encoded.strip():
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    _user, sep, password = decoded.partition(":")
    return (password.strip() or None) if sep else None


def api_key_authorizer(keys: ApiKeys, *, allow_unauthenticated: bool = True) -> Authorize:
    """The dashboard's access check by API key (see the module docstring)."""

    def authorize(request: Request, requested: str | None) -> str:
        headers = {k.lower(): v for k, v in request.headers.items()}
        token = token_from_headers(headers) or _basic_password(headers.get("authorization"))
        try:
            caller = authenticate(keys, token, allow_trusted=allow_unauthenticated)
            return caller.agent(requested)
        except NotAuthenticated as exc:
            raise HTTPException(401, str(exc), headers={"WWW-Authenticate": f'Basic realm="{REALM}"'}) from None
        except AccessDenied as exc:
            raise HTTPException(403, str(exc)) from None

    return authorize
