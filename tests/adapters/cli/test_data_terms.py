"""The replay's header names the terms of the bundled data it reads (data/NOTICE)."""
from __future__ import annotations

from vecsched.adapters.cli.data_terms import TERMS, terms_lines
from vecsched.adapters.traces import BUNDLED, DATA_DIR


def test_every_bundled_file_has_terms_named_in_the_notice():
    notice = (DATA_DIR / "NOTICE").read_text()
    for name in BUNDLED.values():
        assert name in TERMS, f"{name}: no terms for the replay's header"
        assert name in notice, f"{name}: not in data/NOTICE"


def test_header_of_the_default_replay_names_research_use():
    (line,) = terms_lines(None, None)
    assert line.startswith("data: openb_pods.parquet, openb_nodes.parquet: ")
    assert "research or study use with attribution" in line and "data/NOTICE" in line


def test_other_worker_groups_bring_their_own_terms():
    lines = terms_lines("openb", "pai2020_nodes")
    assert len(lines) == 2 and "CC BY 4.0" in lines[1] and "pai2020_nodes.parquet" in lines[1]
    assert "openb_nodes" not in " ".join(lines)        # the trace's default groups unused


def test_own_files_have_no_bundled_terms(tmp_path):
    assert terms_lines(str(tmp_path / "mine.parquet"), str(tmp_path / "groups.parquet")) == []
