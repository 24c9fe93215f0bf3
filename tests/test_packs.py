"""Knowledge packs: shipped, valid, loaded through the public write path, idempotent, versioned, with provenance."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from engramdb import Engram, ValidationError
from engramdb.embeddings.base import Embedder
from engramdb.interfaces.cli import packs as packs_cli
from engramdb.models.packs import Pack, PackError, PackPractice
from engramdb.services.packs import available_packs, load_pack, parse_pack, seed_pack

PACKS = ("ci", "docker", "git", "http", "patterns", "python", "sql")
runner = CliRunner()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Engram]:
    """One store with every pack seeded for agent ``kb`` (seeding embeds ~100 texts: done once)."""
    with Engram(tmp_path_factory.mktemp("packs") / "store", embedder=embedder) as mem:
        for name in PACKS:
            seed_pack(mem, name, agent="kb")
        yield mem


def test_every_pack_is_shipped_and_valid() -> None:
    assert tuple(available_packs()) == PACKS
    for name in PACKS:
        pack = load_pack(name)
        assert pack.name == name
        assert pack.version >= 1
        assert len(pack.practices) >= 5
        assert len(pack.errors) >= 7
        assert pack.source == f"engramdb-pack:{name}@{pack.version}"
        for entry in pack.errors:
            assert entry.fix
            assert entry.error
    with pytest.raises(ValidationError, match="unknown pack 'cobol'"):
        load_pack("cobol")


def test_pack_files_are_validated() -> None:
    good = 'name = "x"\nversion = 1\ntitle = "X"\ndescription = "d"\n'
    assert parse_pack(good).name == "x"
    bad = {
        "version": 'name = "x"\nversion = 0\ntitle = "X"\ndescription = "d"\n',
        "id": good + '[[practice]]\nid = "A B"\ntitle = "t"\ntext = "t"\n',
        "twice": good
        + '[[practice]]\nid = "a"\ntitle = "t"\ntext = "t"\n[[error]]\nid = "a"\nerror = "e"\nfix = "f"\n',
        "fix": good + '[[error]]\nid = "a"\nerror = "e"\n',
        "generic": good + '[[error]]\nid = "a"\nerror = "e"\nfix = "f"\ngeneric = "yes"\n',
        "unknown": good + "extra = 1\n",
        "TOML": "name = ",
    }
    for match, text in bad.items():
        with pytest.raises(ValidationError, match=match):
            parse_pack(text)


def test_packs_are_written_with_provenance(seeded: Engram) -> None:
    """Best practices are knowledge memories, common errors failure memories; all tagged and attributed."""
    for name in PACKS:
        pack = load_pack(name)
        memories = seeded.list(agent="kb", tags=[f"pack:{name}"], limit=500)
        assert len(memories) == len(pack.practices) + len(pack.errors)
        kinds = {m.metadata["pack_entry"]: m.kind for m in memories}
        for practice in pack.practices:
            assert kinds[f"{name}/{practice.id}"] == "knowledge"
        for error in pack.errors:
            assert kinds[f"{name}/{error.id}"] == "failure"
        for m in memories:
            assert m.metadata["source"] == f"engramdb-pack:{name}@{pack.version}"
            assert m.metadata["pack_version"] == pack.version
            assert {f"pack:{name}", name} <= set(m.tags)


def test_pack_text_is_stored_as_written(seeded: Engram) -> None:
    """No pack sentence trips the secret redactor (a placeholder would corrupt the advice)."""
    for m in seeded.list(agent="kb", limit=500):
        assert "[REDACTED" not in m.content, m.content
        assert not m.metadata.get("redacted"), m.content


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("! [rejected] main -> main (non-fast-forward)", "git pull --rebase"),
        ("HTTPError: 429 Client Error: Too Many Requests", "Retry-After"),
        ("deadlock detected", "Retry the whole transaction"),
        ("no space left on device", "docker system prune"),
        ("sqlite3.OperationalError: database is locked", "busy timeout"),
        ("HTTPError: 503 Server Error: Service Unavailable", "backoff"),
        ("AssertionError: test fails intermittently in CI but passes locally (flaky test)", "deterministic"),
    ],
)
def test_common_errors_have_their_fix(seeded: Engram, error: str, expected: str) -> None:
    """``mem.failures.solutions`` finds the pack's fix for the error it documents, first."""
    solutions = seeded.failures.solutions(error, agent="kb")
    assert solutions, error
    assert expected in solutions[0].solution
    assert solutions[0].successes >= 1


