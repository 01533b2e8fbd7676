"""The example trace docs/traces.md walks through ships with the package
(data/examples: a CSV, its node list and their mapping) and its walkthrough runs:
import the groups, import the demand (the hint replays on those groups), replay."""
from __future__ import annotations

import fnmatch
import re
import tomllib

import pytest

from vecsched.adapters import traces as T
from vecsched.adapters.cli.main import main

from tests.kits.paths import REPO

EXAMPLES = REPO / "data" / "examples"
CSV, NODES, MAP = (EXAMPLES / n for n in ("services.csv", "services-nodes.csv",
                                          "services.map.toml"))


def test_every_example_file_is_package_data_and_the_doc_names_only_shipped_files():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["vecsched.data"]
    files = sorted(p.name for p in EXAMPLES.iterdir() if p.is_file())
    assert {CSV.name, NODES.name, MAP.name} <= set(files)
    for name in files:
        assert any(fnmatch.fnmatch(f"examples/{name}", g) for g in globs), name
    doc = (REPO / "docs" / "traces.md").read_text()
    named = set(re.findall(r"data/examples/[\w.-]+", doc))
    assert {f"data/examples/{n}" for n in (CSV.name, NODES.name, MAP.name)} <= named
    assert all((REPO / n).is_file() for n in named), named


@pytest.mark.slow
def test_the_walkthrough_imports_and_replays(tmp_path, capsys):
    out = tmp_path / "my-trace"
    assert main(["trace", "import", str(NODES), "--map", str(MAP), "--kind", "groups",
                 "--out", str(out)]) == 0
    assert main(["trace", "import", str(CSV), "--map", str(MAP), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    hint = f"replay it: vecsched replay {out / 'demand.parquet'} --groups " \
           f"{out / 'groups.parquet'} --from 0 --duration 1h"
    assert hint in said, said
    demand = T.read_demand(out / "demand.parquet")
    rows = demand.to_pylist()
    assert len(rows) == 68 and [r["arrival_s"] for r in rows] == sorted(
        r["arrival_s"] for r in rows)
    caps = {r["max_per_node"] for r in rows if r["app"] == "web.front"}
    assert caps == {2, 4}                                  # redeployed with a new cap
    assert {r["max_per_node"] for r in rows if r["app"] == "web.worker"} == {None}
    assert sum(r["resources"] is not None for r in rows) == 10         # local_ssd
    groups = T.read_worker_groups(out / "groups.parquet")
    assert groups.column("type").to_pylist() == ["cpu-16c", "ssd-32c", "a10-32c"]
    code = main(["replay", str(out / "demand.parquet"), "--groups", str(out / "groups.parquet"),
                 "--from", "0", "--duration", "1h", "--scheduler", "baseline",
                 "--out", str(tmp_path / "replay")])
    assert code == 0
    said = capsys.readouterr().out
    assert "warning" not in said.lower(), said
