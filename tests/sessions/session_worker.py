"""Another process using one agent's shared session window (run by the tests with ``sys.executable``).

``session_worker.py URL AGENT add LABEL N BUDGET``: add N messages ``LABEL i`` (one word each counts as a token);
``session_worker.py URL AGENT set NAME JSON``: set a variable;
``session_worker.py URL AGENT dump``: print the window as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import NoReturn

from engramdb.sessions_redis import RedisSessions


def _words(text: str) -> int:
    return len(text.split())


def _refuse(content: str, **kwargs: object) -> NoReturn:
    raise AssertionError("the worker never promotes")


def main(argv: list[str]) -> None:
    url, agent, action, *rest = argv
    with RedisSessions(url, ttl=60) as sessions:
        budget = int(rest[2]) if action == "add" else 10_000
        ctx = sessions.context(agent, promoter=_refuse, token_budget=budget, count_tokens=_words)
        if action == "add":
            label, n = rest[0], int(rest[1])
            for i in range(n):
                ctx.add(f"{label} {i}", role=label)
        elif action == "set":
            ctx.set(rest[0], json.loads(rest[1]))
        elif action == "dump":
            out = {
                "messages": [[m.role, m.content] for m in ctx.messages],
                "variables": ctx.variables,
                "tokens": ctx.tokens,
            }
            print(json.dumps(out))
        else:
            raise SystemExit(f"unknown action {action!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
