"""The side-car's patch guard and group check as functions (no API server): which
groups are malformed (every field Ray's config reader parses; Ray's reader itself is
the reference where it is called), how a patch is named and addressed with its
group's identity, what a failed guard's re-read decides. The same code against the API stand-in and Ray's provider:
tests/adapters/sim/kube/test_kuberay_guards.py."""
from __future__ import annotations

import pytest

from vecsched.adapters.kuberay.groups import group_problem, split_groups
from vecsched.adapters.kuberay.guard import (GuardRefused, address, name_ops, verdict,
                                             wrong_groups)


def _g(name, replicas=1, lo=0, hi=3, **kw):
    return {"groupName": name, "replicas": replicas, "minReplicas": lo, "maxReplicas": hi,
            "rayStartParams": {"num-cpus": "1"},
            "template": {"spec": {"containers": [{"name": "ray-worker"}]}}, **kw}


HEAD = {"rayStartParams": {"num-cpus": "0"},
        "template": {"spec": {"containers": [{"name": "ray-head"}]}}}


def _cr(*groups, rv="7"):
    return {"metadata": {"name": "rc", "resourceVersion": rv},
            "spec": {"headGroupSpec": HEAD, "workerGroupSpecs": list(groups)}}


def _ident(g, at):
    return [{"op": "test", "path": f"/spec/workerGroupSpecs/{at}/{f}", "value": g[f]}
            for f in ("rayStartParams", "template")]


@pytest.mark.parametrize("group,field", [
    ({"replicas": 1, "minReplicas": 0, "maxReplicas": 3}, "groupName"),
    (_g(""), "groupName"),
    (_g("a", replicas=None), "replicas"),
    (_g("a", replicas=True), "replicas"),              # a bool is not a count
    (_g("a", replicas=-1), "replicas"),
    (_g("a", hi="3"), "maxReplicas"),
    (_g("a", lo=1.0), "minReplicas"),
    (_g("a", numOfHosts=0), "numOfHosts"),
    (_g("a", scaleStrategy=[]), "scaleStrategy"),
    (_g("a", scaleStrategy={"workersToDelete": "pod-1"}), "scaleStrategy.workersToDelete"),
    ("not a group", ""),
])
def test_malformed_groups_are_named_by_field(group, field):
    assert group_problem(group)[0] == field


def test_well_formed_groups_pass_and_the_view_keeps_them_in_order():
    cr = _cr(_g("a"), _g("b", replicas=None), _g("c", numOfHosts=2), _g("a"))
    assert group_problem(_g("x", scaleStrategy={"workersToDelete": []})) is None
    view, problems = split_groups(cr)
    # a name two groups have is neither's: a patch could not tell them apart
    assert [g["groupName"] for g in view["spec"]["workerGroupSpecs"]] == ["c"]
    assert [(p["index"], p["field"]) for p in problems] == [
        (0, "spec.workerGroupSpecs[0].groupName"), (1, "spec.workerGroupSpecs[1].replicas"),
        (3, "spec.workerGroupSpecs[3].groupName")]
    assert "indices [0, 3]" in problems[0]["reason"]
    assert len(cr["spec"]["workerGroupSpecs"]) == 4                # the read is untouched
    same, none = split_groups(_cr(_g("a")))
    assert none == [] and same is not None


def test_patch_named_from_the_view_addressed_in_the_real_object():
    real = _cr(_g("bad", replicas=None), _g("cpu"), _g("gpu"))
    view, _ = split_groups(real)
    ops = [{"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 2},
           {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": ["p"]}}]
    named = name_ops(ops, view)
    assert [(n.group, n.rest) for n in named] == [("gpu", "/replicas"), ("cpu", "/scaleStrategy")]
    body, intended = address(named, real)
    assert body == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "test", "path": "/spec/workerGroupSpecs/2/groupName", "value": "gpu"},
        *_ident(real["spec"]["workerGroupSpecs"][2], 2),
        {"op": "test", "path": "/spec/workerGroupSpecs/1/groupName", "value": "cpu"},
        *_ident(real["spec"]["workerGroupSpecs"][1], 1),
        {"op": "replace", "path": "/spec/workerGroupSpecs/2/replicas", "value": 2},
        {"op": "replace", "path": "/spec/workerGroupSpecs/1/scaleStrategy",
         "value": {"workersToDelete": ["p"]}}]
    assert intended == {2: "gpu", 1: "cpu"}
    with pytest.raises(GuardRefused, match="index 5"):
        name_ops([{"op": "replace", "path": "/spec/workerGroupSpecs/5/replicas", "value": 1}],
                 view)
    with pytest.raises(GuardRefused, match="gpu"):
        address(named, _cr(_g("cpu")))


def test_verdict_retry_on_moves_and_unrelated_changes_refuse_on_touched_changes():
    basis = _cr(_g("cpu", 1), _g("gpu", 0))
    named = name_ops([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas",
                       "value": 2}], basis)
    moved = verdict(named, basis, _cr(_g("gpu", 0), _g("cpu", 1), rv="8"))
    assert moved.retry and moved.moved == {"cpu": (0, 1)}
    other = verdict(named, basis, _cr(_g("cpu", 1), _g("gpu", 5), rv="8"))
    assert other.retry and not other.moved                # gpu is not in the patch
    person = verdict(named, basis, _cr(_g("cpu", 6), _g("gpu", 0), rv="8"))
    assert not person.retry and person.changed == [("cpu", "replicas", 1, 6)]
    gone = verdict(named, basis, _cr(_g("gpu", 0), rv="8"))
    assert not gone.retry and gone.gone == ["cpu"]


