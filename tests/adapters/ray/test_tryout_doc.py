"""docs/ray.md's local try-out stays runnable: its cluster config passes Ray's own
config check and names the fake provider and the head id the start commands export,
its task script compiles, and its stop commands signal the cluster's session only.
(The try-out itself was run by hand here: docs/ray.md gives what it printed.)"""
from __future__ import annotations

import re

import pytest

from tests.kits.paths import REPO

yaml = pytest.importorskip("yaml")
pytest.importorskip("ray")


def _blocks() -> dict:
    doc = (REPO / "docs" / "ray.md").read_text()
    section = doc[doc.index("## Try it locally"):doc.index("## Switching a cluster over")]
    found: dict = {}
    for kind, body in re.findall(r"```(\w*)\n(.*?)```", section, re.S):
        found.setdefault(kind, []).append(body)
    return found


def test_the_tryout_config_passes_rays_check_and_matches_the_start_commands():
    from ray.autoscaler._private.util import validate_config
    blocks = _blocks()
    config = yaml.safe_load(blocks["yaml"][0])
    validate_config(config)
    start, stop = blocks["bash"]
    provider = config["provider"]
    assert provider["module"].endswith("FakeMultiNodeProvider")
    assert f"RAY_CLOUD_INSTANCE_ID={provider['head_node_id']}" in start
    port = provider["gcs_address"].rsplit(":", 1)[1]
    assert f"--port={port}" in start and "--autoscaling-config=cluster.yaml" in start
    assert "setsid ray start --head --block" in start and "RAY_FAKE_CLUSTER=1" in start
    assert f"--port={port}" in stop and 'pkill -TERM -s "$SID"' in stop
    assert "ray stop" not in stop
    compile(blocks["python"][0], "tasks.py", "exec")
    assert f'ray.init(address="127.0.0.1:{port}")' in blocks["python"][0]
