"""`vecsched explain`: the right reason for each row of the diagnosis table it covers,
read from the engine's own decision data, on hand-built requests; and the request dump
(`vecsched.adapters.ray.dump_request` / `load_request`) round trip."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("ray")
from ray.core.generated.common_pb2 import LabelSelectorOperator  # noqa: E402
from ray.core.generated.instance_manager_pb2 import Instance  # noqa: E402

from vecsched.adapters.ray import dump_request, load_request  # noqa: E402
from vecsched.adapters.ray.dump import load_dump  # noqa: E402
from vecsched.adapters.ray.explain import explain  # noqa: E402
from tests.kits.semantics_kit import cfg, gang, pending, request, rr, running, selector  # noqa: E402

IN = LabelSelectorOperator.LABEL_OPERATOR_IN
HEAD = running("head", "head", {"CPU": 0.0}, head=True)
KUBERAY = {"source": "kuberay", "upscaling_speed": 1000, "max_concurrent_launches": 10}


def _busy(i, t="cpu", cpu=4.0):
    return running(f"{t}{i}", t, {"CPU": cpu}, {"CPU": 0.0})


def _reasons(res, key="unplaced"):
    return [r["reason"] for r in res[key]]


def test_no_group_has_the_shape_names_the_largest_offer():
    req = request([cfg("head", {"CPU": 0}, 0, 0), cfg("cpu", {"CPU": 4}),
                   cfg("gpu", {"CPU": 8, "GPU": 4})], [HEAD], [rr({"GPU": 8}, 2)])
    res = explain(req, KUBERAY)
    (u,) = res["unplaced"]
    assert u["reason"] == "no_shape" and u["count"] == 2
    assert "GPU 8: the most any group offers is 4 (gpu)" in u["why"]
    assert res["groups"] == []


def test_no_single_group_has_all_of_it():
    req = request([cfg("cpu", {"CPU": 16}), cfg("gpu", {"CPU": 2, "GPU": 4})], [],
                  [rr({"CPU": 8, "GPU": 1})])
    (u,) = explain(req)["unplaced"]
    assert u["reason"] == "no_shape" and "no single group has all of it" in u["why"]


def test_group_at_max_replicas():
    req = request([cfg("cpu", {"CPU": 4}, 0, 2)], [_busy(0), _busy(1)], [rr({"CPU": 2}, 3)])
    res = explain(req, KUBERAY)
    (u,) = res["unplaced"]
    assert u["reason"] == "at_max_workers" and u["count"] == 3
    assert "maxReplicas: cpu (2/2)" in u["why"]
    assert [(g["group"], g["reason"]) for g in res["groups"]] == [("cpu", "at_max")]
    assert "maxReplicas" in res["groups"][0]["why"]
    # without the KubeRay context the same limit is named as Ray's config names it
    assert "max_workers 2" in explain(req)["groups"][0]["why"]


def test_cluster_at_max_num_nodes():
    req = request([cfg("cpu", {"CPU": 4}, 0, 10)], [_busy(0), _busy(1)], [rr({"CPU": 4})],
                  max_num_nodes=2)
    (u,) = explain(req)["unplaced"]
    assert u["reason"] == "at_max_num_nodes" and "max_num_nodes (2 nodes)" in u["why"]


def test_label_selector_matches_no_group():
    req = request([cfg("a", {"CPU": 4}, labels={"zone": "a"}),
                   cfg("b", {"CPU": 4}, labels={"zone": "b"})], [],
                  [rr({"CPU": 1}, selectors=[selector(("zone", IN, ["c"]))])])
    (u,) = explain(req)["unplaced"]
    assert u["reason"] == "no_label_match"
    assert "zone in ['c']" in u["why"] and u["label_selector"] == "zone in ['c']"


def test_held_back_by_upscaling_speed_conservative():
    ctx = dict(KUBERAY, upscaling_speed=1, upscaling_mode="Conservative")
    req = request([cfg("cpu", {"CPU": 4}, 0, 10)], [_busy(0)], [rr({"CPU": 4}, 4)])
    res = explain(req, ctx)
    assert res["unplaced"] == [] and res["summary"]["launch"] == {"cpu": 4}
    (g,) = res["groups"]
    assert g["reason"] == "held_by_upscaling_speed"
    assert g["why"].startswith("3 of 4 decided node(s) wait") and "Conservative" in g["why"]
    # KubeRay's Default mode (speed 1000) holds nothing back
    assert explain(req, KUBERAY)["groups"] == []


def test_held_back_by_the_concurrent_launch_limit():
    ctx = dict(KUBERAY, max_concurrent_launches=2)
    inflight = [pending(f"r{i}", "cpu", Instance.REQUESTED) for i in range(2)]
    req = request([cfg("cpu", {"CPU": 4}, 0, 10)], [_busy(0), *inflight],
                  [rr({"CPU": 4}, 5)])
    res = explain(req, ctx)
    held = [g for g in res["groups"] if g["reason"].startswith("held")]
    assert [g["reason"] for g in held] == ["held_by_concurrent_launches"]
    assert "AUTOSCALER_MAX_CONCURRENT_LAUNCHES = 2" in held[0]["why"]
    assert "not_running_yet" in _reasons(res, "groups")      # the two REQUESTED pods


def test_queued_instances_from_earlier_ticks_are_held_back_too():
    ctx = dict(KUBERAY, upscaling_speed=1)
    queued = [pending(f"q{i}", "cpu", Instance.QUEUED) for i in range(3)]
    req = request([cfg("cpu", {"CPU": 4}, 0, 10)], [_busy(0), *queued], [])
    (g,) = explain(req, ctx)["groups"]
    assert g["reason"] == "held_by_upscaling_speed" and g["why"].startswith("2 of 3")


def test_idle_nodes_kept_by_min_workers():
    idle = [running(f"c{i}", "cpu", {"CPU": 4}, idle_ms=600_000) for i in range(3)]
    req = request([cfg("cpu", {"CPU": 4}, 2, 10)], idle, [], idle_timeout_s=60)
    res = explain(req, KUBERAY)
    assert res["summary"]["terminate"] == {"IDLE": 1}
    (g,) = res["groups"]
    assert g["reason"] == "idle_kept_by_min" and g["why"].startswith("2 idle node(s)")
    assert "minReplicas (min_workers 2)" in g["why"]


def test_free_node_that_ray_does_not_count_idle():
    """Work done, node not scaling down: all resources free, idle time 0 (objects)."""
    held = running("c0", "cpu", {"CPU": 4}, idle_ms=0)
    held.ray_node.node_activity.append("Objects in use: 3")
    idle = running("c1", "cpu", {"CPU": 4}, idle_ms=600_000)
    busy = running("c2", "cpu", {"CPU": 4}, {"CPU": 1}, idle_ms=0)
    req = request([cfg("cpu", {"CPU": 4}, 0, 10)], [held, idle, busy], [], idle_timeout_s=60)
    res = explain(req)
    assert res["summary"]["terminate"] == {"IDLE": 1}
    (g,) = res["groups"]
    assert g["reason"] == "not_idle_without_resources" and g["why"].startswith("1 node(s)")
    assert "Objects in use: 3" in g["why"]


def test_pods_created_but_not_running():
    req = request([cfg("cpu", {"CPU": 4}, 0, 10)],
                  [pending("a", "cpu", Instance.ALLOCATED), pending("b", "cpu",
                                                                    Instance.RAY_INSTALLING)],
                  [rr({"CPU": 4}, 2)])
    res = explain(req)
    assert res["unplaced"] == []                 # placed on the two pending nodes
    (g,) = res["groups"]
    assert g["reason"] == "not_running_yet" and g["why"].startswith("2 node(s)")


def test_placement_group_reasons():
    spread = gang("aa01", "STRICT_SPREAD", [{"CPU": 1}] * 3)
    big = gang("bb02", "PACK", [{"CPU": 1}, {"CPU": 64}])
    req = request([cfg("cpu", {"CPU": 4}, 0, 2)], [], [], gangs=[spread, big])
    res = explain(req)
    got = sorted((u["detail"].split(":")[0], u["reason"]) for u in res["unplaced"])
    assert got == [("aa01", "at_max_workers"), ("bb02", "no_shape")]


def test_dump_round_trip_is_lossless_and_decides_the_same(tmp_path):
    from vecsched.adapters.ray.compare import decisions
    from vecsched.adapters.ray.scheduler import EngineScheduler
    from tests.kits.raygen import make_request

    for seed in range(25):
        req = make_request(seed)
        path = dump_request(req, str(tmp_path / f"r{seed}.json"), {"upscaling_speed": 2})
        back = load_request(path)
        assert back == req, seed
        assert [list(i.ray_node.total_resources) if i.ray_node else None
                for i in back.current_instances] is not None
        a = EngineScheduler(None, new_id=lambda: "x", now_ns=lambda: 0,
                            monotonic=lambda: 0.0).schedule(req)
        b = EngineScheduler(None, new_id=lambda: "x", now_ns=lambda: 0,
                            monotonic=lambda: 0.0).schedule(back)
        assert decisions(a) == decisions(b), seed
    assert load_dump(path)["context"] == {"upscaling_speed": 2}
    # the live autoscaler hands over protobuf repeated containers, not lists
    from ray.core.generated.autoscaler_pb2 import ClusterResourceState
    req = make_request(3)
    holder = ClusterResourceState(pending_resource_requests=req.resource_requests)
    req.resource_requests = holder.pending_resource_requests
    assert type(req.resource_requests) is not list
    back = load_request(dump_request(req, str(tmp_path / "live.json")))
    assert list(back.resource_requests) == list(req.resource_requests)


def test_load_refuses_other_files(tmp_path):
    from vecsched.adapters.ray.dump import DumpError
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(DumpError, match="not a dumped SchedulingRequest"):
        load_request(str(bad))
    evil = tmp_path / "y.json"
    evil.write_text(json.dumps({"format": "vecsched-scheduling-request/1",
                                "request": {"@dc": "os:system", "fields": {}}}))
    with pytest.raises(DumpError, match="only classes from ray"):
        load_request(str(evil))


def test_cli_table_and_json(tmp_path):
    req = request([cfg("cpu", {"CPU": 4}, 0, 1)], [_busy(0)], [rr({"CPU": 4}), rr({"GPU": 1})])
    path = dump_request(req, str(tmp_path / "t.json"), KUBERAY)
    out = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "explain", path, "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert sorted(_reasons(data)) == ["at_max_workers", "no_shape"]
    out = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "explain", path],
                         capture_output=True, text=True, timeout=300,
                         env={"COLUMNS": "200", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert "Unplaced requests (2)" in out.stdout and "at_max" in out.stdout


def test_held_back_by_a_limit_from_the_dump_and_the_environment(tmp_path, monkeypatch):
    """Demand a limit held back gets its own reason, with the limit's figures; the
    limits come from the dump's context (what the monitor ran with), else from
    VECSCHED_LIMITS."""
    from tests.kits.gpu_requests import gpu_request
    req = gpu_request(pods=20)
    res = explain(req, {"limits": {"total": {"GPU": 8}}})
    reasons = {u["reason"] for u in res["unplaced"]}
    assert reasons == {"held_back_by_limit"}, res["unplaced"]
    assert "GPU 8 asked of 8" in res["unplaced"][0]["why"]
    assert res["summary"]["limits"]["GPU"]["headroom"] == 0.0
    monkeypatch.setenv("VECSCHED_LIMITS", '{"total": {"GPU": 4}}')
    assert "GPU 4 asked of 4" in explain(req, {})["unplaced"][0]["why"]
    monkeypatch.delenv("VECSCHED_LIMITS")
    assert not explain(req, {})["unplaced"]          # no limit: everything launches


def test_out_of_stock_groups_from_the_dump(tmp_path):
    """The dumping scheduler's held-out groups (its availability memory) reach explain."""
    from tests.kits.gpu_requests import gpu_request
    from vecsched.adapters.ray import EngineScheduler
    from vecsched.adapters.ray.dump import _capacity_context
    req = gpu_request(pods=20, failed=[
        ("g8", Instance.ALLOCATION_FAILED, 999.0, "InsufficientInstanceCapacity"),
        ("g4", Instance.ALLOCATION_TIMEOUT, 999.0, "")])
    s = EngineScheduler(mode="baseline", warm=False, now_ns=lambda: int(1000e9))
    s.schedule(req)
    assert s.last_plan.infeasible_why.tolist() == [6]
    ctx = _capacity_context(s)
    assert ctx == {"engine_mode": "baseline", "held_out": ["g4", "g8"]}
    res = explain(req, ctx)
    assert [u["reason"] for u in res["unplaced"]] == ["out_of_stock"]
    assert "g8, g4" in res["unplaced"][0]["why"]         # in type order
    assert res["unplaced"][0]["count"] == 20               # refused 1 s ago: no probe yet
