"""Seed 003: a swarm's memory: code patterns (extracted from source), solutions, error resolutions, a pre-seeded
knowledge base, and episodes of task executions."""

from __future__ import annotations

import textwrap

from engramdb import Engram
from engramdb.services.packs import seed_pack

AUTH_CODE = textwrap.dedent(
    '''
    import jwt


    def create_token(user_id: str, secret: str, minutes: int = 30) -> str:
        """Issue a signed JWT for REST API authentication."""
        now = datetime.now(timezone.utc)
        payload = {"sub": user_id, "iat": now, "exp": now + timedelta(minutes=minutes)}
        return jwt.encode(payload, secret, algorithm="HS256")


    def verify_token(token: str, secret: str) -> str | None:
        """Check a JWT and return its user id."""
        try:
            return jwt.decode(token, secret, algorithms=["HS256"])["sub"]
        except jwt.InvalidTokenError:
            return None
    '''
)

TS_AUTH = textwrap.dedent(
    """
    /** Express middleware that authenticates requests with a bearer JWT. */
    export function requireAuth(req: Request, res: Response, next: NextFunction): void {
      const header = req.headers.authorization ?? "";
      if (!header.startsWith("Bearer ")) {
        res.status(401).end();
        return;
      }
      try {
        req.user = verify(header.slice(7), SECRET);
        next();
      } catch (err) {
        res.status(401).end();
      }
    }
    """
)


def test_store_and_recall_code_patterns(mem: Engram) -> None:
    """``store_code_pattern(pattern_name="JWT Authentication", code=auth_code, language="python", ...)`` then
    ``recall_similar_patterns(description="implement user authentication", language="python")``."""
    stored = mem.code.remember(AUTH_CODE, agent="swarm", language="python", tags=["jwt-authentication"])
    assert {m.metadata["name"] for m in stored} >= {"create_token", "verify_token"}
    hits = mem.code.suggest("implement user authentication", agent="swarm", language="python", limit=3)
    assert hits[0].memory.metadata["name"] in {"create_token", "verify_token"}


def test_pattern_extraction_javascript_and_typescript(mem: Engram) -> None:
    """``Pattern Recognition``: "Function/method definitions, Class structures, Error handling patterns",
    "Estimates complexity (low/medium/high)", for the languages a swarm writes (Python, JavaScript, TypeScript)."""
    stored = mem.code.remember(TS_AUTH, agent="swarm", filename="auth.ts")
    by_type = {m.metadata["pattern_type"]: m for m in stored}
    assert by_type["function"].metadata["name"] == "requireAuth"
    assert by_type["function"].metadata["language"] == "typescript"
    assert by_type["function"].metadata["complexity_level"] == "low"
    assert by_type["error_handler"].metadata["handled"] == ["any"]
    hits = mem.code.suggest("authenticate requests with a JWT bearer token", agent="swarm", language="typescript")
    assert hits[0].memory.metadata["name"] == "requireAuth"


def test_store_error_resolution(mem: Engram) -> None:
    """``store_error_resolution(error_message="ModuleNotFoundError: No module named 'fastapi'", context="Starting
    FastAPI server", resolution="pip install fastapi uvicorn", success=True)``."""
    mem.failures.record(
        "ModuleNotFoundError: No module named 'fastapi'",
        agent="swarm",
        context="Starting FastAPI server",
        solution="pip install fastapi uvicorn",
    )
    solutions = mem.failures.solutions("ModuleNotFoundError: No module named 'fastapi'", agent="swarm")
    assert solutions[0].solution == "pip install fastapi uvicorn"


def test_recall_error_solutions_reworded(mem: Engram) -> None:
    """``recall_error_solutions(error_message="Cannot import fastapi", n_results=3)``."""
    mem.failures.record(
        "ModuleNotFoundError: No module named 'fastapi'",
        agent="swarm",
        context="Starting FastAPI server",
        solution="pip install fastapi uvicorn",
    )
    solutions = mem.failures.solutions("Cannot import fastapi", agent="swarm")
    assert solutions[0].solution == "pip install fastapi uvicorn"


