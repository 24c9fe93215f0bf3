"""Seed 003: ``store_error_resolution`` / ``recall_error_solutions`` and the seeded "ModuleNotFoundError resolutions".

The module a message names decides its fix: the seed's own example stores "pip install fastapi uvicorn" for
``No module named 'fastapi'``; that fix (and the pack's fixes for bs4 or sklearn) is no answer for numpy, which
gets the knowledge base's generic "ModuleNotFoundError resolution" instead.
"""

from __future__ import annotations

import re

import pytest
from seed_cli import Cli

from engramdb import Engram
from engramdb.learning.signatures import decisive_template, error_signature


@pytest.fixture
def swarm(mem: Engram) -> Engram:
    """``knowledge_base.seed_initial_knowledge()`` then the seed's ``store_error_resolution`` example."""
    mem.knowledge.seed("python", agent="swarm")
    mem.failures.record(
        "ModuleNotFoundError: No module named 'fastapi'",
        agent="swarm",
        context="Starting FastAPI server",
        solution="pip install fastapi uvicorn",
    )
    return mem


def test_the_seed_example_finds_its_own_resolution(swarm: Engram) -> None:
    """``recall_error_solutions(error_message="Cannot import fastapi")`` -> "pip install fastapi uvicorn"."""
    for asked in ("ModuleNotFoundError: No module named 'fastapi'", "Cannot import fastapi"):
        assert swarm.failures.solutions(asked, agent="swarm")[0].solution == "pip install fastapi uvicorn"


def test_another_module_gets_the_generic_fix_not_another_modules_fix(swarm: Engram) -> None:
    """ "ModuleNotFoundError resolutions": numpy gets the generic fix, never fastapi's, bs4's or sklearn's."""
    found = [
        s.solution for s in swarm.failures.solutions("ModuleNotFoundError: No module named 'numpy'", agent="swarm")
    ]
    assert found
    assert found[0].startswith("Install the distribution that provides the module")
    for wrong in ("fastapi", "beautifulsoup4", "scikit-learn", "PyYAML", "opencv", "Pillow"):
        assert not any(wrong in s for s in found), (wrong, found)


@pytest.mark.parametrize(
    "asked",
    [
        "No module named 'numpy'",  # the words, and str(e) of the ModuleNotFoundError
        str(ModuleNotFoundError("No module named 'numpy'")),
        "ImportError: No module named numpy",  # Python 2's wording of the same failure
    ],
)
def test_the_bare_message_gets_the_generic_fix_too(swarm: Engram, asked: str) -> None:
    """Without its exception class the message is the same failure: the generic fix, never Pillow's or PyYAML's."""
    found = [s.solution for s in swarm.failures.solutions(asked, agent="swarm")]
    assert found
    assert found[0].startswith("Install the distribution that provides the module")
    for wrong in ("fastapi", "beautifulsoup4", "scikit-learn", "PyYAML", "opencv", "Pillow"):
        assert not any(wrong in s for s in found), (wrong, found)


def test_the_bare_message_of_a_module_with_its_own_fix_gets_that_fix(swarm: Engram) -> None:
    """ "No module named 'yaml'" (no class) is the pack's yaml entry, counted in full, before the generic fix."""
    (best, *_) = swarm.failures.solutions("No module named 'yaml'", agent="swarm")
    assert "PyYAML" in best.solution
    assert (best.successes, best.attempts) == (1, 1)


def test_a_specific_fix_wins_over_the_generic_one(swarm: Engram) -> None:
    """The pack's specific entry for yaml (PyYAML) is returned for yaml, not the generic fix."""
    (best, *_) = swarm.failures.solutions("ModuleNotFoundError: No module named 'yaml'", agent="swarm")
    assert "PyYAML" in best.solution


