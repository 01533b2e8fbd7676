"""A group's identity, a person's write to a group the side-car never wrote, and one
malformed group among good ones: Ray 2.60's own ``KubeRayProvider``, config reader and
``KubernetesHttpApiClient`` against the API and operator stand-ins, with the side-car's
client. What landed where is judged from the stand-in's own record
(``adapters/sim/kube/wire_audit.py``: its request log and write journal), not from the
side-car's ledger.

Races are made deterministic with the stand-in's ``before_next_patch`` hook.
"""
from __future__ import annotations

import copy

import pytest

pytest.importorskip("ray")
from ray.autoscaler._private.kuberay import node_provider as npv  # noqa: E402
from ray.autoscaler._private.kuberay.autoscaling_config import (  # noqa: E402
    AutoscalingConfigProducer)
from ray.autoscaler.v2.instance_manager.config import KubeRayConfigReader  # noqa: E402

from vecsched.adapters.kuberay.sidecar import Ledger, tracking_client  # noqa: E402
from vecsched.adapters.sim.kube import wire_audit  # noqa: E402
from tests.kits.kube_standin import (  # noqa: E402,F401  (fixtures)
    NS, RC, api, certs, live_pods as _pods, operator_of as _op, ray_cluster as _cluster,
    ray_provider as _provider, replicas_of as _replicas, rewrite as _rewrite, settle as _settle,
    tracked_client as _client, worker_group as _group)


def _audit(api, ledger=None):
    return wire_audit.counts(api.audit, api.store.journal, RC,
                             ledger.conflicts if ledger else [])


def _image(group, image):
    g = copy.deepcopy(group)
    g["template"]["spec"]["containers"][0]["image"] = image
    return g


# ------------------------------------------------------------------ a name inserted twice

def _duplicate_insert_launch(api, client):
    """cpu runs 1 pod; a copy of the cpu group (same name and counts, another image) is
    inserted at index 0 between the provider's read and its patch of a launch."""
    st = api.store
    st.create("rayclusters", NS, _cluster(_image(_group("cpu", 1, 0, 3), "ray:2.60"),
                                          _group("gpu", 0, 0, 2)), "kubectl")
    op = _op(api)
    _settle(op)
    prov = _provider(client)
    st.before_next_patch("rayclusters", NS, RC, _rewrite(
        lambda gs: [_image(gs[0], "ray:copy")] + gs))
    prov.launch({"cpu": 2}, "l1")
    errs = prov.poll_errors()
    return prov, errs


def _by_image(api):
    return {g["template"]["spec"]["containers"][0]["image"]: g["replicas"] for g in
            api.store.get("rayclusters", NS, RC)["spec"]["workerGroupSpecs"]
            if g["groupName"] == "cpu"}


def test_duplicate_name_inserted_in_front_gets_no_patch(api):
    client, ledger = _client()
    prov, errs = _duplicate_insert_launch(api, client)
    assert [type(e).__name__ for e in errs] == ["LaunchNodeError"]   # refused, not re-sent
    assert _by_image(api) == {"ray:copy": 1, "ray:2.60": 1}          # neither group scaled
    audit = _audit(api, ledger)
    assert audit["wrong_group_patches"] == 0
    (c,) = [c for c in ledger.conflicts if c["kind"] == "group_identity"]
    assert (c["group"], c["field"], c["writer"]) == ("cpu", "groupName",
                                                     "argocd-application-controller")
    assert "indices [0, 1]" in c["reason"]
    # from now on both groups named cpu are left out of Ray's view and reported
    view = client.get(f"rayclusters/{RC}")
    assert [g["groupName"] for g in view["spec"]["workerGroupSpecs"]] == ["gpu"]
    assert {f["field"] for f in ledger.findings if f["kind"] == "malformed_group"} == {
        "spec.workerGroupSpecs[0].groupName", "spec.workerGroupSpecs[1].groupName"}


def test_duplicate_name_stock_client_patches_the_copy_and_the_audit_sees_it(api):
    """Ray's index-addressed patch lands on the copy inserted at index 0; the stand-in's
    record shows it (same name, another template)."""
    prov, errs = _duplicate_insert_launch(api, None)
    assert errs == [] and _by_image(api) == {"ray:copy": 3, "ray:2.60": 1}
    audit = _audit(api)
    assert audit["wrong_group_patches"] == 1
    (hit,) = audit["detail"]["wrong_group_patches"][0]["hits"]
    assert hit["same_name_other_group"] and hit["index"] == 0


