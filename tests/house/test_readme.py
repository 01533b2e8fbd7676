"""The README's front page stays true: its engine example runs and prints what its
comments say, its Ray example runs on the sample tick `vecsched explain --write-sample`
writes, and the quickstart's two commands name extras and subcommands that exist."""
from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import tomllib

import pytest

from tests.kits.paths import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
QUICKSTART = (
    'python3 -m venv .venv && .venv/bin/pip install -q -e ".[cli,ray]" && '
    '.venv/bin/vecsched demo && .venv/bin/vecsched replay',
    'python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]" && '
    '.venv/bin/python -m pytest',
)


def code_block(text: str, heading: str, lang: str = "python") -> str:
    """The first ```lang block after the heading line `heading`."""
    start = text.index(f"\n{heading}\n")
    m = re.compile(rf"```{lang}\n(.*?)```", re.S).search(text, start)
    assert m, f"no {lang} block after {heading!r}"
    return m.group(1)


def expected_output(code: str) -> list[str]:
    """What the block's `print(...)  # -> text` lines say they print, in order."""
    return [line.split("# -> ", 1)[1].rstrip() for line in code.splitlines()
            if line.startswith("print(") and "# -> " in line]


def run(code: str) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    return out.getvalue().splitlines()


def test_the_engine_example_prints_what_it_says():
    code = code_block(README, "## The engine")
    assert "build_problem" in code and "schedule(problem)" in code
    want = expected_output(code)
    assert len(want) == 3
    assert run(code) == want


def test_a_wrong_comment_is_caught():
    """The comparison above can fail: a block whose comment promises another value."""
    code = 'print(1 + 1)   # -> 3\n'
    assert run(code) != expected_output(code)


def test_the_quickstart_commands_are_the_two_and_name_what_exists():
    block = code_block(README, "## Quickstart", "bash").strip().splitlines()
    assert tuple(block) == QUICKSTART
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = config["project"]["optional-dependencies"]
    assert {"cli", "ray", "test"} <= set(extras)
    assert config["project"]["scripts"]["vecsched"] == "vecsched.adapters.cli.main:main"
    res = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "--help"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert re.search(r"\bdemo\b", res.stdout) and re.search(r"\breplay\b", res.stdout)


def test_the_ray_example_runs_on_the_sample_tick(tmp_path, monkeypatch):
    pytest.importorskip("ray.autoscaler.v2.scheduler")
    from vecsched.adapters.ray.explain_sample import write_sample
    write_sample(str(tmp_path / "tick.json"))
    monkeypatch.chdir(tmp_path)
    code = code_block(README, "## Inside a Ray cluster")
    assert "EngineScheduler().schedule(request)" in code
    (line,) = run(code)
    assert line.startswith("[") and line.split()[-1].isdigit()
