"""The README's examples run as written.

Every ```python block of README.md is executed with the real library in a fresh temporary directory (the
working directory; ``ENGRAM_HOME`` points there too so nothing touches the user's home). A block preceded by
``<!-- not-tested: reason -->`` is skipped with that reason (kept for what a test cannot have, such as a
PostgreSQL URL). Every ```bash block preceded by ``<!-- runnable -->`` is run with bash (``set -euo pipefail``)
in a fresh temporary directory, with this environment's ``engram`` console script first on ``PATH``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from engramdb import Engram

README = Path(__file__).resolve().parents[1] / "README.md"

_FENCE = re.compile(r"^```(\S*)[ \t]*$")
_MARK = re.compile(r"^<!--\s*(not-tested|runnable)\s*(?::\s*(.*?))?\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of the README: its language, first line number, text and marker."""

    lang: str
    line: int
    code: str
    mark: str | None
    reason: str | None

    @property
    def id(self) -> str:
        return f"{self.lang}-line{self.line}"


def _blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"README.md:{start + 1}: code block never closed")
        i += 1
        prev = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = _MARK.match(prev)
        blocks.append(
            Block(
                lang=fence.group(1),
                line=start + 2,
                code="\n".join(body) + "\n",
                mark=mark.group(1) if mark else None,
                reason=mark.group(2) if mark else None,
            )
        )
    return blocks


BLOCKS = _blocks(README.read_text(encoding="utf-8"))
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SHELL = [b for b in BLOCKS if b.lang == "bash" and b.mark == "runnable"]


def test_readme_has_examples() -> None:
    assert len(PYTHON) >= 10
    assert SHELL
    for b in BLOCKS:
        assert b.mark != "not-tested" or b.reason, f"README.md:{b.line}: not-tested needs a reason"
        assert b.mark != "runnable" or b.lang == "bash", f"README.md:{b.line}: only bash blocks are runnable"


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_example(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if block.mark == "not-tested":
        pytest.skip(f"README.md:{block.line}: {block.reason}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "home"))
    namespace: dict[str, object] = {"__name__": "__readme__"}
    try:
        exec(compile(block.code, f"README.md:{block.line}", "exec"), namespace)
    finally:
        for value in namespace.values():
            if isinstance(value, Engram):
                value.close()


@pytest.mark.parametrize("block", SHELL, ids=[b.id for b in SHELL])
def test_shell_example(block: Block, tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "engram").exists(), f"no engram console script next to {sys.executable}"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "ENGRAM_HOME": str(tmp_path / "home"),
        "NO_COLOR": "1",
    }
    script = tmp_path / "example.sh"
    script.write_text("set -euo pipefail\n" + block.code, encoding="utf-8")
    done = subprocess.run(
        ["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"README.md:{block.line} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
