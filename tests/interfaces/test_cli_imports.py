"""What an ``engram`` process loads: only what its command needs (the guard of the CLI's start-up cost).

Each case runs the real command line in a fresh interpreter and reads ``sys.modules`` at exit, so a
module-level import that drags the library, numpy or the ONNX runtime into a command that does not use
them fails here (no timing: the machine's load does not matter).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engramdb import Engram
from engramdb.embeddings.base import Embedder

_RUN = """
import sys
from engramdb.interfaces.cli import main
sys.argv = ["engram", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print("LOADED=" + ",".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""

#: The library's heavy parts: the facade and what it builds, numpy, the model's runtime.
HEAVY = ("engramdb.engram", "engramdb.storage", "engramdb.pipeline", "numpy", "onnxruntime")
#: The command modules of the CLI package (``engramdb.interfaces.cli.<name>``, not its shared plumbing).
CLI = "engramdb.interfaces.cli."


def loaded_by(*args: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules loaded by ``engram ARGS`` in a fresh process (which must succeed)."""
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    run_env.update(env or {})
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *args], capture_output=True, text=True, env=run_env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stderr.splitlines() if line.startswith("LOADED="))
    return set(line.removeprefix("LOADED=").split(","))


def commands_loaded(modules: set[str]) -> set[str]:
    return {m.removeprefix(CLI) for m in modules if m.startswith(CLI) and not m.removeprefix(CLI).startswith("_")}


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_the_root_help_loads_neither_the_library_nor_the_models(args: list[str]) -> None:
    assert loaded_by(*args) & {*HEAVY, "engramdb.models", "httpx"} == set()


@pytest.mark.parametrize("args", [["memory", "--help"], ["keys", "list", "--help"], ["learning", "suggest", "--help"]])
def test_a_commands_help_loads_no_library(args: list[str]) -> None:
    assert loaded_by(*args) & {*HEAVY, "httpx"} == set()


def test_the_root_help_loads_no_group_and_a_group_loads_only_its_own_modules() -> None:
    # The root help lists the top-level commands (their docstrings), not the groups' commands.
    assert not commands_loaded(loaded_by("--help")) & {"memory", "learning", "knowledge", "keys", "audit"}
    # The memory group's commands live in these modules; listing them loads nothing else.
    assert commands_loaded(loaded_by("memory", "--help")) == {
        "app",
        "memory",
        "conversations",
        "sharing",
        "retention",
        "failures",
    }


def test_a_command_loads_its_own_module_only(tmp_path: str, embedder: Embedder) -> None:
    store = f"{tmp_path}/store"
    with Engram(store, embedder=embedder) as mem:
        mem.remember("Deploys happen on Tuesdays", agent="alice")
    modules = loaded_by("memory", "list", "--store", store, "--agent", "alice")
    assert commands_loaded(modules) == {"app", "memory"}
    # Listing reads the store; it never loads the embedding model's runtime.
    assert "onnxruntime" not in modules
    assert "engramdb.storage" in modules  # the listing did go to the store (the guard is not vacuous)


#: What a command that needs no model must never load: the model's runtime and numpy (vectors are not read),
#: the date parser (no question is asked) and the areas of the library it does not call.
NO_MODEL_NEEDS = ("numpy", "onnxruntime", "tokenizers", "dateparser", "engramdb.learning", "engramdb.brain")


def _areas(modules: set[str]) -> set[str]:
    """The service modules (``engramdb.services.<area>``) among ``modules``, their shared base left out."""
    prefix = "engramdb.services."
    return {m.removeprefix(prefix) for m in modules if m.startswith(prefix) and m != prefix + "_base"}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> tuple[str, str]:
    store = str(tmp_path_factory.mktemp("reads") / "store")
    with Engram(store, embedder=embedder) as mem:
        memory = mem.remember("Deploys happen on Tuesdays", agent="alice")
        mem.update(memory.id, tags=["deploy"])
        mem.keys.create(agent="alice")
    return store, memory.id


@pytest.mark.parametrize(
    ("command", "area"),
    [
        (["memory", "list", "--agent", "alice"], None),
        (["memory", "list", "--agent", "alice", "--json"], None),
        (["memory", "show", "ID"], None),
        (["memory", "history", "ID", "--json"], None),
        (["audit", "log", "--limit", "5"], "audit"),
        (["keys", "list"], "keys"),
    ],
)
def test_a_command_that_needs_no_model_loads_neither_it_nor_numpy_nor_other_areas(
    seeded: tuple[str, str], command: list[str], area: str | None
) -> None:
    store, memory_id = seeded
    modules = loaded_by(*[memory_id if arg == "ID" else arg for arg in command], "--store", store)
    assert "engramdb.storage.sqlite" in modules  # it did read the store (the guard is not vacuous)
    assert {m for m in modules if m.split(".")[0] in NO_MODEL_NEEDS or m.startswith(NO_MODEL_NEEDS)} == set()
    # Each area's service is built when first used: only the one the command calls is imported.
    assert _areas(modules) == ({area} if area else set())
