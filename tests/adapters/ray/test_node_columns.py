"""The columnar node path of build_problem against per-instance readable twins:
which instances become nodes (vecsched.engine.model.build.screen), which resource names get a
column or share a private one (vecsched.engine.model.build.columns.new_names), and the codec's
bulk read of a SchedulingRequest (vecsched.adapters.ray.codec) against its per-instance
NodeSpec form."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from vecsched.engine import ProblemError
from vecsched.engine.model.build.builder import NodeSpec
from vecsched.engine.model.build.columns import new_names
from vecsched.engine.model.dtypes import IMPLICIT_PREFIX, Kind, Status
from vecsched.engine.model.node_columns import FlatMaps, NodeColumns, columns
from vecsched.engine.model.build.screen import screen

from tests.kits.raygen import make_request

SCHEDULABLE = set(Status.SCHEDULABLE)


def screen_ref(nodes, type_index, disabled):
    """One instance at a time: (kept, outdated, extra types, skipped) or the
    field of the first error."""
    kept, outdated, extra, skipped = [], [], [], []
    for i, ns in enumerate(nodes):
        st = ns.status
        if st is None:
            skipped.append((i, "no instance-manager record"))
            continue
        if st not in Status.NAMES or st < 0:
            return f"instances[{i}].status"
        if st not in SCHEDULABLE:
            skipped.append((i, f"status {Status.NAMES[st]} cannot reach RAY_RUNNING"))
            continue
        if ns.kind not in (Kind.UNMANAGED, Kind.HEAD, Kind.WORKER):
            return f"instances[{i}].kind"
        if not isinstance(ns.type, str) or not ns.type:
            return f"instances[{i}].type"
        known = ns.type in type_index
        if st == Status.RAY_RUNNING:
            if ns.total is None:
                skipped.append((i, "RAY_RUNNING without a ray node (stale state)"))
                continue
            out = False
        elif not known and disabled:
            skipped.append((i, f"pending node of unknown type {ns.type!r}"))
            continue
        elif not known and ns.kind == Kind.HEAD:
            skipped.append((i, f"pending head of unknown type {ns.type!r}"))
            continue
        else:
            out = not known
        if not known and ns.type not in extra:
            extra.append(ns.type)
        kept.append(i)
        outdated.append(out)
    return kept, outdated, extra, skipped


def _random_nodes(rng, n, bad):
    types = ["a", "b", "gone", "old"]
    out = []
    for _ in range(n):
        st = rng.choice([None, 0, 1, 2, 3, 4, 5, 5, 5, 6, 7, 8, 9, 10, 11, 14])
        kind = int(rng.choice([Kind.WORKER, Kind.WORKER, Kind.HEAD, Kind.UNMANAGED]))
        total = None if rng.random() < 0.2 else {"CPU": 1.0}
        out.append(NodeSpec(str(rng.choice(types)), None if st is None else int(st), kind,
                            total=total))
    if bad and n:
        i = int(rng.integers(n))
        field = ["status", "kind", "type"][int(rng.integers(3))]
        if field == "status":
            out[i].status = int(rng.choice([-1, 15, 99]))
        else:
            out[i].status = int(rng.choice(sorted(SCHEDULABLE)))
            if field == "kind":
                out[i].kind = 7
            else:
                out[i].type = rng.choice(["", None, 3])
    return out


@pytest.mark.parametrize("seed", range(200))
def test_screen_equals_its_per_instance_twin(seed):
    rng = np.random.default_rng(seed)
    nodes = _random_nodes(rng, int(rng.integers(0, 40)), bad=seed % 4 == 0 and seed > 0)
    type_index = {"a": 0, "b": 1}
    disabled = bool(seed % 2)
    want = screen_ref(nodes, type_index, disabled)
    if isinstance(want, str):
        with pytest.raises(ProblemError) as e:
            screen(NodeColumns.of(nodes), type_index, disabled)
        assert e.value.field == want
        return
    got = screen(NodeColumns.of(nodes), type_index, disabled)
    kept, outdated, extra, skipped = want
    assert got.kept.tolist() == kept
    assert got.outdated.tolist() == outdated
    assert got.extra_types == extra
    assert got.skipped == skipped
    assert got.status.tolist() == [nodes[i].status for i in kept]
    assert got.kind.tolist() == [nodes[i].kind for i in kept]
    names = list(type_index) + extra
    assert [names[t] for t in got.type.tolist()] == [nodes[i].type for i in kept]


def new_names_ref(totals, avails, known):
    """Names first seen node by node (totals, then names only the availability
    has), counted once per node; private: unknown, not GPU, not implicit, and on
    one node only or a placement-group bundle resource."""
    seen = Counter()
    for tot, av in zip(totals, avails):
        seen.update(list(tot) + [k for k in av if k not in tot])
    private = {k for k, c in seen.items()
               if (c == 1 or "_group_" in k) and k not in known and k != "GPU"
               and not k.startswith(IMPLICIT_PREFIX)}
    named = [k for k in seen if k not in known and k not in private]
    most = max([sum(k in private for k in list(t) + [k for k in a if k not in t])
                for t, a in zip(totals, avails)], default=0)
    return named, most


@pytest.mark.parametrize("seed", range(200))
def test_new_names_equals_its_twin(seed):
    rng = np.random.default_rng(seed)
    pool = ["CPU", "GPU", "memory", "shared", f"{IMPLICIT_PREFIX}x", "extra",
            "CPU_group_ab12", "bundle_group_ab12"]          # a group's bundles on many nodes
    totals, avails = [], []
    for j in range(int(rng.integers(0, 12))):
        own = [f"node:10.0.0.{j}"] + ([f"own{j}"] if rng.random() < 0.3 else [])
        if rng.random() < 0.3:
            own += [f"CPU_group_{j % 2}_ab12", f"bundle_group_{j % 2}_ab12"]
        keys = list(rng.permutation(pool[: int(rng.integers(1, len(pool) + 1))])) + own
        tot = {k: 1.0 for k in keys}
        av = {k: 0.5 for k in rng.permutation(keys) if rng.random() < 0.8}
        if rng.random() < 0.2:
            av[f"avonly{j % 3}"] = 1.0               # a name only the availability has
        totals.append(tot)
        avails.append(av)
    known = {"CPU": 0, "memory": 1} if seed % 2 else {}
    tot, av = FlatMaps.of_pair(totals, avails)
    assert tot.keys == [k for m in totals for k in m] and av.keys == [k for m in avails for k in m]
    assert np.array_equal(tot.columns(known), columns(tot.keys, known))
    got = new_names(tot, av, tot.columns(known), av.columns(known))
    assert got == new_names_ref(totals, avails, known)


def test_flat_maps_keep_each_maps_order_and_take_rows():
    maps = [{"b": 1.0, "a": 2.0}, {}, {"c": 3.0}]
    f = FlatMaps.of(maps)
    assert (f.keys, f.vals, f.lens.tolist()) == (["b", "a", "c"], [1.0, 2.0, 3.0], [2, 0, 1])
    g = f.take(np.array([0, 2]))
    assert (g.keys, g.vals, g.lens.tolist()) == (["b", "a", "c"], [1.0, 2.0, 3.0], [2, 1])
    g = f.take(np.array([2]))
    assert (g.keys, g.vals, g.lens.tolist()) == (["c"], [3.0], [1])
    f = FlatMaps.of([{"b": 1.0, "a": 2.0}, {"c": 3.0, "b": 4.0}, {"a": 5.0}])
    assert (f.names, f.kid.tolist()) == (["b", "a", "c"], [0, 1, 2, 0, 1])
    g = f.take(np.array([1, 2]))         # only the keys used, in first-seen order
    assert (g.names, g.kid.tolist(), g.keys) == (["c", "b", "a"], [0, 1, 2], ["c", "b", "a"])
    g = f.take(np.array([1, 2]), shared=True)
    assert (g.names, g.keys) == (["b", "a", "c"], ["c", "b", "a"])


@pytest.mark.parametrize("seed", range(40))
def test_codec_bulk_read_equals_per_instance_specs(seed):
    from ray.autoscaler.v2.schema import AutoscalerInstance

    from vecsched.adapters.ray import codec

    req = make_request(seed)
    if seed % 3 == 0:      # an instance without an instance-manager record
        req.current_instances.insert(seed % (len(req.current_instances) + 1),
                                     AutoscalerInstance(im_instance=None))
    ippr = bool(req.ippr_statuses and req.ippr_specs)
    got = codec._node_columns(req, False)
    want = NodeColumns.of([codec._node_spec(inst, req, False) for inst in req.current_instances])
    for f in ("type", "status", "kind", "idle_ms", "ray_node_id", "launch_hash"):
        assert list(getattr(got, f)) == list(getattr(want, f)), f
    assert got.mapped.tolist() == want.mapped.tolist()
    for f in ("total", "available", "labels"):
        a, b = getattr(got, f), getattr(want, f)
        assert (a.keys, list(a.vals), a.lens.tolist()) == (b.keys, b.vals, b.lens.tolist()), f
    if ippr:
        full = codec._node_columns(req, True)
        assert any(s is not None for s in full.ippr)


@pytest.mark.parametrize("seed", range(60))
def test_wire_read_equals_reading_the_maps(seed):
    """vecsched.adapters.ray.wire (the nodes' bytes) against the protobuf maps read one by
    one, on fresh copies (a copy iterates its maps in another order)."""
    import copy

    from vecsched.adapters.ray import codec
    from vecsched.adapters.ray import wire

    req = copy.deepcopy(make_request(seed, max_nodes=60))
    on = [i.ray_node for i in req.current_instances if i.ray_node is not None]
    got = wire.read(on)
    assert got is not None
    total, avail, labels, idle, dynamic = got
    for flat, field in ((total, "total_resources"), (avail, "available_resources")):
        maps = [getattr(rn, field) for rn in on]
        assert flat.keys == [k for m in maps for k in m], field
        assert flat.vals.tolist() == [m[k] for m in maps for k in m], field
        assert flat.lens.tolist() == [len(m) for m in maps], field
    assert labels.keys == [k for rn in on for k in rn.labels]
    assert labels.vals == [rn.labels[k] for rn in on for k in rn.labels]
    assert idle.dtype == np.int64 and idle.tolist() == [rn.idle_duration_ms for rn in on]
    assert dynamic.tolist() == [len(rn.dynamic_labels) for rn in on]
    insts = list(req.current_instances)
    ims = [i.im_instance for i in insts]
    a = codec._node_columns_of(insts, ims)
    b = codec._node_columns_of(insts, ims, use_wire=False)
    for f in ("total", "available", "labels"):
        x, y = getattr(a, f), getattr(b, f)
        assert (x.keys, list(x.vals), x.lens.tolist()) == (y.keys, y.vals, y.lens.tolist()), f


def test_wire_read_refuses_an_order_it_cannot_vouch_for(monkeypatch):
    from ray.core.generated.autoscaler_pb2 import NodeState

    from vecsched.adapters.ray import wire

    m = NodeState(idle_duration_ms=7)
    for k in ("CPU", "GPU", "memory", "node:1", "zz"):
        m.total_resources[k] = 2.0
    assert wire.read([m]) is not None
    scan = wire._scan
    monkeypatch.setattr(wire, "_scan", lambda *a: _forward(scan(*a)))
    assert wire.read([m]) is None        # entries front to back: not Python's order


def _forward(out):
    """``_scan``'s answer with every map's entries put front to back."""
    ok, cnt, idle, val, mid, hi, both, keys, values = out
    seg = np.concatenate([[0], np.cumsum(cnt.ravel())])

    def flip(a, base: int, segs: range):
        a = a.copy()
        for s in segs:
            lo, up = seg[s] - base, seg[s + 1] - base
            a[lo:up] = a[lo:up][::-1].copy()
        return a

    N = cnt.shape[1]
    maps01, map2 = range(0, 2 * N), range(2 * N, 3 * N)
    return (ok, cnt, idle, flip(val, 0, maps01), mid, hi, (flip(both[0], 0, maps01), *both[1:]),
            (flip(keys[0], hi, map2), *keys[1:]), (flip(values[0], hi, map2), *values[1:]))


def test_wire_read_refuses_bytes_that_do_not_parse(monkeypatch):
    """A message cut short: the scan places nothing and the codec reads the maps
    one by one (``read`` answers None)."""
    from ray.core.generated.autoscaler_pb2 import NodeState

    from vecsched.adapters.ray import wire

    ms = [NodeState(idle_duration_ms=7) for _ in range(3)]
    for j, m in enumerate(ms):
        m.total_resources["CPU"] = float(j + 1)
        m.labels["zone"] = "a"
    assert wire.read(ms) is not None
    monkeypatch.setattr(wire, "_SERIALIZE", lambda m: m.SerializeToString()[:-1])
    assert wire.read(ms) is None


def test_an_error_in_the_scan_thread_is_raised_to_the_caller(monkeypatch):
    from ray.core.generated.autoscaler_pb2 import NodeState

    from vecsched.adapters.ray import wire

    def broken(*a):
        raise MemoryError("scan")

    monkeypatch.setattr(wire, "_scan", broken)
    with pytest.raises(MemoryError, match="scan"):
        wire.read([NodeState(idle_duration_ms=7)])


def test_scans_started_together_answer_as_one_by_one():
    """Several scans in flight at once (two schedulers in one process): each answers
    for its own messages, as when they run one after another."""
    from vecsched.adapters.ray import wire

    ons = [[i.ray_node for i in make_request(seed, max_nodes=60).current_instances
            if i.ray_node is not None] for seed in range(8)]

    def flat(got):
        total, avail, labels, idle, dynamic = got
        return ([(f.keys, list(f.vals), f.lens.tolist()) for f in (total, avail, labels)],
                idle.tolist(), dynamic.tolist())

    alone = [flat(wire.read(on)) for on in ons]
    scans = [wire.start(on) for on in ons]          # all started before any is read
    assert [flat(s.result()) for s in reversed(scans)] == alone[::-1]
