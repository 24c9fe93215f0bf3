"""Stepping through versioned schema migrations, the same way for both backends (each supplies its
steps, its lock and how a step is applied)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

from engramdb.errors import SchemaVersionError

__all__ = ["check_not_newer", "run_steps"]


class _Step(Protocol):
    @property
    def version(self) -> int: ...


_S = TypeVar("_S", bound=_Step)


def check_not_newer(version: int, latest: int, location: str) -> None:
    """SchemaVersionError if the store's schema ``version`` is newer than the ``latest`` this code knows."""
    if version > latest:
        raise SchemaVersionError(
            f"{location}: store schema version {version} is newer than this engramdb understands "
            f"({latest}); upgrade engramdb"
        )


def run_steps(
    steps: Sequence[_S],
    *,
    version: int,
    location: str,
    step_transaction: Callable[[], AbstractContextManager[int]],
    apply: Callable[[_S, int], None],
) -> int:
    """Apply every step newer than ``version``, each in its own transaction; return the version reached.

    ``step_transaction()`` opens a transaction holding the store's migration lock and yields the
    version read inside it: another process may have migrated while this one waited for the lock,
    so a step is applied (``apply(step, version_before)``) only if the store still lacks it.
    """
    latest = steps[-1].version
    for step in steps:
        if step.version <= version:
            continue
        with step_transaction() as current:
            check_not_newer(current, latest, location)
            version = current
            if step.version > version:
                apply(step, version)
                version = step.version
    return version
