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