# ------------------------------------------------------------------ names swapped

def _swap_launch(api, client):
    """a (image small) and b (image big), same counts; the provider launches one ``a``
    while a writer swaps their names, templates and counts staying put."""
    st = api.store
    st.create("rayclusters", NS, _cluster(_image(_group("a", 1, 0, 4), "small"),
                                          _image(_group("b", 1, 0, 4), "big")), "kubectl")
    op = _op(api)
    _settle(op)
    prov = _provider(client)

    def swap(gs):
        gs[0]["groupName"], gs[1]["groupName"] = gs[1]["groupName"], gs[0]["groupName"]
        return gs
    st.before_next_patch("rayclusters", NS, RC, _rewrite(swap))
    prov.launch({"a": 1}, "l1")
    return prov.poll_errors()


def _images(api):
    return {g["template"]["spec"]["containers"][0]["image"]: g["replicas"] for g in
            api.store.get("rayclusters", NS, RC)["spec"]["workerGroupSpecs"]}


def test_swapped_names_do_not_move_the_patch_to_the_other_template(api):
    client, ledger = _client()
    errs = _swap_launch(api, client)
    assert [type(e).__name__ for e in errs] == ["LaunchNodeError"]
    assert _images(api) == {"small": 1, "big": 1}
    assert _audit(api, ledger)["wrong_group_patches"] == 0
    (c,) = [c for c in ledger.conflicts if c["kind"] == "group_identity"]
    assert (c["group"], c["field"]) == ("a", "template")


def test_swapped_names_stock_client_patch_is_counted_by_the_audit(api):
    """Ray's index-addressed patch lands at index 0, now named b: the audit counts it."""
    assert _swap_launch(api, None) == []
    assert _images(api) == {"small": 2, "big": 1}
    (w,) = _audit(api)["detail"]["wrong_group_patches"]
    assert [(h["meant"], h["hit"]) for h in w["hits"]] == [("a", "b")]


# ------------------------------------------------------------------ a person's write

def _person_lowers_unwritten_group(api, client):
    """cpu was set to 2 by a person (the side-car never wrote it) and runs 2 pods; the
    side-car reads it; a person sets it to 1; the side-car's next scale request (a gpu
    launch) restores cpu to the 2 pods it observes (Ray 2.60's rule)."""
    st = api.store
    st.create("rayclusters", NS, _cluster(_group("cpu", 2, 0, 4), _group("gpu", 0, 0, 2)),
              "kubectl")
    op = _op(api)
    _settle(op)
    prov = _provider(client)
    prov.get_non_terminated()
    _rewrite(lambda gs: [dict(gs[0], replicas=1), gs[1]], manager="kubectl-edit")(st)
    prov.launch({"gpu": 1}, "l1")
    return prov.poll_errors()


def test_person_write_to_a_group_never_written_is_reported(api):
    client, ledger = _client()
    assert _person_lowers_unwritten_group(api, client) == []
    assert _replicas(api) == {"cpu": 2, "gpu": 1}            # Ray restored it (reported)
    (c,) = [c for c in ledger.conflicts if c["kind"] == "ownership"]
    assert (c["group"], c["autoscaler_wrote"], c["expected"], c["found"], c["writer"]) == (
        "cpu", None, 2, 1, "kubectl-edit")
    audit = _audit(api, ledger)
    assert audit["overwrites"] == 1 and audit["overwrites_unreported"] == 0
    client.get(f"rayclusters/{RC}")                        # reported once, not every read
    assert len([c for c in ledger.conflicts if c["kind"] == "ownership"]) == 1


def test_person_write_overwrite_counted_from_the_stand_in(api):
    """The same with Ray's stock client: the audit sees the overwrite, nobody reported
    it."""
    _person_lowers_unwritten_group(api, None)
    audit = _audit(api)
    assert audit["overwrites"] == 1 and audit["overwrites_unreported"] == 1
    (w,) = audit["detail"]["foreign_writes"]
    assert (w["writer"], w["group"], w["from"], w["to"], w["autoscaler_value"]) == (
        "kubectl-edit", "cpu", 2, 1, 2)