def test_wrong_groups_compares_the_meant_group_with_the_result():
    assert wrong_groups({0: "cpu"}, _cr(_g("cpu"), _g("gpu"))) == []
    assert wrong_groups({0: "cpu"}, _cr(_g("gpu"), _g("cpu"))) == [(0, "cpu", "gpu")]
    assert wrong_groups({2: "cpu"}, _cr(_g("cpu"))) == [(2, "cpu", None)]


# ------------------------------------------------------------------ a group's identity

def _tpl(image):
    return {"spec": {"containers": [{"name": "ray-worker", "image": image}]}}


def test_a_repeated_name_is_never_addressed_and_refuses_the_retry():
    """A group with the same name inserted in front between the read and the patch:
    the re-read finds the name twice, so the patch is not re-sent anywhere."""
    basis = _cr(_g("cpu", template=_tpl("a")), _g("gpu"))
    named = name_ops([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas",
                       "value": 3}], basis)
    fresh = _cr(_g("cpu", template=_tpl("copy")), *basis["spec"]["workerGroupSpecs"], rv="8")
    v = verdict(named, basis, fresh)
    assert not v.retry and v.identity == [("cpu", "groupName",
                                           "now the name of the groups at indices [0, 1]")]
    with pytest.raises(GuardRefused, match=r"indices \[0, 1\]"):
        address(named, fresh, basis)


def test_names_swapped_on_unchanged_templates_refuse_the_retry():
    """Two groups with the same counts swap names, templates staying put: by name alone
    the patch would go to the other template; the identity check refuses it."""
    basis = _cr(_g("a", template=_tpl("small")), _g("b", template=_tpl("big")))
    named = name_ops([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas",
                       "value": 2}], basis)
    fresh = _cr(_g("b", template=_tpl("small")), _g("a", template=_tpl("big")), rv="8")
    v = verdict(named, basis, fresh)
    assert not v.retry and v.moved == {"a": (0, 1)}
    assert [(g, f) for g, f, _ in v.identity] == [("a", "template")]
    # the body itself tests the template decided on at the group's index
    body, _ = address(named, basis)
    assert {"op": "test", "path": "/spec/workerGroupSpecs/0/template",
            "value": _tpl("small")} in body


# ------------------------------------------------------------------ what Ray's reader parses

def _no_params(**kw):
    g = _g("x", **kw)
    del g["rayStartParams"]
    return g


def _container(**res):
    return {"spec": {"containers": [{"name": "ray-worker", "resources": res}]}}


