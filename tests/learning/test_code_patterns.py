"""Code patterns: extraction with ast (pure) and storage/suggestion through the facade."""

from __future__ import annotations

import ast
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram, ValidationError
from engramdb.learning.code_patterns import complexity, complexity_level, detect_language, extract


@pytest.fixture
def mem(backend_mem: Engram) -> Engram:
    """The facade-level tests run on every backend (SQLite and PostgreSQL)."""
    return backend_mem


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


def test_remember_and_suggest_code(mem: Engram) -> None:
    stored = mem.code.remember(SOURCE, agent="dev", filename="net.py", tags=["net"])
    names = sorted(m.metadata["name"] for m in stored)
    # One-line methods are below min_lines and skipped.
    assert "Cache.get" not in names
    assert "fetch_with_retry" in names
    fetch = next(m for m in stored if m.metadata["name"] == "fetch_with_retry")
    assert fetch.kind == "code_pattern"
    assert set(fetch.tags) == {"net", "python", "function"}
    assert fetch.metadata["complexity"] == 3
    assert fetch.metadata["complexity_level"] == "low"
    hits = mem.code.suggest("retry an HTTP request with exponential backoff", agent="dev")
    assert hits[0].memory.metadata["name"] == "fetch_with_retry"
    handlers = mem.code.suggest("handle a missing optional import", agent="dev", pattern_type="error_handler")
    assert handlers
    assert all(h.memory.metadata["pattern_type"] == "error_handler" for h in handlers)
    assert handlers[0].memory.metadata["handled"] == ["ImportError"]
    assert mem.code.suggest("retry", agent="someone-else") == []
    with pytest.raises(ValidationError):
        mem.code.suggest("x", agent="dev", pattern_type="module")
    with pytest.raises(ValidationError):
        mem.code.remember("def (", agent="dev")


def test_plan_from_a_code_pattern(mem: Engram) -> None:
    (fetch,) = [m for m in mem.code.remember(SOURCE, agent="dev") if m.metadata["name"] == "fetch_with_retry"]
    plan = mem.failures.plan(fetch.id, "download the exchange rates with retries", agent="dev")
    assert plan.kind == "code_pattern"
    assert plan.code is not None
    assert plan.code.startswith("def fetch_with_retry(")
    assert plan.steps[0].startswith("Reuse fetch_with_retry (def fetch_with_retry(")
    assert plan.relevance > 0.3


# -- JavaScript and TypeScript (tree-sitter) ---------------------------------------------------------------

JS_SOURCE = textwrap.dedent(
    r"""
    const fs = require("fs");

    /**
     * Fetch JSON with retries and exponential backoff.
     *
     * Retries network errors only.
     * @param {string} url
     */
    async function fetchJson(url, retries = 3) {
      for (let attempt = 0; attempt < retries; attempt++) {
        try {
          const res = await fetch(url);
          if (!res.ok && res.status !== 404) throw new Error(`HTTP ${res.status}`);
          return await res.json();
        } catch (err) {
          if (err instanceof TypeError || attempt === retries - 1) throw err;
          await new Promise((r) => setTimeout(r, 2 ** attempt * 100));
        }
      }
    }

    class LruCache extends Map {
      constructor(limit) {
        super();
        this.limit = limit;
      }

      get(key) {
        return this.has(key) ? super.get(key) : undefined;
      }

      set(key, value) {
        if (this.size >= this.limit) {
          this.delete(this.keys().next().value);
        }
        return super.set(key, value);
      }
    }

    const debounce = (fn, wait = 100) => {
      let timer;
      return (...args) => {
        clearTimeout(timer);
        timer = setTimeout(() => fn(...args), wait ?? 0);
      };
    };

    module.exports = { fetchJson, LruCache, debounce };
    """
)

TS_SOURCE = textwrap.dedent(
    r"""
    import { Injectable } from "@angular/core";

    export interface User { id: number; name: string }

    /** Loads users from the API, with a cache. */
    @Injectable({ providedIn: "root" })
    export class UserService {
      private cache = new Map<number, User>();

      constructor(private readonly http: HttpClient) {}

      async getUser(id: number): Promise<User | undefined> {
        const hit = this.cache.get(id);
        if (hit) return hit;
        try {
          const user = await this.http.get<User>(`/users/${id}`);
          this.cache.set(id, user);
          return user;
        } catch (e: unknown) {
          if (e instanceof HttpError && e.status === 404) return undefined;
          throw e;
        }
      }

      handleClick = (event: MouseEvent): void => {
        switch (event.button) {
          case 0: this.select(); break;
          case 2: this.menu(); break;
          default: break;
        }
      };
    }

    export function clamp<T extends number>(value: T, min: T, max: T): number {
      return value < min ? min : value > max ? max : value;
    }
    """
)