def test_knowledge_base_seeding(mem: Engram) -> None:
    """``await knowledge_base.seed_initial_knowledge()`` returns counts; "Common Error Solutions: ModuleNotFoundError
    resolutions, TypeError: NoneType solutions, asyncio.TimeoutError handling, ConnectionRefusedError debugging"."""
    report = seed_pack(mem, "python", agent="swarm")
    assert report.added > 0
    for error, words in [
        ("TypeError: 'NoneType' object is not subscriptable", "returned None"),
        ("TimeoutError", "backoff"),
        ("ConnectionRefusedError: [Errno 111] Connection refused", "Nothing is listening"),
        ("ModuleNotFoundError: No module named 'requests'", "pip install"),
    ]:
        solutions = mem.failures.solutions(error, agent="swarm")
        assert any(words in s.solution for s in solutions), error
    practices = mem.search("error handling best practices", agent="swarm", kind="knowledge", limit=3)
    assert any(h.memory.metadata["pack_entry"] == "python/specific-exceptions" for h in practices)
    again = seed_pack(mem, "python", agent="swarm")
    assert not again.changed


def test_add_custom_knowledge(mem: Engram) -> None:
    """``add_custom_knowledge(title="OAuth2 Implementation Pattern", content=..., knowledge_type="pattern",
    metadata={"language": "python", "framework": "fastapi"})``."""
    mem.remember(
        "OAuth2 Implementation Pattern: use the authorization code flow with PKCE for public clients",
        agent="swarm",
        kind="knowledge",
        tags=["pattern"],
        metadata={"language": "python", "framework": "fastapi"},
    )
    hit = mem.search("how to implement OAuth2 login", agent="swarm", kind="knowledge")[0]
    assert hit.memory.metadata["framework"] == "fastapi"


def test_episode_lifecycle(mem: Engram) -> None:
    """``start_episode(task, context)`` / ``record_event(episode_id, event_type, agent_role, data)`` /
    ``end_episode(episode_id, success=True, metrics=...)`` (as one block)."""
    with mem.episodes.begin("implement REST API for orders", agent="swarm", metadata={"priority": "high"}) as e:
        e.event("code_generation", {"approach": "conservative", "lines": 45, "agent_role": "worker_backend"})
        e.event("verification", {"passed": True, "score": 0.9, "agent_role": "qa_sentinel"})
    (episode,) = mem.episodes.list("implement REST API", agent="swarm", outcome="success")
    assert [ev.kind for ev in episode.events] == ["code_generation", "verification"]
    assert episode.outcome == "success"


def test_episode_by_id_across_calls(mem: Engram) -> None:
    """``episode_id = start_episode(...)``; later ``record_event(episode_id, ..., agent_role=...)``;
    ``end_episode(episode_id, success=True, metrics=execution_metrics)``."""
    episode_id = mem.episodes.start("implement REST API", agent="swarm")
    (running,) = mem.episodes.list("implement REST API", agent="swarm")
    assert running.outcome == "running"
    mem.episodes.event(episode_id, "consensus", {"votes": 3}, role="consensus_judge", agent="swarm")
    mem.episodes.end(episode_id, True, metrics={"tokens": 1200}, agent="swarm")
    (episode,) = mem.episodes.list("implement REST API", agent="swarm")
    assert episode.outcome == "success"
    assert [(ev.kind, ev.role) for ev in episode.events] == [("consensus", "consensus_judge")]
    assert episode.metrics == {"tokens": 1200}


def test_recall_similar_episodes_and_analyze_failures(mem: Engram) -> None:
    """``recall_similar_episodes(task_description, n_results=3, success_only=True)`` and
    ``analyze_failures(limit=10)``: "patterns of what went wrong in past failures"."""
    for i in range(6):
        with mem.episodes.begin(f"implement REST endpoint {i}", agent="swarm") as e:
            e.event("code_generation", {"approach": "fast"})
            if i % 2:
                e.event("skip_tests")
                e.fail("verification failed: 3 tests red")
            else:
                e.event("verification", {"passed": True})
    similar = mem.episodes.list("implement a REST API endpoint", agent="swarm", outcome="success", limit=3)
    assert len(similar) == 3
    assert all(ep.outcome == "success" for ep in similar)
    analysis = mem.episodes.analyze(agent="swarm")
    assert analysis.failures == 3
    assert analysis.factors[0].kind == "skip_tests"
