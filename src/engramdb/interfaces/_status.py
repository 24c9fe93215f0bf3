"""The HTTP status of each library error: one map for every HTTP face of engramdb (REST API and dashboard).

A ValidationError is 422 everywhere: the request was well formed and understood, but the library refused its
values (RFC 9110, 15.5.21), which is what the REST API and both clients have always said. 400 stays for requests
that cannot be read at all (framing, a bad ``Content-Length``: :mod:`._http`)::

    ValidationError -> 422      NotAuthenticated -> 401      AccessDenied -> 403      NotFound -> 404
    StorageError    -> 503      LLMNotConfigured -> 501      LLMError     -> 502      anything else -> 500
"""

from __future__ import annotations

from typing import Final

from engramdb.errors import (
    AccessDenied,
    EngramError,
    LLMError,
    LLMNotConfigured,
    NotAuthenticated,
    NotFound,
    StorageError,
    ValidationError,
)

__all__ = ["STATUSES", "status_of"]

#: Most specific first: LLMNotConfigured is an LLMError, and the first class that matches decides.
STATUSES: Final[tuple[tuple[type[EngramError], int], ...]] = (
    (NotAuthenticated, 401),
    (AccessDenied, 403),
    (ValidationError, 422),
    (NotFound, 404),
    (StorageError, 503),
    (LLMNotConfigured, 501),  # this server cannot do it (no LLM configured): not a crash
    (LLMError, 502),  # the LLM it calls failed, timed out or answered unusably
)


def status_of(exc: EngramError) -> int:
    """The HTTP status answering ``exc`` (500 for an error with no status of its own)."""
    return next((status for cls, status in STATUSES if isinstance(exc, cls)), 500)