def test_extracts_javascript() -> None:
    found = extract(JS_SOURCE, filename="net.js")
    assert [(p.pattern_type, p.name) for p in found] == [
        ("function", "fetchJson"),
        ("error_handler", "fetchJson: try/catch TypeError"),
        ("class", "LruCache"),
        ("function", "LruCache.constructor"),
        ("function", "LruCache.get"),
        ("function", "LruCache.set"),
        ("function", "debounce"),
    ]
    fetch, handler, cache, ctor, get, set_, debounce = found
    assert {p.language for p in found} == {"javascript"}
    assert fetch.signature == "async function fetchJson(url, retries = 3)"
    assert fetch.docstring == "Fetch JSON with retries and exponential backoff."
    assert fetch.is_async
    assert fetch.code.startswith("async function fetchJson(")
    assert fetch.code.endswith("}")
    assert (fetch.lineno, fetch.end_lineno) == (10, 21)
    # 1 + for + if + && + catch + if + || (the anonymous arrow callback adds nothing)
    assert fetch.complexity == 7
    assert handler.handled == ("TypeError",)
    assert handler.code.startswith("try {")
    assert handler.complexity == 6  # the try statement alone: if, &&, catch, if, ||
    assert cache.signature == "class LruCache extends Map"
    assert cache.methods == ("constructor", "get", "set")
    assert (ctor.complexity, get.complexity, set_.complexity) == (1, 2, 2)
    assert cache.complexity == ctor.complexity + get.complexity + set_.complexity
    assert get.signature == "get(key)"
    # A function held by a const is named after it; the inner anonymous arrows count in place (??).
    assert debounce.signature == "const debounce = (fn, wait = 100) =>"
    assert debounce.code.startswith("const debounce = ")
    assert debounce.complexity == 2


def test_extracts_typescript() -> None:
    found = extract(TS_SOURCE, filename="user.service.ts")
    assert [(p.pattern_type, p.name) for p in found] == [
        ("class", "UserService"),
        ("function", "UserService.constructor"),
        ("function", "UserService.getUser"),
        ("error_handler", "UserService.getUser: try/catch HttpError"),
        ("function", "UserService.handleClick"),
        ("function", "clamp"),
    ]
    service, ctor, get_user, handler, click, clamp = found
    assert {p.language for p in found} == {"typescript"}
    assert service.decorators == ('Injectable({ providedIn: "root" })',)
    assert service.docstring == "Loads users from the API, with a cache."
    assert service.code.startswith("@Injectable(")  # the code includes its decorators
    assert service.methods == ("constructor", "getUser", "handleClick")
    assert get_user.signature == "async getUser(id: number): Promise<User | undefined>"
    assert get_user.is_async
    assert get_user.complexity == 5  # 1 + if + catch + if + &&
    assert handler.handled == ("HttpError",)
    assert click.signature == "handleClick = (event: MouseEvent): void =>"
    assert click.complexity == 3  # two cases with a test; default does not count
    assert clamp.signature == "function clamp<T extends number>(value: T, min: T, max: T): number"
    assert clamp.complexity == 3  # two conditional expressions
    assert service.complexity == ctor.complexity + get_user.complexity + click.complexity


def test_language_from_file_name_or_argument() -> None:
    tsx = "export const Button = ({ label }: { label: string }) => {\n  return <button>{label ?? 'ok'}</button>;\n};\n"
    (button,) = extract(tsx, filename="Button.tsx")
    assert (button.name, button.language, button.complexity) == ("Button", "typescript", 2)
    jsx = "function App() {\n  return <div className='app'>{ok && <p>hi</p>}</div>;\n}\n"
    assert extract(jsx, filename="App.jsx")[0].complexity == 2
    assert extract(jsx, language="js")[0].language == "javascript"
    assert extract("function f(): number { return 1 }", language="TypeScript")[0].language == "typescript"
    assert detect_language("lib/util.mjs") == "javascript"
    assert detect_language("x.py") == "python"
    assert detect_language(None) == "python"
    assert detect_language("x.js", "python") == "python"  # an explicit language wins
    with pytest.raises(ValidationError, match="unsupported language"):
        extract("x", language="cobol")
    with pytest.raises(ValidationError, match=r"as JavaScript: line 2"):
        extract("function ok() {}\nfunction broken( {\n", filename="bad.js")
    with pytest.raises(ValidationError, match="TypeScript"):
        extract("let x: = ;", language="ts")
    assert extract("", language="javascript") == []


def test_generators_exports_and_class_expressions() -> None:
    source = textwrap.dedent(
        """
        export default function () {
          return 1;
        }
        function* ids() {
          let i = 0;
          while (true) yield i++;
        }
        const Point = class {
          norm() { return Math.hypot(this.x, this.y); }
        };
        async function load() {
          try {
            return await get();
          } finally {
            done();
          }
        }
        """
    )
    found = {p.name: p for p in extract(source, language="javascript")}
    assert set(found) == {"default", "ids", "Point", "Point.norm", "load"}  # try/finally has no handler
    assert found["ids"].complexity == 2
    assert found["Point"].pattern_type == "class"
    assert found["Point"].methods == ("norm",)


def test_remember_javascript_and_typescript(mem: Engram) -> None:
    stored = mem.code.remember(JS_SOURCE, agent="dev", filename="net.js")
    by_name = {m.metadata["name"]: m for m in stored}
    assert "fetchJson" in by_name
    assert "LruCache.get" in by_name  # 3 lines: kept
    fetch = by_name["fetchJson"]
    assert set(fetch.tags) == {"javascript", "function"}
    assert fetch.metadata["language"] == "javascript"
    assert fetch.metadata["complexity"] == 7
    assert fetch.metadata["complexity_level"] == "medium"
    ts = mem.code.remember(TS_SOURCE, agent="dev", language="typescript", tags=["angular"])
    assert {"typescript", "angular"} <= set(ts[0].tags)
    hits = mem.code.suggest("retry fetching JSON with exponential backoff", agent="dev")
    assert hits[0].memory.metadata["name"] == "fetchJson"
    only_ts = mem.code.suggest("load a user and cache it", agent="dev", language="ts")
    assert only_ts
    assert all(h.memory.metadata["language"] == "typescript" for h in only_ts)
    assert only_ts[0].memory.metadata["name"] in {"UserService.getUser", "UserService"}
    with pytest.raises(ValidationError):
        mem.code.remember("function (", agent="dev", language="javascript")
