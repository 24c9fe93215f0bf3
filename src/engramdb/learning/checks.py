"""Prevention checks: saved conditions to verify before a workflow stage (pure, except :func:`evaluate`).

A check is a described condition ("the npm cache is warm") attached to a workflow stage
("development", "ci", "deploy"...) and, optionally, to the failure pattern it prevents. It may
carry predicates that can be evaluated without a shell and without side effects:

* ``files``: paths that must exist (relative ones against the directory given to ``run_checks``);
* ``env``: environment variables that must be set to a non-empty value;
* ``commands``: programs that must be found on ``PATH`` (``shutil.which``; nothing is executed);
* ``modules``: Python modules that must be importable here (``importlib.util.find_spec``; nothing
  is imported beyond the parent packages ``find_spec`` needs).

*Running* a check evaluates its predicates, nothing more: a check without predicates is reported as
``manual`` (a reminder to verify by hand), never as passed or failed. A check is stored as a
``knowledge`` memory tagged ``check`` and ``stage:<stage>``; :func:`check_metadata` and
:func:`parse_check` are the only writer and reader of its metadata.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from engramdb._validate import shown
from engramdb.errors import ValidationError
from engramdb.learning.signatures import variable_parts
from engramdb.models import CheckResult, FailurePattern, Memory, PreventionCheck

__all__ = [
    "CHECK_KEY",
    "CHECK_TAG",
    "STAGE_TAG",
    "check_metadata",
    "evaluate",
    "parse_check",
    "predicates_for",
    "stage_name",
]

#: Tags of a check memory, and the metadata key that holds the check.
CHECK_TAG: Final = "check"
STAGE_TAG: Final = "stage:"
CHECK_KEY: Final = "prevention_check"
_MAX_ITEMS: Final = 50


def stage_name(value: object) -> str:
    """A workflow stage name: non-empty, at most 100 characters, lower-cased, no spaces."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"stage must be a non-empty string, not {shown(value)}")
    stage = "-".join(value.strip().lower().split())
    if len(stage) > 100:
        raise ValidationError("stage is too long (at most 100 characters)")
    return stage


def _items(values: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        values = [values]
    out: dict[str, None] = {}
    for v in values:
        if not isinstance(v, str) or not v.strip() or "\x00" in v or len(v) > 1000:
            raise ValidationError(f"each of {what} must be a non-empty string, not {v!r}")
        out[v.strip()] = None
    if len(out) > _MAX_ITEMS:
        raise ValidationError(f"at most {_MAX_ITEMS} {what} per check")
    return tuple(out)


def check_metadata(
    *,
    stage: str,
    pattern: FailurePattern | None,
    files: Iterable[str] = (),
    env: Iterable[str] = (),
    commands: Iterable[str] = (),
    modules: Iterable[str] = (),
) -> dict[str, Any]:
    """The metadata a check memory is stored with (validated)."""
    return {
        CHECK_KEY: {
            "stage": stage_name(stage),
            "pattern_id": pattern.id if pattern is not None else None,
            "pattern_name": pattern.name if pattern is not None else None,
            "files": list(_items(files, "files")),
            "env": list(_items(env, "env")),
            "commands": list(_items(commands, "commands")),
            "modules": list(_items(modules, "modules")),
        }
    }


def _strs(raw: object) -> tuple[str, ...]:
    return tuple(x for x in raw if isinstance(x, str)) if isinstance(raw, list) else ()


def parse_check(memory: Memory) -> PreventionCheck | None:
    """The check a memory holds, or None if it is not a check memory."""
    raw = memory.metadata.get(CHECK_KEY)
    if not isinstance(raw, Mapping) or not isinstance(raw.get("stage"), str):
        return None
    pid, pname = raw.get("pattern_id"), raw.get("pattern_name")
    return PreventionCheck(
        id=memory.id,
        agent=memory.agent,
        description=memory.content,
        stage=str(raw["stage"]),
        pattern_id=pid if isinstance(pid, str) else None,
        pattern_name=pname if isinstance(pname, str) else None,
        files=_strs(raw.get("files")),
        env=_strs(raw.get("env")),
        commands=_strs(raw.get("commands")),
        modules=_strs(raw.get("modules")),
        created_at=memory.created_at,
    )


def predicates_for(pattern: FailurePattern) -> dict[str, list[str]]:
    """Predicates a pattern's own example suggests: the module it missed, the command, the file.

    Only values the failure names outright: a module of ``No module named 'yaml'``, a command of
    ``yarn: command not found``, the environment variable of ``environment variable X``, the file of
    ``No such file or directory: '/etc/app.toml'``.
    """
    out: dict[str, list[str]] = {"files": [], "env": [], "commands": [], "modules": []}
    text = pattern.example
    low = text.lower()
    kept = variable_parts(text).get("kept", [])
    for value in kept:
        if "module" in low or "import" in low:
            out["modules"].append(value)
        elif "not found" in low or "not recognized" in low:
            out["commands"].append(value)
        elif "environment variable" in low:
            out["env"].append(value)
    if "no such file" in low or "filenotfound" in low:
        out["files"] += [p.strip("'\"`") for p in variable_parts(text).get("path", [])[:1]]
        out["files"] += [p.strip("'\"`") for p in variable_parts(text).get("str", [])[:1] if "/" in p]
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def evaluate(
    check: PreventionCheck, *, cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> CheckResult:
    """Evaluate a check's predicates here and now (see the module docstring); nothing is executed."""
    if not check.automatic:
        return CheckResult(check=check, status="manual")
    environ = os.environ if env is None else env
    base = Path(cwd) if cwd is not None else Path.cwd()
    problems: list[str] = []
    for f in check.files:
        path = Path(f).expanduser()
        if not (path if path.is_absolute() else base / path).exists():
            problems.append(f"missing file: {f}")
    for name in check.env:
        if not environ.get(name):
            problems.append(f"environment variable not set: {name}")
    search_path = environ.get("PATH", os.defpath)
    for cmd in check.commands:
        if shutil.which(cmd, path=search_path) is None:
            problems.append(f"command not on PATH: {cmd}")
    for mod in check.modules:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            problems.append(f"Python module not importable: {mod}")
    return CheckResult(check=check, status="failed" if problems else "passed", problems=tuple(problems))
