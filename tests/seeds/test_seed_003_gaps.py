"""Seed 003 examples issue 25 found missing: the knowledge base's design patterns, ``store_code_pattern`` with a
name, context and success metrics, metadata on code patterns and filtering by it, episodes by id alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from seed_cli import Cli

from engramdb import Engram
from engramdb.errors import ValidationError

AUTH_CODE = '''
import jwt

def issue_token(user_id: str, secret: str) -> str:
    """Issue a signed JWT for REST API authentication."""
    return jwt.encode({"sub": user_id}, secret, algorithm="HS256")

def verify_token(token: str, secret: str) -> str:
    """Check a JWT and return its user id."""
    return jwt.decode(token, secret, algorithms=["HS256"])["sub"]
'''


def test_knowledge_base_seeds_the_design_patterns(mem: Engram) -> None:
    """``seed_initial_knowledge()``: "Design Patterns Seeded: Singleton Pattern, Factory Pattern, Async Context
    Manager, Repository Pattern"; "Best Practices Seeded: Error Handling, Async/Await Patterns, Type Hints Usage"."""
    report = mem.knowledge.seed("patterns", agent="swarm")
    assert report.added >= 10
    titles = {m.content.split(":")[0] for m in mem.list(agent="swarm", kind="knowledge", limit=100)}
    for title in ("Singleton Pattern", "Factory Pattern", "Async Context Manager", "Repository Pattern",
                  "Observer Pattern", "Strategy Pattern", "Error Handling Best Practices", "Async/Await Patterns",
                  "Type Hints Usage"):  # fmt: skip
        assert any(t.startswith(title) for t in titles), title
    hit = mem.search("ensure only one instance of the connection pool exists", agent="swarm", kind="knowledge")[0]
    assert "Singleton" in hit.memory.content
    hit = mem.search("let subscribers get notified when state changes", agent="swarm", kind="knowledge")[0]
    assert "Observer" in hit.memory.content


def test_the_seed_command_help_names_every_shipped_pack(cli: Cli) -> None:
    """A new user finds the design-pattern pack from ``engram knowledge seed --help`` (it listed six of seven)."""
    from engramdb.toolkit import available_packs

    shown = " ".join(cli.ok("knowledge", "seed", "--help").split())
    for name in available_packs():
        assert name in shown, name


def test_store_code_pattern_with_name_context_and_success_metrics(mem: Engram) -> None:
    """``store_code_pattern(pattern_name="JWT Authentication", code=auth_code, language="python",
    context="REST API authentication", success_metrics={"success_rate": 1.0})`` then
    ``recall_similar_patterns(description="implement user authentication", language="python", n_results=3)``."""
    (stored,) = mem.code.remember(
        AUTH_CODE,
        name="JWT Authentication",
        language="python",
        context="REST API authentication",
        success_metrics={"success_rate": 1.0},
        agent="swarm",
    )
    assert stored.metadata["name"] == "JWT Authentication"
    assert stored.metadata["context"] == "REST API authentication"
    assert stored.metadata["success_metrics"] == {"success_rate": 1.0}
    hits = mem.code.suggest("implement user authentication", agent="swarm", language="python", limit=3)
    assert hits[0].memory.id == stored.id
    assert mem.code.suggest("implement user authentication", agent="swarm", pattern_type="named")[0].memory.id == (
        stored.id
    )
    with pytest.raises(ValidationError, match="give its name too"):
        mem.code.remember(AUTH_CODE, context="REST API authentication", agent="swarm")


def test_code_remember_takes_metadata_and_suggest_filters_on_it(mem: Engram) -> None:
    """``add_custom_knowledge(..., metadata={"language": "python", "framework": "fastapi"})`` and "Metadata
    filtering for precise retrieval"."""
    fastapi = mem.code.remember(AUTH_CODE, metadata={"framework": "fastapi"}, agent="swarm")
    assert fastapi
    assert all(m.metadata["framework"] == "fastapi" for m in fastapi)
    assert all(m.metadata["pattern_type"] == "function" for m in fastapi)
    flask = "def login_required(view):\n    def wrapped(*a, **k):\n        return view(*a, **k)\n    return wrapped\n"
    mem.code.remember(flask, metadata={"framework": "flask"}, agent="swarm")
    found = mem.code.suggest("check a token", agent="swarm", metadata={"framework": "fastapi"})
    assert found
    assert {h.memory.metadata["framework"] for h in found} == {"fastapi"}
    assert mem.code.suggest("check a token", agent="swarm", metadata={"framework": "django"}) == []


