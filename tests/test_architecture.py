"""The shape of the house (docs/architecture.md), checked: no mixins, no upward imports, no cycles, small modules."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

import pytest

import engramdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import gen_module_map

SRC = Path(engramdb.__file__).parent

#: Layers, bottom first: a module may import its own layer or those below (others: checked for cycles only).
LAYERS: list[tuple[str, ...]] = [
    ("engramdb.errors", "engramdb._util", "engramdb.config", "engramdb.models", "engramdb._validate",
     "engramdb.auditchain", "engramdb.auditcoverage"),
    ("engramdb.storage", "engramdb.embeddings"),
    ("engramdb.retrieval",),
]  # fmt: skip
#: What the storage layer must never import.
ABOVE_STORAGE = (
    "engramdb.learning",
    "engramdb.privacy",
    "engramdb.retrieval",
    "engramdb.brain",
    "engramdb.pipeline",
    "engramdb.recall",
    "engramdb.engram",
    "engramdb.interfaces",
)


def _modules() -> list[str]:
    return gen_module_map.modules()


def _runtime_imports(module: str) -> set[str]:
    """engramdb modules imported at import time (not under ``if TYPE_CHECKING:``, not inside functions)."""
    tree = ast.parse(gen_module_map.path_of(module).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if not isinstance(node, ast.FunctionDef | ast.ClassDef) else ():
            if isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0 and sub.module.startswith("engramdb"):
                found.add(sub.module)
            elif isinstance(sub, ast.Import):
                found |= {a.name for a in sub.names if a.name.startswith("engramdb")}
    return found


def _layer(module: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


def test_no_class_inherits_from_more_than_one_project_class():
    offenders = []
    for name in _modules():
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name:
                continue
            own = [b for b in cls.__bases__ if b.__module__.startswith("engramdb")]
            if len(own) > 1:
                offenders.append(f"{name}.{cls.__name__}")
    assert offenders == []


@pytest.mark.parametrize("module", [m for m in _modules() if _layer(m) is not None])
def test_no_module_imports_a_layer_above_its_own(module):
    mine = _layer(module)
    assert mine is not None
    above = {i for i in _runtime_imports(module) if (_layer(i) or 0) > mine}
    assert above == set()


def test_storage_never_imports_the_layers_above_it():
    storage = [m for m in _modules() if m.startswith("engramdb.storage")]
    bad = {m: sorted(i for i in _runtime_imports(m) if i.startswith(ABOVE_STORAGE)) for m in storage}
    assert {m: v for m, v in bad.items() if v} == {}


def test_no_import_cycles():
    # Lazy (function-level) and TYPE_CHECKING imports count: a cycle hidden from the interpreter is still one of design.
    modules = set(_modules())
    graph = {m: {i for i in gen_module_map.imports(m) if i in modules and i != m} for m in modules}
    # A package's __init__ re-exporting its submodules is not a cycle of design: drop package -> own child edges.
    for m, deps in graph.items():
        graph[m] = {d for d in deps if not d.startswith(m + ".")}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep) :], dep] if dep in stack else [node, dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_no_module_is_over_650_lines():
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > 650}
    assert long == {}


def test_every_module_is_placed_in_docs_architecture():
    doc = gen_module_map.DOC.read_text(encoding="utf-8")
    assert gen_module_map.updated(doc) == doc, "run python scripts/gen_module_map.py"


def test_no_import_runs_up_a_layer_of_the_module_map():
    """Every layer of docs/architecture.md, every import (TYPE_CHECKING and function-level ones too)."""
    placed = {m: gen_module_map.layer(m) for m in gen_module_map.modules()}
    upward = sorted(
        f"{m} ({gen_module_map.LAYERS[placed[m]][0]}) -> {i} ({gen_module_map.LAYERS[placed[i]][0]})"
        for m in placed
        for i in gen_module_map.imports(m)
        if i in placed and not i.startswith(m + ".") and placed[i] > placed[m]
    )
    assert upward == []


#: What interfaces and integrations may import besides their own package: the public API.
PUBLIC_SURFACE = (
    "engramdb.models",  # every public value
    "engramdb.errors",
    "engramdb.config",
    "engramdb.validate",  # the input checks and limits, one wording
    "engramdb.storage.base",  # what Engram.store (a public attribute) is: the role protocols, Filter
    "engramdb.toolkit",  # beside an Engram: a damaged store examined, the shipped packs, redaction, learning curves
    "engramdb.embeddings",  # what Engram.embedder is and Engram(embedder=...) takes: the Embedder and its cache
)
#: Interface/integration modules that still reach past the public API, and why; keep it short.
ALLOWED_PRIVATE: dict[str, dict[str, str]] = {}


def _public(module: str, imported: str) -> bool:
    own = ".".join(module.split(".")[:2])
    if imported == "engramdb" or imported.startswith(own + ".") or imported == own:
        return True
    if any(imported == p or imported.startswith(p + ".") for p in PUBLIC_SURFACE):
        return True
    # An integration is public where it is not underscored (the CLI's `engram import chroma` uses one).
    return imported.startswith("engramdb.integrations.") and not imported.rsplit(".", 1)[-1].startswith("_")


def test_interfaces_and_integrations_use_only_the_public_api():
    """Every import of theirs, TYPE_CHECKING and function-level ones too; the allow-list above is exact."""
    outside = {
        m: sorted(i for i in gen_module_map.imports(m) if not _public(m, i))
        for m in _modules()
        if m.startswith(("engramdb.interfaces", "engramdb.integrations"))
    }
    reaching = {m: v for m, v in outside.items() if v}
    assert reaching == {m: sorted(v) for m, v in ALLOWED_PRIVATE.items()}


#: Who may write memory rows (``store.memories.add/update/delete/import_history``): the write pipeline, its keyed
#: writes (facts.py), its imports and merges (transfers.py) and the storage itself.
ROW_WRITERS = ("engramdb.storage", "engramdb.pipeline", "engramdb.facts", "engramdb.transfers")
#: Who may open a raw ``store.atomic()``: those, plus the read bookkeeping (access counts, the read audit) and the
#: vector queue's own transaction. Services use ``pipeline.transaction()``.
TRANSACTION_OPENERS = (*ROW_WRITERS, "engramdb.recall", "engramdb._access", "engramdb.vectorqueue")
_ROW_WRITES = {"add", "update", "delete", "import_history"}


def _calls(module: str) -> list[tuple[str, str, int]]:
    """(receiver's attribute, method, line) of every ``x.y.method(...)`` call in ``module`` (a plain name: "")."""
    tree = ast.parse(gen_module_map.path_of(module).read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            # ``store.memories.update`` is a row write; a local dict named ``memories`` is not.
            name = owner.attr if isinstance(owner, ast.Attribute) else ""
            out.append((name, node.func.attr, node.lineno))
    return out


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_only_the_pipeline_and_storage_write_memory_rows():
    found = [
        f"{m}:{line} {owner}.{method}()"
        for m in _modules()
        if not _within(m, ROW_WRITERS)
        for owner, method, line in _calls(m)
        if owner == "memories" and method in _ROW_WRITES
    ]
    assert found == []


def test_services_open_no_raw_store_transaction():
    found = [
        f"{m}:{line}"
        for m in _modules()
        if not _within(m, TRANSACTION_OPENERS)
        for _, method, line in _calls(m)
        if method == "atomic"
    ]
    assert found == []
