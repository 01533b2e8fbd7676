"""The side-car's patch guard and group check as functions (no API server, no Ray):
which groups are malformed, how a patch is named and addressed, what a failed guard's
re-read decides. The same code against the API stand-in and Ray's provider:
tests/adapters/sim/kube/test_kuberay_guards.py."""
from __future__ import annotations

import pytest

from vecsched.adapters.kuberay.groups import group_problem, split_groups
from vecsched.adapters.kuberay.guard import (GuardRefused, address, name_ops, verdict,
                                             wrong_groups)


def _g(name, replicas=1, lo=0, hi=3, **kw):
    return {"groupName": name, "replicas": replicas, "minReplicas": lo, "maxReplicas": hi, **kw}


def _cr(*groups, rv="7"):
    return {"metadata": {"name": "rc", "resourceVersion": rv},
            "spec": {"workerGroupSpecs": list(groups)}}


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
    assert [g["groupName"] for g in view["spec"]["workerGroupSpecs"]] == ["a", "c"]
    assert [(p["index"], p["field"]) for p in problems] == [
        (1, "spec.workerGroupSpecs[1].replicas"), (3, "spec.workerGroupSpecs[3].groupName")]
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
        {"op": "test", "path": "/spec/workerGroupSpecs/1/groupName", "value": "cpu"},
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
