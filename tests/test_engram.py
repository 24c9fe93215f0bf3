"""The Engram facade end to end: a real SQLite store and the real embedding model."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from engramdb import ConfigError, Engram, NotFound, ValidationError
from engramdb import _validate as check
from engramdb.embeddings.base import Embedder
from engramdb.models import KINDS

FACTS = [
    ("decision", "Chose PostgreSQL over MongoDB for the billing service because we need transactions"),
    ("failure", "Deploy failed with 'connection refused' on port 5432; fixed by starting the database first"),
    ("knowledge", "The staging cluster runs in eu-west-1 and is rebuilt every Sunday night"),
    ("preference", "Alice prefers short answers with code examples"),
    ("success", "Retry with exponential backoff resolved the HTTP 429 rate limit errors from the payments API"),
    ("code_pattern", "def retry(fn, attempts=3): wrap calls that hit flaky network services"),
]


def seed(mem: Engram, agent: str = "alice") -> list:
    return mem.remember_many([{"content": c, "agent": agent, "kind": k, "tags": [k]} for k, c in FACTS])


def test_remember_returns_the_stored_memory(mem: Engram):
    m = mem.remember(
        "Use uv for Python installs",
        agent="alice",
        kind="preference",
        tags=["tools", "python"],
        metadata={"source": "chat", "n": 3},
        confidence=0.8,
    )
    assert m.agent == "alice"
    assert m.kind == "preference"
    assert m.tags == ("tools", "python")
    assert m.metadata == {"source": "chat", "n": 3}
    assert m.confidence == 0.8
    assert m.access_count == 0
    assert m.last_accessed is None
    assert m.success_rate is None
    assert m.visibility == "private"
    assert mem.get(m.id) == m


def test_search_finds_by_meaning_and_by_keyword(mem: Engram):
    seed(mem)
    # No word in common with the decision: only meaning can find it.
    by_meaning = mem.search("what storage engine was selected, and the reasoning", agent="alice", limit=3)
    assert by_meaning[0].memory.kind == "decision"
    by_keyword = mem.search("eu-west-1", agent="alice", limit=3)
    assert by_keyword[0].memory.kind == "knowledge"
    assert by_keyword[0].keyword_score is not None
    scores = [h.score for h in by_meaning]
    assert scores == sorted(scores, reverse=True)


def test_filters_are_hard(mem: Engram):
    seed(mem, "alice")
    seed(mem, "bob")
    hits = mem.search("database", agent="bob", limit=20)
    assert hits
    assert all(h.memory.agent == "bob" for h in hits)
    only_failures = mem.search("database", agent="alice", kind="failure", limit=20)
    assert [h.memory.kind for h in only_failures] == ["failure"]
    tagged = mem.search("anything at all", agent="alice", tags=["preference"], limit=20)
    assert [h.memory.kind for h in tagged] == ["preference"]
    assert mem.search("database", agent="carol") == []


def test_retrieval_counts_access(mem: Engram):
    seed(mem)
    hit = mem.search("rate limit errors", agent="alice", limit=1)[0]
    assert hit.memory.access_count == 1
    assert hit.memory.last_accessed is not None
    stored = mem.get(hit.memory.id)
    assert stored.access_count == 1
    assert stored.last_accessed == hit.memory.last_accessed
    mem.search("rate limit errors", agent="alice", limit=1)
    assert mem.get(hit.memory.id).access_count == 2


def test_update_keeps_history_and_reembeds(mem: Engram):
    m = mem.remember("The API token rotates monthly", agent="alice")
    updated = mem.update(m.id, content="Quarterly rotation of the cat photos album", tags=["photos"])
    assert updated.content.startswith("Quarterly")
    assert updated.tags == ("photos",)
    assert mem.search("cat pictures", agent="alice", limit=1)[0].memory.id == m.id
    hist = mem.history(m.id)
    assert [c.action for c in hist] == ["create", "update"]
    assert hist[1].before["content"] == "The API token rotates monthly"
    assert hist[1].after["content"].startswith("Quarterly")
    assert mem.update(m.id, tags=["photos"]) == mem.get(m.id)  # no-op change is not recorded
    assert len(mem.history(m.id)) == 2


def test_forget_removes_content_everywhere(mem: Engram, tmp_path: Path):
    secret = "Zebrafish-Quokka-Marmalade is the codename of the launch"
    m = mem.remember(secret, agent="alice")
    mem.update(m.id, content=secret + " (confirmed)")
    mem.forget(m.id)
    with pytest.raises(NotFound):
        mem.get(m.id)
    assert mem.search("Zebrafish Quokka Marmalade codename", agent="alice") == []
    hist = mem.history(m.id)
    assert hist[-1].action == "forget"
    assert all(c.before is None and c.after is None for c in hist)
    assert "Zebrafish" not in repr(hist)


def test_list_and_count(mem: Engram):
    seed(mem)
    listed = mem.list(agent="alice")
    assert len(listed) == len(FACTS) == mem.count(agent="alice")
    assert mem.count(agent="alice", kind="failure") == 1
    assert [m.kind for m in mem.list(agent="alice", kind="failure")] == ["failure"]
    assert len(mem.list(agent="alice", limit=2)) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "must not be empty"),
        ({"content": "   "}, "must not be empty"),
        ({"content": 42}, "content must be a string, not int"),
        ({"content": "x", "kind": "gossip"}, "unknown kind"),
        ({"content": "x", "tags": "not-a-list"}, "tags must be a list"),
        ({"content": "x", "metadata": {"k": object()}}, "JSON"),
        ({"content": "x", "metadata": ["a"]}, "metadata must be a JSON object"),
        ({"content": "x", "metadata": {"k": "v\x00"}}, "metadata contains a NUL"),
        ({"content": "x", "metadata": {"k": json.loads("[" * 40 + "]" * 40)}}, "nested too deeply"),
        ({"content": "x", "metadata": {"k": "x" * (check.MAX_METADATA_BYTES + 1)}}, "metadata is too large"),
        ({"content": "x", "agent": "b" * (check.MAX_NAME_CHARS + 1)}, "agent is too long"),
        ({"content": "x", "agent": "bob\nrm -rf"}, "agent contains a control character"),
        ({"content": "x", "agent": "*"}, "reserved"),
        ({"content": "x", "tags": [f"t{i}" for i in range(check.MAX_TAGS + 1)]}, "tags has too many entries"),
        ({"content": "x", "tags": ["x" * (check.MAX_NAME_CHARS + 1)]}, "tags entry is too long"),
        ({"content": "x", "tags": [" "]}, "tags entry must not be empty"),
        ({"content": "x" * (check.MAX_CONTENT_CHARS + 1)}, "content is too long"),
        ({"content": "x", "confidence": 1.5}, "confidence"),
        ({"content": "x", "agent": ""}, "agent"),
        ({"content": "x", "visibility": "secret"}, "visibility"),
    ],
)
def test_bad_input_is_rejected_and_changes_nothing(mem: Engram, kwargs: dict, message: str):
    content = kwargs.pop("content")
    with pytest.raises(ValidationError, match=message):
        mem.remember(content, **kwargs)
    assert mem.count() == 0
    assert mem.audit.log(action="create") == []


def test_one_bad_item_rejects_the_whole_batch(mem: Engram):
    with pytest.raises(ValidationError, match="item 1"):
        mem.remember_many([{"content": "good"}, {"content": "bad", "kind": "nope"}])
    assert mem.count() == 0


def test_unknown_ids_and_bad_updates(mem: Engram):
    with pytest.raises(NotFound):
        mem.get("does-not-exist")
    with pytest.raises(NotFound):
        mem.forget("does-not-exist")
    with pytest.raises(NotFound):
        mem.history("does-not-exist")
    m = mem.remember("x y z")
    with pytest.raises(ValidationError, match="cannot update"):
        mem.update(m.id, agent_name="bob")
    with pytest.raises(ValidationError, match="unknown kind"):
        mem.update(m.id, kind="nope")
    assert mem.get(m.id) == m


def test_every_kind_is_accepted(mem: Engram):
    for kind in sorted(KINDS):
        assert mem.remember(f"a {kind} memory", kind=kind).kind == kind


def test_reopen_after_close_finds_everything(tmp_path: Path, embedder: Embedder):
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        ids = [m.id for m in seed(mem)]
        mem.update(ids[0], confidence=0.9)
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        assert {m.id for m in mem.list(agent="alice")} == set(ids)
        assert mem.get(ids[0]).confidence == 0.9
        assert mem.search("rate limit", agent="alice", limit=1)[0].memory.kind == "success"
        assert [c.action for c in mem.history(ids[0])] == ["create", "update"]


def test_one_instance_is_safe_across_threads(mem: Engram):
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                mem.remember(f"thread {n} note {i}", agent=f"t{n}")
                mem.search(f"note {i}", agent=f"t{n}", limit=3)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(mem.count(agent=f"t{n}") == 10 for n in range(4))


def test_ephemeral_store(embedder: Embedder):
    with Engram(":memory:", embedder=embedder) as mem:
        m = mem.remember("ephemeral fact about zebras")
        assert mem.search("zebras")[0].memory.id == m.id


def test_default_location_comes_from_engram_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Embedder):
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "home"))
    with Engram(embedder=embedder) as mem:
        mem.remember("stored at home")
        assert Path(mem.location) == tmp_path / "home"
    assert (tmp_path / "home").is_dir()


class OtherModel:
    """Stands in for a different embedding model: deterministic hashed bag of words."""

    model_id = "test-hashed-bow-v1"
    dim = 64

    def embed(self, texts):
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, sum(map(ord, word)) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def test_opening_with_another_model_fails_clearly_or_reembeds(tmp_path: Path, embedder: Embedder):
    from engramdb import ModelMismatchError

    with Engram(tmp_path / "s", embedder=embedder) as mem:
        ids = [m.id for m in seed(mem)]
    with pytest.raises(ModelMismatchError, match="reembed"):
        Engram(tmp_path / "s", embedder=OtherModel())
    seen: list[tuple[int, int]] = []
    with Engram(
        tmp_path / "s", embedder=OtherModel(), on_model_mismatch="reembed", progress=lambda d, t: seen.append((d, t))
    ) as mem:
        assert seen
        assert seen[-1] == (len(ids), len(ids))
        assert mem.store.meta.get("model_id") == OtherModel.model_id
        assert mem.search("exponential backoff", agent="alice", limit=1)[0].memory.kind == "success"
    with Engram(tmp_path / "s", embedder=OtherModel()) as mem:  # now consistent: opens without fuss
        assert mem.count(agent="alice") == len(ids)


def test_every_write_and_its_audit_entry_commit_together(backend_mem: Engram):
    mem = backend_mem
    m = mem.remember("The release train leaves on Thursdays", agent="alice")
    mem.update(m.id, tags=["release"])
    mem.forget(m.id, agent="alice")
    actions = [e.action for e in reversed(mem.audit.log(memory_id=m.id))]
    assert actions == ["create", "update", "forget"]
    assert mem.audit.verify()


def test_a_failed_forget_writes_no_audit_entry(backend_mem: Engram, monkeypatch: pytest.MonkeyPatch):
    mem = backend_mem
    m = mem.remember("A memory that survives a failed forget", agent="alice")

    def broken(records):
        raise RuntimeError("audit trail unavailable")

    monkeypatch.setattr(mem.store.audit, "append", broken)
    with pytest.raises(RuntimeError):
        mem.forget(m.id)
    monkeypatch.undo()
    # The delete rolled back with its audit entry: the memory is still there, and the chain is whole.
    assert mem.get(m.id).content == m.content
    assert [e.action for e in mem.audit.log(memory_id=m.id) if e.action == "forget"] == []
    assert mem.audit.verify()


def test_facade_is_composed_of_services(mem: Engram):
    from engramdb.models import RedactionPolicy

    for area in ("learning", "failures", "episodes", "code", "sharing", "knowledge", "audit", "retention"):
        assert getattr(mem, area) is getattr(mem, area)
    assert isinstance(mem.redaction, RedactionPolicy)
    assert mem.redaction.secrets
    for old in ("record", "suggest", "share", "export_knowledge", "verify_audit", "cleanup", "redaction_policy"):
        assert not hasattr(mem, old)


def test_two_instances_tune_learning_independently(tmp_path: Path, embedder: Embedder):
    from dataclasses import replace

    from engramdb.learning.recommend import RecommendConfig

    tuned = RecommendConfig(similarity_floor=0.5)
    with (
        Engram(tmp_path / "a", embedder=embedder, recommend=tuned) as a,
        Engram(tmp_path / "b", embedder=embedder) as b,
    ):
        assert a.learning.recommend.similarity_floor == 0.5
        assert b.learning.recommend == RecommendConfig()
        b.learning.recommend = replace(b.learning.recommend, min_evidence=1.0)
        assert a.learning.recommend.min_evidence == tuned.min_evidence


# -- keyed memories (issue 8, item 5) -------------------------------------------------------------------------


def test_a_keyed_memory_is_superseded_by_its_new_value(mem: Engram):
    london = mem.remember("I live in London", agent="alice", kind="preference", key="home")
    mem.remember("The staging cluster runs in eu-west-1", agent="alice")
    berlin = mem.remember("I moved to Berlin", agent="alice", kind="preference", key="home")
    assert berlin.id == london.id
    assert berlin.content == "I moved to Berlin"
    assert berlin.metadata["key"] == "home"
    assert "key:home" in berlin.tags
    hits = mem.search("where does the user live", agent="alice")
    contents = [h.memory.content for h in hits]
    assert "I moved to Berlin" in contents
    assert "I live in London" not in contents
    assert mem.recall_key("home", agent="alice").content == "I moved to Berlin"
    history = mem.history(london.id)
    assert [c.action for c in history] == ["create", "supersede"]
    assert history[-1].before is not None
    assert history[-1].before["content"] == "I live in London"
    assert mem.count(agent="alice") == 2
    # Keys are per agent; another agent's key is not visible.
    with pytest.raises(NotFound):
        mem.recall_key("home", agent="bob")


def test_remember_many_items_carry_keys_and_later_ones_win(mem: Engram):
    out = mem.remember_many(
        [
            {"content": "Editor: vim", "agent": "alice", "key": "editor"},
            {"content": "Shell: zsh", "agent": "alice"},
            {"content": "Editor: helix", "agent": "alice", "key": "editor"},
        ]
    )
    assert out[0].id == out[2].id
    assert mem.recall_key("editor", agent="alice").content == "Editor: helix"
    assert mem.count(agent="alice") == 2
    # Updating a keyed memory's tags or metadata keeps it keyed.
    mem.update(out[0].id, tags=["tools"], metadata={"n": 1})
    kept = mem.recall_key("editor", agent="alice")
    assert kept.tags == ("tools", "key:editor")
    assert kept.metadata == {"n": 1, "key": "editor"}
    with pytest.raises(ValidationError):
        mem.remember("x", key="bad\nkey")


# -- bulk clear (issue 12) ------------------------------------------------------------------------------------


def test_clear_forgets_every_memory_of_an_agent_only_when_confirmed(mem: Engram):
    seed(mem, agent="alice")
    seed(mem, agent="bob")
    with pytest.raises(ValidationError, match="confirm='alice'"):
        mem.clear(agent="alice", confirm="yes")
    assert mem.count(agent="alice") == len(FACTS)
    assert mem.clear(agent="alice", confirm="alice") == len(FACTS)
    assert mem.count(agent="alice") == 0
    assert mem.count(agent="bob") == len(FACTS)
    forgets = mem.audit.log(agent="alice", action="forget", limit=100)
    assert len(forgets) == len(FACTS)
    assert all(e.detail["reason"] == "clear" for e in forgets)
    assert mem.audit.verify()


# -- settings the facade uses (issue 12) ----------------------------------------------------------------------


def test_the_agent_setting_is_the_default_agent(tmp_path: Path, embedder: Embedder):
    with Engram(tmp_path / "s", embedder=embedder, agent="carol") as mem:
        m = mem.remember("Carol's note about the deploy window")
        assert m.agent == "carol"
        assert mem.search("deploy window")[0].memory.id == m.id
        assert mem.count() == 1
        assert [x.id for x in mem.list()] == [m.id]
        assert mem.remember_many([{"content": "another note"}])[0].agent == "carol"
        assert mem.session().agent == "carol"


def test_embedder_strings_are_settings(tmp_path: Path):
    with pytest.raises(ConfigError, match="unknown embedder"):
        Engram(":memory:", embedder="nonsense:model")
    with pytest.raises(ConfigError, match="embedder must be"):
        Engram(":memory:", embedder=42)  # type: ignore[arg-type]
    with Engram(":memory:", embedder="openai:text-embedding-3-small") as mem:
        assert mem.settings.embedder == "openai:text-embedding-3-small"


def test_min_score_drops_unrelated_hits_found_by_meaning_alone(tmp_path: Path, embedder: Embedder):
    with Engram(tmp_path / "s", embedder=embedder, min_score=0.2) as mem:
        seed(mem)
        assert mem.search("recipe for banana bread with walnuts", agent="alice") == []
        hits = mem.search("how do I fix rate limit errors", agent="alice")
        assert hits[0].memory.kind == "success"
        assert all(h.keyword_score is not None or (h.vector_score or 0) >= 0.2 for h in hits)
        assert hits[0].memory.access_count == 1
