"""Code patterns: extraction with ast (pure) and storage/suggestion through the facade."""

from __future__ import annotations

import ast
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram, ValidationError
from engramdb.learning.code_patterns import complexity, complexity_level, extract

SOURCE = textwrap.dedent(
    '''
    import time

    import requests


    def fetch_with_retry(url: str, retries: int = 3) -> bytes:
        """Fetch a URL, retrying with exponential backoff on timeouts.

        More details here.
        """
        for attempt in range(retries):
            try:
                return requests.get(url, timeout=5).content
            except (requests.Timeout, requests.ConnectionError):
                time.sleep(2**attempt)
        raise RuntimeError("gave up")


    class Cache:
        """A tiny in-memory cache."""

        def get(self, key):
            return self.data.get(key) if key else None

        @staticmethod
        async def warm(keys):
            return [k for k in keys if k]


    try:
        import orjson as json
    except ImportError:
        import json
    '''
)


def test_extracts_functions_classes_and_error_handlers() -> None:
    found = extract(SOURCE, filename="net.py")
    assert [(p.pattern_type, p.name) for p in found] == [
        ("function", "fetch_with_retry"),
        ("error_handler", "fetch_with_retry: try/except requests.Timeout, requests.ConnectionError"),
        ("class", "Cache"),
        ("function", "Cache.get"),
        ("function", "Cache.warm"),
        ("error_handler", "<module>: try/except ImportError"),
    ]
    fetch, handler, cache, get, warm, module_try = found
    assert fetch.signature == "def fetch_with_retry(url: str, retries: int=3) -> bytes"
    assert fetch.docstring == "Fetch a URL, retrying with exponential backoff on timeouts."
    assert fetch.code.startswith("def fetch_with_retry(")
    assert fetch.filename == "net.py"
    assert fetch.complexity == 3  # 1 + for + except
    assert handler.handled == ("requests.Timeout", "requests.ConnectionError")
    assert handler.code.startswith("try:")
    assert cache.methods == ("get", "warm")
    assert cache.signature == "class Cache"
    assert cache.complexity == get.complexity + warm.complexity
    assert get.complexity == 2  # conditional expression
    assert warm.is_async
    assert warm.decorators == ("staticmethod",)
    assert warm.code.startswith("@staticmethod")
    assert warm.complexity == 3  # comprehension for + if
    assert module_try.handled == ("ImportError",)


def _function(body: str) -> ast.FunctionDef:
    node = ast.parse(f"def f(x, y):\n{textwrap.indent(textwrap.dedent(body), '    ')}").body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("return x", 1),
        ("if x:\n    return 1\nelif y:\n    return 2\nelse:\n    return 3", 3),
        ("while x:\n    x -= 1\nelse:\n    pass", 3),
        ("return x and y or not x", 3),
        ("try:\n    pass\nexcept A:\n    pass\nexcept B:\n    pass\nfinally:\n    pass", 3),
        ("match x:\n    case 1:\n        pass\n    case _:\n        pass", 3),
        ("def inner():\n    if x:\n        pass\nreturn inner", 1),  # nested functions count for themselves
        ("return [a for a in x if a if y for b in y]", 5),
        ("return lambda: 1 if x else 2", 2),
    ],
)
def test_complexity_counts_decision_points(body: str, expected: int) -> None:
    assert complexity(_function(body)) == expected


@given(st.integers(0, 30))
def test_each_if_adds_one(n: int) -> None:
    body = "\n".join(f"if x > {i}:\n    y += 1" for i in range(n)) or "pass"
    assert complexity(_function(body)) == n + 1


def test_levels() -> None:
    assert [complexity_level(n) for n in (1, 5, 6, 10, 11)] == ["low", "low", "medium", "medium", "high"]


def test_bad_source_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="line 1"):
        extract("def broken(:\n", filename="x.py")
    with pytest.raises(ValidationError):
        extract(b"x = 1")  # type: ignore[arg-type]
    assert extract("") == []


def test_remember_code_and_suggest_patterns(mem: Engram) -> None:
    stored = mem.remember_code(SOURCE, agent="dev", filename="net.py", tags=["net"])
    names = sorted(m.metadata["name"] for m in stored)
    # One-line methods are below min_lines and skipped.
    assert "Cache.get" not in names
    assert "fetch_with_retry" in names
    fetch = next(m for m in stored if m.metadata["name"] == "fetch_with_retry")
    assert fetch.kind == "code_pattern"
    assert set(fetch.tags) == {"net", "python", "function"}
    assert fetch.metadata["complexity"] == 3
    assert fetch.metadata["complexity_level"] == "low"
    hits = mem.suggest_patterns("retry an HTTP request with exponential backoff", agent="dev")
    assert hits[0].memory.metadata["name"] == "fetch_with_retry"
    handlers = mem.suggest_patterns("handle a missing optional import", agent="dev", pattern_type="error_handler")
    assert handlers
    assert all(h.memory.metadata["pattern_type"] == "error_handler" for h in handlers)
    assert handlers[0].memory.metadata["handled"] == ["ImportError"]
    assert mem.suggest_patterns("retry", agent="someone-else") == []
    with pytest.raises(ValidationError):
        mem.suggest_patterns("x", agent="dev", pattern_type="module")
    with pytest.raises(ValidationError):
        mem.remember_code("def (", agent="dev")


def test_apply_pattern_to_a_code_pattern(mem: Engram) -> None:
    (fetch,) = [m for m in mem.remember_code(SOURCE, agent="dev") if m.metadata["name"] == "fetch_with_retry"]
    plan = mem.apply_pattern(fetch.id, "download the exchange rates with retries", agent="dev")
    assert plan.kind == "code_pattern"
    assert plan.code is not None
    assert plan.code.startswith("def fetch_with_retry(")
    assert plan.steps[0].startswith("Reuse fetch_with_retry (def fetch_with_retry(")
    assert plan.relevance > 0.3