def test_fixes_that_fail_rank_below_the_fix(seeded: Engram) -> None:
    solutions = seeded.failures.solutions("! [rejected] main -> main (non-fast-forward)", agent="kb")
    assert "git push --force" in solutions[-1].solution
    assert solutions[-1].successes == 0


@pytest.mark.parametrize(
    ("module", "expected"), [("requests", "python -m pip install requests"), ("yaml", "PyYAML"), ("PIL", "Pillow")]
)
def test_module_specific_fix_comes_first(seeded: Engram, module: str, expected: str) -> None:
    """The module name decides the fix: each module's own fix comes first (yaml -> PyYAML, PIL -> Pillow)."""
    solutions = seeded.failures.solutions(f"ModuleNotFoundError: No module named '{module}'", agent="kb")
    assert expected in solutions[0].solution


def test_best_practices_are_found_by_search(seeded: Engram) -> None:
    hits = seeded.search("how should I retry requests to a rate limited API", agent="kb", kind="knowledge", limit=3)
    assert any(h.memory.metadata["pack_entry"] in {"http/honor-retry-after", "http/retry-with-backoff"} for h in hits)
    hits = seeded.search("avoid sql injection", agent="kb", kind="knowledge", limit=1)
    assert hits[0].memory.metadata["pack_entry"] == "sql/parameterized-queries"


def test_preflight_warns_before_a_known_failure(seeded: Engram) -> None:
    warnings = seeded.failures.preflight("git push origin main after a teammate pushed", agent="kb")
    assert any("non-fast-forward" in w.pattern.signature for w in warnings)


def test_seeding_twice_adds_nothing(mem: Engram) -> None:
    first = seed_pack(mem, "git", agent="ops")
    pack = load_pack("git")
    assert first.added == len(pack.practices) + len(pack.errors)
    assert first.previous_version is None
    count = mem.count(agent="ops")
    audit_entries = len(mem.audit.log(agent="ops", limit=10_000))
    second = seed_pack(mem, "git", agent="ops")
    assert (second.added, second.updated, second.removed) == (0, 0, 0)
    assert second.unchanged == first.added
    assert not second.changed
    assert second.previous_version == pack.version
    assert mem.count(agent="ops") == count
    writes = [e for e in mem.audit.log(agent="ops", limit=10_000) if e.action not in {"read", "search", "list", "get"}]
    assert len(writes) <= audit_entries  # nothing new was written
    assert mem.audit.verify()
    # Another agent gets its own copy.
    assert seed_pack(mem, "git", agent="other").added == first.added