def test_the_first_read_sets_the_expectation_and_reports_nothing(api):
    api.store.create("rayclusters", NS, _cluster(_group("cpu", 2, 0, 4)), "kubectl")
    client, ledger = _client()
    client.get(f"rayclusters/{RC}")
    client.get(f"rayclusters/{RC}")
    assert ledger.conflicts == []


# ------------------------------------------------------------------ one malformed group

def _bad(field_edit):
    g = _group("bad", 0, 0, 2)
    field_edit(g)
    return g


def _no_cpu_param(g):
    del g["rayStartParams"]["num-cpus"]


MALFORMED = {
    "num-cpus abc": lambda g: g["rayStartParams"].update({"num-cpus": "abc"}),
    "resources JSON": lambda g: g["rayStartParams"].update({"resources": '"{\\"x\\": }"'}),
    "no template": lambda g: g.pop("template"),
    "empty containers": lambda g: g["template"]["spec"].update(containers=[]),
    "cpu limit two": lambda g: (_no_cpu_param(g), g["template"]["spec"]["containers"][0]
                                .update(resources={"limits": {"cpu": "two"}})),
    "idleTimeoutSeconds soon": lambda g: g.update(idleTimeoutSeconds="soon"),
    "rayStartParams list": lambda g: g.update(rayStartParams=["--num-cpus=1"]),
    "group resources": lambda g: g.update(resources={"CPU": "many"}),
}


def _reader(client_cls, monkeypatch):
    """Ray's v2 KubeRay config reader, reading through ``client_cls`` (as the side-car
    swaps it in: ``sidecar.prepare``)."""
    monkeypatch.setattr(npv, "KubernetesHttpApiClient", client_cls)
    return KubeRayConfigReader(AutoscalingConfigProducer(RC, NS))


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_one_malformed_group_is_skipped_and_the_good_group_gets_its_patch(
        api, monkeypatch, case):
    api.store.create("rayclusters", NS, _cluster(_bad(MALFORMED[case]),
                                                 _group("cpu", 0, 0, 3)), "kubectl")
    ledger = Ledger(None)
    cls = tracking_client(npv.KubernetesHttpApiClient, ledger)
    reader = _reader(cls, monkeypatch)                    # Ray's reader starts: no error
    types = reader.get_cached_autoscaling_config().get_node_type_configs()
    assert set(types) == {"headgroup", "cpu"}
    prov = _provider(cls(NS))
    prov.launch({"cpu": 2}, "l1")                          # demand for the good group
    assert prov.poll_errors() == []
    _settle(_op(api))
    assert len(_pods(api, "cpu")) == 2
    (f,) = [f for f in ledger.findings if f["kind"] == "malformed_group"]
    assert f["group"] == "bad" and f["field"].startswith("spec.workerGroupSpecs[0]")
    assert f["action"] == "skipped"
    reader.refresh_cached_autoscaling_config()             # every tick, still fine
    assert len([f for f in ledger.findings if f["kind"] == "malformed_group"]) == 1


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_one_malformed_group_stock_reader_fails_every_tick(api, monkeypatch, case):
    api.store.create("rayclusters", NS, _cluster(_bad(MALFORMED[case]),
                                                 _group("cpu", 0, 0, 3)), "kubectl")
    with pytest.raises(Exception):
        _reader(npv.KubernetesHttpApiClient, monkeypatch)


def test_a_malformed_head_and_options_do_not_stop_the_workers(api, monkeypatch):
    cr = _cluster(_group("cpu", 0, 0, 3))
    cr["spec"]["headGroupSpec"]["rayStartParams"] = ["--num-cpus=0"]
    cr["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": "soon"}
    api.store.create("rayclusters", NS, cr, "kubectl")
    ledger = Ledger(None)
    reader = _reader(tracking_client(npv.KubernetesHttpApiClient, ledger), monkeypatch)
    cfg = reader.get_cached_autoscaling_config()
    assert set(cfg.get_node_type_configs()) == {"headgroup", "cpu"}
    assert cfg.get_idle_timeout_s() == 60.0                        # Ray's default
    assert {(f["field"], f["action"]) for f in ledger.findings} == {
        ("spec.headGroupSpec.rayStartParams", "head_replaced"),
        ("spec.autoscalerOptions.idleTimeoutSeconds", "default")}
