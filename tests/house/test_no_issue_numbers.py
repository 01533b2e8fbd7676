"""Code and docs never cite the project's issue tracker by number (the word "issue"
followed by a number, with or without "#", singular or plural): the tracker is not in
the repository, so such a citation tells a reader nothing. Say what and why instead. (Another project's issue is named by its
repository, as ray-project/kuberay#4538, and a pull request as "PR #64175".)"""
from __future__ import annotations

import os
import re
from pathlib import Path

from tests.kits.paths import REPO

# Spelled in pieces so that this file does not match its own search.
CITATION = re.compile(r"\b" + "issue" + r"s?\s+#?\d+", re.IGNORECASE)
SUFFIXES = {".py", ".md", ".sh", ".toml", ".json", ".txt", ".cfg", ".yaml", ".yml"}
NAMES = {"run", "NOTICE"}           # .ci/run, data/NOTICE


def _skipped(folder: str) -> bool:
    """Folders never searched: hidden ones (.git, .venv; not .ci) and generated ones."""
    return (folder.startswith(".") and folder != ".ci") or folder == "__pycache__" \
        or folder.endswith(".egg-info") or folder == "build"


def _files(root: Path):
    for here, folders, names in os.walk(root):
        folders[:] = sorted(f for f in folders if not _skipped(f))
        for name in sorted(names):
            path = Path(here) / name
            if path.suffix in SUFFIXES or name in NAMES:
                yield path


def issue_citations(root: Path) -> list[str]:
    """`file:line: text` for every line that cites an issue by number."""
    out = []
    for path in _files(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if CITATION.search(line):
                out.append(f"{path.relative_to(root).as_posix()}:{n}: {line.strip()}")
    return out


def test_no_file_cites_an_issue_number():
    assert issue_citations(REPO) == []


def test_a_citation_is_reported(tmp_path):
    word = "Issue"
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "reserve.py").write_text(
        f'"""The reserve ({word.lower()} 22): room kept for arrivals."""\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "suite.md").write_text(
        f"# The suite\n\nAs {word}s 22 and 23 asked; {word} #31 too.\n"
        "Ray's PR #64175 and ray-project/kuberay#4538 are fine.\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "x.py").write_text(f"# {word} 1\n")
    assert issue_citations(tmp_path) == [
        f"docs/suite.md:3: As {word}s 22 and 23 asked; {word} #31 too.",
        f"engine/reserve.py:1: \"\"\"The reserve ({word.lower()} 22): room kept for arrivals.\"\"\""]