def test_a_newer_version_updates_the_store(mem: Engram) -> None:
    v1 = load_pack("docker")
    seed_pack(mem, v1, agent="ops")
    before = {m.metadata["pack_entry"]: m for m in mem.list(agent="ops", tags=["pack:docker"], limit=500)}
    changed_practice = dataclasses.replace(v1.practices[0], text=v1.practices[0].text + " Renovate can bump the pins.")
    changed_error = dataclasses.replace(v1.errors[0], fix=v1.errors[0].fix + " Check df -h for the host's disk.")
    new_practice = PackPractice(id="healthcheck-start-period", title="Start period", text="Give slow services time.")
    v2 = dataclasses.replace(
        v1,
        version=2,
        practices=(changed_practice, *v1.practices[1:-1], new_practice),  # the last practice is dropped
        errors=(changed_error, *v1.errors[1:]),
    )
    report = seed_pack(mem, v2, agent="ops")
    assert report.previous_version == 1
    assert (report.added, report.updated, report.removed) == (1, 2, 1)
    after = {m.metadata["pack_entry"]: m for m in mem.list(agent="ops", tags=["pack:docker"], limit=500)}
    assert set(after) == set(before) - {f"docker/{v1.practices[-1].id}"} | {"docker/healthcheck-start-period"}
    assert all(m.metadata["source"] == "engramdb-pack:docker@2" for m in after.values())
    practice = after[f"docker/{changed_practice.id}"]
    assert practice.id == before[f"docker/{changed_practice.id}"].id  # updated in place
    assert practice.content.endswith("Renovate can bump the pins.")
    sols = mem.failures.solutions(v1.errors[0].error, agent="ops")
    assert "df -h" in sols[0].solution
    assert len(sols) == 1 + len(v1.errors[0].failed)  # the old fix is gone with its memory
    # Seeding v2 again, or the older v1, changes nothing.
    assert not seed_pack(mem, v2, agent="ops").changed
    assert not seed_pack(mem, v1, agent="ops").changed


def test_redaction_applies_to_pack_content(mem: Engram) -> None:
    """Packs go through the public write path: what it redacts, it redacts in packs too."""
    leaky = Pack(
        name="leaky",
        version=1,
        title="Leaky",
        description="d",
        errors=(
            PackError(
                id="auth", error="HTTPError: 401 Client Error: Unauthorized", fix="use password=hunter2 to log in"
            ),
        ),
    )
    seed_pack(mem, leaky, agent="ops")
    (stored,) = mem.list(agent="ops", tags=["pack:leaky"])
    assert "hunter2" not in stored.content
    assert "hunter2" not in json.dumps(stored.metadata)


def _cli() -> typer.Typer:
    """``engram knowledge seed`` as a standalone app (the command function the ``engram`` app registers)."""
    app = typer.Typer(add_completion=False)
    app.command("seed")(packs_cli.seed)
    app.command("noop")(lambda: None)  # two commands: the app keeps its subcommand name
    return app


def test_cli_lists_and_seeds_packs(tmp_path: Path) -> None:
    app = _cli()
    store = str(tmp_path / "store")
    listed = runner.invoke(app, ["seed", "--list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [p["name"] for p in json.loads(listed.stdout)] == list(PACKS)
    text = runner.invoke(app, ["seed", "--list"])
    assert "python v2" in text.stdout
    first = runner.invoke(app, ["seed", "--pack", "sql", "--agent", "dba", "--store", store, "--json"])
    assert first.exit_code == 0, first.output
    (report,) = json.loads(first.stdout)
    assert report["added"] == len(load_pack("sql").practices) + len(load_pack("sql").errors)
    again = runner.invoke(app, ["seed", "--pack", "sql", "--agent", "dba", "--store", store])
    assert again.exit_code == 0
    assert "already loaded" in again.stdout
    with Engram(store) as mem:
        assert mem.failures.solutions("deadlock detected", agent="dba")


def test_cli_rejects_unknown_packs_before_opening_the_store(tmp_path: Path) -> None:
    app = _cli()
    store = tmp_path / "store"
    unknown = runner.invoke(app, ["seed", "--pack", "cobol", "--store", str(store)])
    assert unknown.exit_code != 0
    assert isinstance(unknown.exception, ValidationError)
    assert "unknown pack 'cobol'" in str(unknown.exception)
    assert not store.exists()
    missing = runner.invoke(app, ["seed", "--store", str(store)])
    assert isinstance(missing.exception, ValidationError)


def test_engram_knowledge_seed_is_registered(tmp_path: Path) -> None:
    from engramdb.interfaces.cli import app

    result = runner.invoke(app, ["knowledge", "seed", "--pack", "git", "--store", str(tmp_path / "s"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["pack"] == "git"
    bad = runner.invoke(app, ["knowledge", "seed", "--pack", "cobol"])
    assert bad.exit_code == 1
    assert bad.stderr.startswith("error: unknown pack 'cobol'")
