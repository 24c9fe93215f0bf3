"""The shape of the ``engram`` package: commands registered in one place, no cycles, the contract's commands."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from cli_helpers import ok

from engramdb.interfaces import cli
from engramdb.interfaces.cli.app import GROUPS, TOP_LEVEL

CLI_DIR = Path(cli.__file__).parent
INTERFACES_DIR = CLI_DIR.parent
#: The plumbing every command module may use; nothing else of the CLI package.
SHARED = {"_options", "_errors", "_render", "_refs"}

# The command line named by the public contract (CONTRACT.md).
CONTRACT = [
    ["memory", "record"],
    ["memory", "list"],
    ["memory", "search"],
    ["memory", "patterns"],
    ["memory", "share"],
    ["learning", "stats"],
    ["learning", "patterns"],
    ["learning", "failures"],
    ["learning", "suggest"],
    ["knowledge", "export"],
    ["knowledge", "import"],
    ["knowledge", "merge"],
    ["prevention", "generate"],
]


def _cli_imports(path: Path) -> set[str]:
    """The modules of ``engramdb.interfaces`` that ``path`` imports (module names relative to that package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("engramdb.interfaces."):
                found.add(name.removeprefix("engramdb.interfaces."))
    return found


def _command_modules() -> list[Path]:
    return sorted(p for p in CLI_DIR.glob("*.py") if p.stem not in {"__init__", "app", *SHARED})


@pytest.mark.parametrize("path", _command_modules(), ids=lambda p: p.stem)
def test_command_modules_use_only_the_shared_plumbing(path: Path) -> None:
    imported = {name.removeprefix("cli.") for name in _cli_imports(path) if name.startswith("cli.")}
    # `from engramdb.interfaces.cli._options import X` shows as `_options` and `_options.X`.
    modules = {name.split(".")[0] for name in imported}
    assert modules <= SHARED, f"{path.name} imports {sorted(modules - SHARED)}"
    assert "typer.Typer(" not in path.read_text(encoding="utf-8"), "groups are built in app.py only"


@pytest.mark.parametrize("stem", sorted(SHARED))
def test_shared_modules_do_not_import_commands(stem: str) -> None:
    imported = {name.removeprefix("cli.").split(".")[0] for name in _cli_imports(CLI_DIR / f"{stem}.py")}
    assert imported <= SHARED - {stem}


#: What the REST and MCP servers share: the caller policy, the HTTP guard, the operations, their arguments and
#: their results' schemas.
SERVER_SHARED = {"_access", "_http", "_ops", "_ops_more", "_schemas", "_schemas_more", "_responses", "_responses_more"}
#: The REST server's own parts: metrics, readiness, docs and lifespan, the parity routes' mounting, strict JSON bodies.
REST_OWN = {"_metrics", "_serving", "_rest_more", "_rest_strict"}
#: The MCP server's own parts: its extra tools, and over HTTP the same metrics and its health route.
MCP_OWN = {"_mcp_more", "_mcp_http", "_metrics"}


def test_servers_do_not_import_the_cli_or_internal_serializers() -> None:
    # The REST app also mounts the dashboard (the web package's public router and authorizer).
    for name, allowed in (("rest.py", SERVER_SHARED | REST_OWN | {"web"}), ("mcp.py", SERVER_SHARED | MCP_OWN)):
        imported = {n.split(".")[0] for n in _cli_imports(INTERFACES_DIR / name)}
        assert imported <= allowed, name
    rest_web = {n for n in _cli_imports(INTERFACES_DIR / "rest.py") if n.startswith("web")}
    assert rest_web <= {"web", "web.api_key_authorizer", "web.dashboard_router"}
    assert not (INTERFACES_DIR / "_json.py").exists()


def test_every_registered_command_is_listed_by_its_group() -> None:
    root = ok("--help")
    for group in GROUPS:
        assert group.name in root
        listed = ok(group.name)
        for name, _ in group.commands:
            assert name in listed, f"{group.name} {name}"
    for name, _, _ in TOP_LEVEL:
        assert name in root


def test_each_command_is_registered_once() -> None:
    functions = [command for group in GROUPS for _, command in group.commands]
    functions += [command for _, command, _ in TOP_LEVEL]
    assert len(functions) == len(set(functions))


@pytest.mark.parametrize("command", CONTRACT, ids=" ".join)
def test_contract_commands_have_help_and_json(command: list[str]) -> None:
    out = ok(*command, "--help")
    assert "--json" in out
    assert "Usage" in out
