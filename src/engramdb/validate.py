"""The library's input checks and limits, for code that takes outside input on its behalf.

The CLI, the REST and MCP servers, the dashboard and the framework integrations parse what users send
with these, so a bad value gets the same one-line :class:`~engramdb.errors.ValidationError`, and the
same limits hold, whichever way it came in. The checks live in one private home (``engramdb._validate``,
used by the library itself), and the parsers of a few arguments beside the rules they serve (a success-rate
filter, an audit action, a retention policy file); this module is their public surface, so an interface can
name a bad value before it opens a store. The names below are kept stable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engramdb._validate import (
    DEFAULT_TOKEN_BUDGET,
    MAX_LIMIT,
    MAX_OFFSET,
    MAX_TOKEN_BUDGET,
    MIN_TOKEN_BUDGET,
    agent_name,
    agent_or_default,
    content,
    flag,
    kind,
    metadata,
    moment,
    name,
    scope,
    shown,
    tags,
)

if TYPE_CHECKING:
    from pathlib import Path

    from engramdb.learning.analytics import RateFilter
    from engramdb.models import RetentionPolicy

__all__ = [
    "DEFAULT_TOKEN_BUDGET",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "MAX_TOKEN_BUDGET",
    "MIN_TOKEN_BUDGET",
    "agent_name",
    "agent_or_default",
    "check_action",
    "content",
    "flag",
    "kind",
    "load_policy",
    "metadata",
    "moment",
    "name",
    "parse_rate_filter",
    "scope",
    "shown",
    "tags",
]


# The parsers below import their rules when called: an interface that only checks a name stays light to import.
def parse_rate_filter(text: str) -> RateFilter:
    """``">80%"``, ``">=0.8"``, ``"<50%"``, ``"90%"`` (means ``>=``) as a success-rate filter; else ValidationError."""
    from engramdb.learning.analytics import parse_rate_filter as parse

    return parse(text)


def check_action(action: object) -> str:
    """``action`` if the audit trail can hold it; else ValidationError listing the actions."""
    from engramdb.services.audit import check_action as checked

    return checked(action)


def load_policy(path: Path) -> RetentionPolicy:
    """A retention policy read from a TOML file (a missing file is an empty policy); ConfigError if malformed."""
    from engramdb.privacy.retention import load_policy as load

    return load(path)