def test_no_module_names_are_different_patterns(swarm: Engram) -> None:
    """``No module named 'numpy'`` and ``'fastapi'`` are two patterns (the name decides the fix)."""
    swarm.failures.record("ModuleNotFoundError: No module named 'numpy'", agent="swarm")
    sigs = {p.signature for p in swarm.failures.patterns(agent="swarm")}
    assert "ModuleNotFoundError: No module named 'numpy'" in sigs
    assert "ModuleNotFoundError: No module named 'fastapi'" in sigs
    assert decisive_template("No module named 'numpy'") == ("No module named <value>", ("numpy",))
    assert decisive_template("ModuleNotFoundError: No module named 'numpy'") == ("No module named <value>", ("numpy",))


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (
            "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) could not connect to server db-1.internal",
            "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) could not connect to server db-2.internal",
            True,
        ),
        (
            'Exception in thread "main" java.lang.NullPointerException\n'
            "\tat com.example.orders.OrderService.total(OrderService.java:42)\n"
            "\tat com.example.orders.Main.main(Main.java:7)",
            'Exception in thread "main" java.lang.NullPointerException\n'
            "\tat com.example.billing.Invoice.print(Invoice.java:118)\n"
            "\t... 3 more",
            True,
        ),
        ("ModuleNotFoundError: No module named 'numpy'", "ModuleNotFoundError: No module named 'fastapi'", False),
    ],
)
def test_signatures_keep_what_decides_the_fix(a: str, b: str, same: bool) -> None:
    """Contract: messages differing only in details are one pattern, unless the value decides the fix."""
    assert (error_signature(a) == error_signature(b)) is same
    assert "psycopg2" in error_signature(a) or "psycopg2" not in a
    assert "<n>" not in error_signature(a).split(")")[0]


def test_two_null_pointer_exceptions_are_one_group(mem: Engram) -> None:
    """Two Java NullPointerExceptions that differ only in their stack frame are one failure pattern."""
    for frame in ("com.example.App.main(App.java:10)", "com.example.Service.run(Service.java:42)"):
        mem.failures.record(f"java.lang.NullPointerException\n\tat {frame}", agent="jvm", solution="check for null")
    (pattern,) = mem.failures.patterns(agent="jvm")
    assert pattern.occurrences == 2
    assert pattern.signature == "java.lang.NullPointerException"


def test_cli_shows_weighted_fix_counts_readably(cli: Cli) -> None:
    """``recall_error_solutions(error_message="Cannot import fastapi")`` on the command line: the fix of the similar
    failure counts in part, shown to two decimals at most (it printed "0.491187"); --json keeps the exact value."""
    cli.ok(
        "failures", "record", "-e", "ModuleNotFoundError: No module named 'fastapi'", "-c", "Starting FastAPI server",
        "--fix", "pip install fastapi uvicorn", "--agent", "swarm",
    )  # fmt: skip
    (fix,) = cli.json("failures", "solutions", "Cannot import fastapi", "--agent", "swarm")
    assert fix["solution"] == "pip install fastapi uvicorn"
    assert 0 < fix["attempts"] < 1  # a similar failure's fix: evidence in part
    shown = cli.ok("failures", "solutions", "Cannot import fastapi", "--agent", "swarm")
    assert "pip install fastapi uvicorn" in shown
    assert f"{fix['attempts']:.2f}".rstrip("0").rstrip(".") in shown
    assert not re.search(r"\d\.\d{3,}", shown), shown


def test_cli_record_takes_the_python_names_of_the_fixes(cli: Cli) -> None:
    """``failures.record(error, solution=..., failed_solutions=...)`` typed as options: --solution and
    --failed-solution work as --fix and --failed-fix (they were "no such option")."""
    cli.ok(
        "failures", "record", "-e", "ModuleNotFoundError: No module named 'fastapi'",
        "--solution", "pip install fastapi uvicorn", "--failed-solution", "pip install fast-api", "--agent", "swarm",
    )  # fmt: skip
    found = cli.json("failures", "solutions", "ModuleNotFoundError: No module named 'fastapi'", "--agent", "swarm")
    assert [(f["solution"], f["successes"], f["attempts"]) for f in found] == [
        ("pip install fastapi uvicorn", 1, 1),
        ("pip install fast-api", 0, 1),
    ]