def test_episode_event_and_end_by_id_alone(mem: Engram) -> None:
    """``episode_id = start_episode(task=current_task, context={"user": "...", "priority": "high"})``, then
    ``record_event(episode_id=episode_id, event_type=..., agent_role=..., data=...)`` and ``end_episode(episode_id,
    success=True, metrics=...)``: the id names the episode; no agent again."""
    episode_id = mem.episodes.start("implement REST API", agent="swarm", context={"user": "u1", "priority": "high"})
    mem.episodes.event(episode_id, "code_generation", {"approach": "conservative", "lines": 45}, role="worker_backend")
    mem.episodes.event(episode_id, "verification", {"passed": True, "score": 0.9}, role="qa_sentinel")
    record = mem.episodes.end(episode_id, True, metrics={"tokens": 1200})
    assert record.outcome == "success"
    stored = mem.get(episode_id, agent="swarm")
    assert stored.metadata["context"] == {"user": "u1", "priority": "high"}
    assert [e["kind"] for e in stored.metadata["events"]] == ["code_generation", "verification"]
    # Naming another agent still checks ownership.
    other = mem.episodes.start("another task", agent="swarm")
    with pytest.raises(KeyError):
        mem.episodes.event(other, "x", agent="mallory")


RETRY = '''
import asyncio
import functools

def retry(times: int = 3):
    """Retry an async function on connection errors."""
    def decorator(func):
        @functools.wraps(func)
        async def wrapper(*args, **kwargs):
            for attempt in range(times):
                try:
                    return await func(*args, **kwargs)
                except ConnectionError:
                    await asyncio.sleep(2 ** attempt)
            raise RuntimeError("gave up")
        return wrapper
    return decorator
'''


def test_a_nested_async_wrapper_is_its_own_pattern(mem: Engram) -> None:
    """Pattern extractor: "Function/method definitions ... Extracts async patterns": the decorator's ``async def
    wrapper`` is stored as ``retry.decorator.wrapper`` (async), not merged into ``retry.decorator``; remembering the
    file again adds nothing."""
    stored = mem.code.remember(RETRY, agent="swarm")
    names = [m.metadata["name"] for m in stored]
    assert names[:3] == ["retry", "retry.decorator", "retry.decorator.wrapper"]
    assert len({m.id for m in stored}) == len(stored)
    wrapper = stored[2]
    assert wrapper.metadata["is_async"] is True
    assert "wrapper" in wrapper.content.splitlines()[0]
    again = mem.code.remember(RETRY, agent="swarm")
    assert [m.id for m in again] == [m.id for m in stored]
    assert mem.count(agent="swarm", kind="code_pattern") == len(stored)


def test_typescript_class_methods_are_extracted(mem: Engram) -> None:
    """ "Counts methods in classes": a TypeScript service's methods (async, static, arrow fields) are patterns."""
    ts = (
        "export class AuthService implements IAuth {\n"
        "  public async login(email: string, password: string): Promise<Token> {\n"
        "    const user = await this.users.find(email);\n"
        "    return this.sign(user);\n"
        "  }\n"
        "  protected sign = (user: User): Token => {\n"
        "    const token = jwt.sign({ sub: user.id }, SECRET);\n"
        "    return token;\n"
        "  };\n"
        "}\n"
    )
    names = {m.metadata["name"] for m in mem.code.remember(ts, language="typescript", agent="swarm", min_lines=1)}
    assert {"AuthService", "AuthService.login", "AuthService.sign"} <= names


def test_code_patterns_and_episodes_on_the_command_line(tmp_path: Path, cli: Cli) -> None:
    """``store_code_pattern`` / ``recall_similar_patterns`` as ``engram code remember|suggest``, and an episode's
    ``record_event(episode_id, ...)`` / ``end_episode(episode_id, ...)`` by id alone."""
    auth = tmp_path / "auth.py"
    auth.write_text(AUTH_CODE)
    stored = cli.json(
        "code", "remember", str(auth), "--name", "JWT Authentication", "--context", "REST API authentication",
        "--success-rate", "1.0", "--meta", "framework=fastapi", "--agent", "swarm",
    )  # fmt: skip
    assert stored[0]["metadata"]["success_metrics"] == {"success_rate": 1.0}
    cli.ok("code", "remember", str(auth), "--agent", "swarm")
    hits = cli.json(
        "code", "suggest", "--task", "implement user authentication", "--meta", "framework=fastapi",
        "--agent", "swarm",
    )  # fmt: skip
    assert [h["memory"]["metadata"]["name"] for h in hits] == ["JWT Authentication"]
    assert "JWT Authentication" in cli.ok("code", "suggest", "--task", "user authentication", "--agent", "swarm")
    episode = cli.ok("episodes", "start", "implement REST API", "--agent", "swarm").strip()
    cli.ok("episodes", "event", episode, "code_generation", "--data", '{"lines": 45}', "--role", "worker_backend")
    assert "ended: success" in cli.ok("episodes", "end", episode, "--outcome", "success")