@pytest.mark.parametrize("group,field", [
    (_g("x", rayStartParams={"num-cpus": "abc"}), "rayStartParams.num-cpus"),
    (_g("x", rayStartParams={"num-cpus": "1", "num-gpus": "one"}), "rayStartParams.num-gpus"),
    (_g("x", rayStartParams={"num-cpus": "1", "memory": "1Gi"}), "rayStartParams.memory"),
    (_g("x", rayStartParams={"num-cpus": "-2"}), "rayStartParams.num-cpus"),
    (_g("x", rayStartParams={"num-cpus": "1", "num-gpus": float("inf")}),
     "rayStartParams.num-gpus"),                           # was an OverflowError
    (_g("x", rayStartParams={"num-cpus": "1", "resources": '"{\\"pair\\": }"'}),
     "rayStartParams.resources"),
    (_g("x", rayStartParams={"num-cpus": "1", "resources": '"{\\"pair\\": 1.5}"'}),
     "rayStartParams.resources"),
    (_g("x", rayStartParams={"num-cpus": "1", "resources": {"pair": 1}}),
     "rayStartParams.resources"),
    (_g("x", rayStartParams=["--num-cpus=1"]), "rayStartParams"),
    (_g("x", resources={"CPU": "lots"}), "resources.CPU"),
    (_g("x", resources=["CPU"]), "resources"),
    (_g("x", resources={"CPU": "1", "pair": "-1"}), "resources.pair"),
    (_g("x", template=None), "template"),
    ({k: v for k, v in _g("x").items() if k != "template"}, "template"),
    (_g("x", template={"spec": {"containers": []}}), "template.spec.containers"),
    (_g("x", template={"metadata": {}}), "template.spec"),
    (_no_params(template=_container(limits={"cpu": "two"})),
     "template.spec.containers[0].resources.limits.cpu"),
    (_no_params(template=_container(limits={"cpu": "1", "nvidia.com/gpu": "x"})),
     "template.spec.containers[0].resources.limits.nvidia.com/gpu"),
    (_no_params(template=_container(requests="1")),
     "template.spec.containers[0].resources.requests"),
    (_no_params(), "rayStartParams.num-cpus"),              # no CPU count anywhere
    (_g("x", idleTimeoutSeconds="soon"), "idleTimeoutSeconds"),
    (_g("x", priority="high"), "priority"),
    (_g("x", labels={"bad key!": "v"}), "labels"),
])
def test_every_field_rays_config_reader_parses_is_named(group, field):
    pytest.importorskip("ray")          # quantities and labels are checked by Ray's code
    assert group_problem(group)[0] == field


@pytest.mark.parametrize("group", [
    _g("x", rayStartParams={"num-cpus": "2", "resources": '"{\\"pair\\": 1}"'}),
    _no_params(template=_container(limits={"cpu": "500m", "memory": "2Gi"})),
    _g("x", resources={"CPU": "2", "GPU": 1, "pair": "3"}),
    _g("x", idleTimeoutSeconds=30, priority="2", labels={"zone": "a"}),
])
def test_well_formed_fields_pass_and_rays_reader_agrees(group):
    pytest.importorskip("ray")
    from ray.autoscaler._private.kuberay.autoscaling_config import (
        _derive_autoscaling_config_from_ray_cr)
    assert group_problem(group) is None
    cr = dict(_cr(group), metadata={"name": "rc", "namespace": "ns"})
    assert "x" in _derive_autoscaling_config_from_ray_cr(cr)["available_node_types"]


def test_a_bad_group_that_only_rays_reader_catches_is_still_caught(monkeypatch):
    """The catch-all: Ray's own reader runs on every group the named checks pass."""
    pytest.importorskip("ray")
    from vecsched.adapters.kuberay import group_fields
    monkeypatch.setattr(group_fields, "_scalars", lambda g: None)    # a check forgotten
    group_fields._ray_reads.cache_clear()
    field, _, reason = group_problem(_g("x", priority="high"))
    assert field == "" and "Ray's config reader refuses it: ValueError" in reason


def test_a_malformed_head_and_bad_options_are_replaced_in_rays_view():
    cr = _cr(_g("cpu"))
    cr["spec"]["headGroupSpec"] = dict(HEAD, rayStartParams={"num-cpus": "zero"})
    cr["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": "soon", "upscalingMode": "Default"}
    view, problems = split_groups(cr)
    assert [(p["field"], p["action"]) for p in problems] == [
        ("spec.headGroupSpec.rayStartParams.num-cpus", "head_replaced"),
        ("spec.autoscalerOptions.idleTimeoutSeconds", "default")]
    assert view["spec"]["autoscalerOptions"] == {"upscalingMode": "Default"}
    assert [g["groupName"] for g in view["spec"]["workerGroupSpecs"]] == ["cpu"]
    assert cr["spec"]["autoscalerOptions"]["idleTimeoutSeconds"] == "soon"   # untouched


@pytest.mark.parametrize("cr", [None, {"spec": 5}, {"spec": {"workerGroupSpecs": 3}},
                                {"spec": {"workerGroupSpecs": None}}])
def test_an_object_without_a_group_list_has_no_group_names(cr):
    """group_names raised AttributeError / TypeError on such an object (the guard names
    the ops of a patch, and checks a patch's result, with it)."""
    from vecsched.adapters.kuberay.groups import group_names
    assert group_names(cr) == []
