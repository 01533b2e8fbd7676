"""The documentation names only files that exist, the code cites only sections that
exist, and nothing cites a document outside the repository.

Every backticked span in README.md, docs/*.md, bench/README.md and data/README.md that
reads as a repository path (it starts with one of the repository's top-level folders,
such as `engine/` or `tests/`, and holds no space) must exist; `*` matches as a glob,
a trailing `::test_name` or `#anchor` is dropped. A path relative to the page's own
folder (bench/README.md saying `benchmarks/common.py`) is accepted too."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.kits.paths import REPO

TOP_LEVEL = ("engine/", "adapters/", "bench/", "tests/", "data/", "docs/", ".ci/")
TOP_FILES = ("pyproject.toml", "README.md")
_SPAN = re.compile(r"`([^`\n]+)`")


def doc_pages(repo: Path) -> list[Path]:
    """The pages checked: the README, every docs/*.md, and the two folder READMEs."""
    pages = [repo / "README.md", repo / "bench" / "README.md", repo / "data" / "README.md"]
    return [p for p in pages if p.exists()] + sorted((repo / "docs").glob("*.md"))


def path_spans(text: str) -> list[str]:
    """Backticked spans that read as repository paths, with `::test` and `#anchor`
    suffixes dropped."""
    found = []
    for span in _SPAN.findall(text):
        span = span.strip()
        if " " in span or not (span.startswith(TOP_LEVEL) or span in TOP_FILES):
            continue
        found.append(span.split("::")[0].split("#")[0])
    return found


def exists(span: str, repo: Path, page_dir: Path) -> bool:
    """Whether the path (a glob when it holds `*`) names something under the repository
    root or under the page's own folder, or is an output the repository git-ignores
    (`bench/.asv/`)."""
    for base in (repo, page_dir):
        if "*" in span:
            if any(base.glob(span)):
                return True
        elif (base / span).exists():
            return True
    return "*" not in span and git_ignored(span, repo)


def git_ignored(span: str, repo: Path) -> bool:
    """Whether git ignores the path in that checkout (False outside a checkout)."""
    try:
        res = subprocess.run(["git", "check-ignore", "-q", span], cwd=repo,
                             capture_output=True, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def missing_paths(repo: Path) -> list[str]:
    """`page: path` for every path a page names that does not exist."""
    out = []
    for page in doc_pages(repo):
        for span in path_spans(page.read_text(encoding="utf-8")):
            if not exists(span, repo, page.parent):
                out.append(f"{page.relative_to(repo)}: {span}")
    return out


def test_every_path_the_docs_name_exists():
    assert missing_paths(REPO) == []


def test_a_wrong_path_is_reported(tmp_path):
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "schedule.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(
        "See `engine/schedule.py`, `engine/schedule.py::test_x`, `engine/*.py`,\n"
        "`engine/model/build/builder_gone.py` and `python engine/nothing.py --x`.\n")
    assert missing_paths(tmp_path) == ["docs/page.md: engine/model/build/builder_gone.py"]


def test_a_page_relative_path_is_accepted(tmp_path):
    (tmp_path / "bench" / "benchmarks").mkdir(parents=True)
    (tmp_path / "bench" / "benchmarks" / "common.py").write_text("")
    (tmp_path / "bench" / "README.md").write_text("`bench/benchmarks/common.py`\n")
    assert missing_paths(tmp_path) == []


def test_no_file_cites_a_document_outside_the_repository():
    """The team's background documents and the raw-trace folder lived beside the
    repository; nothing in it may point there."""
    # Spelled in pieces so that this file does not match its own search.
    pattern = "|".join(["RAY_V2_" + "SEMANTICS", "DESIGN" + r"\.md", "shared" + "/docs",
                        r"\.\." + "/shared"])
    try:
        res = subprocess.run(["git", "grep", "-nE", pattern], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        pytest.skip("git is not installed")
    if res.returncode not in (0, 1):
        pytest.skip(f"not a git checkout: {res.stderr.strip()}")
    assert res.stdout.splitlines() == []


_SECTION_CITE = re.compile(r"(design\.md )?§\s?(\d+(?:\.\d+)?)")
_HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.M)


def cited_sections(text: str) -> list[tuple[str, str]]:
    """(page, section) for every `§n` or `§n.m` in the text: `docs/design.md §n` cites
    the design, every other `§` the Ray semantics page."""
    return [("design.md" if d else "ray-semantics.md", n)
            for d, n in _SECTION_CITE.findall(text)]


def missing_sections(repo: Path) -> list[str]:
    """`file: page §n` for every cited section the page has no heading for."""
    headings = {page: set(_HEADING.findall((repo / "docs" / page).read_text("utf-8")))
                for page in ("ray-semantics.md", "design.md")}
    out = []
    for folder in ("engine", "adapters", "bench", "tests"):
        for path in sorted((repo / folder).rglob("*.py")):
            for page, n in cited_sections(path.read_text(encoding="utf-8")):
                if n not in headings[page]:
                    out.append(f"{path.relative_to(repo)}: {page} §{n}")
    return out


def test_every_section_the_code_cites_exists():
    assert missing_sections(REPO) == []


def test_a_missing_section_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ray-semantics.md").write_text("## 4. Packing\n### 4.8 Score\n")
    (tmp_path / "docs" / "design.md").write_text("## 6. House style\n")
    (tmp_path / "engine").mkdir()
    wrong = "§" + "4.10"   # in pieces, so that this file cites no missing section itself
    (tmp_path / "engine" / "a.py").write_text(
        f'"""The score (§4.8), packing (§4), house style (docs/design.md §6), {wrong}."""\n')
    assert missing_sections(tmp_path) == [f"engine/a.py: ray-semantics.md {wrong}"]
