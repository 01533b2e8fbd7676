"""``vecsched explain`` on every kind of malformed dump (tests/kits/malformed_dumps.py):
one ``error:`` line naming the file and, inside it, the bad field; exit 2; no
traceback. And the sample it writes (--write-sample) explains every kind of answer."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("ray")

from vecsched.adapters.cli.main import main  # noqa: E402
from vecsched.adapters.ray.explain_sample import write_sample  # noqa: E402

from tests.kits.malformed_dumps import MALFORMED  # noqa: E402

# where each kind's error line must point (besides the file)
WHERE = {
    "missing b64": "request.resource_requests[0]: a @pb value lacks its 'b64' field",
    "bad base64": "request.resource_requests[0]: b64 of a ray.rpc.autoscaler."
                  "ResourceRequestByCount is not base64",
    "random bytes as a message": "request.resource_requests[0]: b64 does not hold",
    "NaN timeout": "request.idle_timeout_s: must be a finite number >= 0, got nan",
    "NaN resource quantity": "request.resource_requests[0].resources_bundle['CPU']",
    "huge count": "request.resource_requests[0].count: is too large",
    "huge max workers": "node_type_configs['cpu-small'].max_worker_nodes: is too large",
    "negative max workers": "request.node_type_configs['cpu-small']",
    "wrong type: a row is a string": "request.resource_requests[0]: expected a "
                                     "ResourceRequestByCount, got str",
    "wrong type: upscaling speed": "context.upscaling_speed: expected a number",
    "class outside ray": "only classes from ray.* modules are loaded",
    "deeply nested JSON": "nested too deeply",
    "wrong type: resource name a number": "request.node_type_configs['cpu-large'].resources: "
                                          "resource name 7 is a int, expected a non-empty "
                                          "string",
    "wrong type: resource quantity a string": "node_type_configs['cpu-large'].resources['CPU']"
                                              ": expected a number, got str",
    "wrong type: label name a number": "request.node_type_configs['cpu-large'].labels: label "
                                       "name 3 is a int",
    "empty file": "not JSON",
    "random bytes": "not JSON",
}


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("sample") / "sample.json"
    write_sample(str(path))
    return json.loads(path.read_text())


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_malformed_dump_is_one_error_line(kind, good, tmp_path, capsys):
    path = tmp_path / "dump.json"
    path.write_bytes(MALFORMED[kind](good))
    assert main(["explain", str(path)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), lines
    assert "Traceback" not in err and out == ""
    if kind in WHERE:
        assert WHERE[kind] in lines[0], lines[0]


def test_the_sample_explains_every_kind_of_answer(tmp_path, capsys):
    path = tmp_path / "sample.json"
    assert main(["explain", "--write-sample", str(path)]) == 0
    capsys.readouterr()
    assert main(["explain", str(path), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert sorted(u["reason"] for u in res["unplaced"]) == [
        "at_max_workers", "no_label_match", "no_shape"]
    assert sorted(g["reason"] for g in res["groups"]) == [
        "at_max", "held_by_upscaling_speed", "idle_kept_by_min",
        "not_idle_without_resources", "not_running_yet"]
    assert res["summary"]["launch"] == {"cpu-large": 10}


def test_large_dump_report_is_limited_and_counts_by_reason(tmp_path, capsys):
    path = tmp_path / "big.json"
    write_sample(str(path), rows=400)
    assert main(["explain", str(path), "--json"]) == 0
    n = len(json.loads(capsys.readouterr().out)["unplaced"])
    assert n > 300
    assert main(["explain", str(path), "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert f"Unplaced requests (5 of {n} rows)" in out
    assert f"{n - 5} more rows not shown" in out
    assert "Unplaced requests by reason" in out
    assert any(line.split() == ["│", "all", "│", f"{n:,}", "│"] + line.split()[5:]
               for line in out.splitlines()), out


def test_write_sample_needs_no_path(tmp_path, capsys, monkeypatch):
    """The README's `explain --write-sample`, as typed: a sample in the current folder."""
    monkeypatch.chdir(tmp_path)
    assert main(["explain", "--write-sample"]) == 0
    assert capsys.readouterr().out.strip() == ("wrote explain-sample.json; explain it with: "
                                               "vecsched explain explain-sample.json")
    assert main(["explain", "explain-sample.json"]) == 0


def test_write_sample_refuses_a_directory(tmp_path, capsys):
    assert main(["explain", "--write-sample", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: --write-sample {tmp_path}: is a directory"


def _sample_with(change):
    from vecsched.adapters.ray.explain_sample import sample_request
    req = sample_request()
    change(req)
    return req


def _rbc(bundle, count=1):
    from ray.core.generated.autoscaler_pb2 import ResourceRequest, ResourceRequestByCount
    return ResourceRequestByCount(request=ResourceRequest(resources_bundle=bundle), count=count)


def _add_running(req, total):
    from vecsched.adapters.ray.explain_sample import _running
    req.current_instances.append(_running("odd", "cpu-small", total))


def _add_pending(req, group):
    from ray.core.generated.instance_manager_pb2 import Instance
    from vecsched.adapters.ray.explain_sample import _pending
    req.current_instances.append(_pending("odd", group, Instance.REQUESTED))


def _add_gang(req):
    from ray.core.generated.autoscaler_pb2 import GangResourceRequest
    req.gang_resource_requests.append(GangResourceRequest(details="zz:PACK:PENDING"))


# well-formed dumps whose values the engine refuses, named by field
REFUSED = {
    "negative total": (lambda r: _add_running(r, {"CPU": -4.0}),
                       "request.instances[8].total_resources['CPU']: quantity is negative"),
    "negative quantity": (lambda r: r.resource_requests.append(_rbc({"CPU": -1.0})),
                          "request.resource_requests[4].resources_bundle['CPU']: quantity is "
                          "negative"),
    "infinite quantity": (lambda r: r.resource_requests.append(_rbc({"CPU": float("inf")})),
                          "quantity is too large (inf)"),
    "negative count": (lambda r: r.resource_requests.append(_rbc({"CPU": 1.0}, -2)),
                       "request.resource_requests[4].count: is negative (-2)"),
    "no worker groups": (lambda r: setattr(r, "node_type_configs", {}),
                         "request.node_type_configs: is empty"),
}
# odd but valid: explained
ODD = {
    "instance of an unknown group": lambda r: _add_pending(r, "no-such-group"),
    "empty bundle": lambda r: r.resource_requests.append(_rbc({}, 3)),
    "placement group without bundles": _add_gang,
    "no instances": lambda r: setattr(r, "current_instances", []),
}


@pytest.mark.parametrize("kind", list(REFUSED))
def test_values_the_engine_refuses_are_one_error_line(kind, tmp_path, capsys):
    from vecsched.adapters.ray.dump import dump_request
    change, fragment = REFUSED[kind]
    path = dump_request(_sample_with(change), str(tmp_path / "d.json"))
    assert main(["explain", path]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and fragment in lines[0]


@pytest.mark.parametrize("kind", list(ODD))
def test_odd_but_valid_dumps_are_explained(kind, tmp_path, capsys):
    from vecsched.adapters.ray.dump import dump_request
    path = dump_request(_sample_with(ODD[kind]), str(tmp_path / "d.json"))
    assert main(["explain", path, "--json"]) == 0
    assert "summary" in json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_same_dump_same_explanation_in_every_process(tmp_path):
    """Protobuf iterates maps in an order that may change between processes; the
    explanation of one dump must not (shapes are listed by resource name)."""
    import subprocess
    import sys

    from tests.kits.paths import REPO
    path = write_sample(str(tmp_path / "d.json"), rows=400)
    outs = {subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "explain",
                            path, "--json"], cwd=REPO, capture_output=True, text=True,
                           timeout=300, check=True).stdout for _ in range(4)}
    assert len(outs) == 1
