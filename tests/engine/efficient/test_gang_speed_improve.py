"""engine/efficient/improve.py's fallback for selectors that name an anti-affinity key
(masks recomputed before every unit, each unit moved by its own kernel call, the node's
moves undone from a copy when one unit fits nowhere) plans as the batched path does
when the masks cannot change, on gang ticks."""
from __future__ import annotations

import numpy as np

from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient import improve as improve_mod

from tests.kits.efficient_checks import fallback_plans_like_batched
from tests.kits.ganggen import gang_tick

def test_per_unit_fallback_plans_like_the_batched_path(monkeypatch):
    """On gang ticks (the same check on the differential generator's states, with
    selectors: tests/adapters/ray/test_engine_on_ray_states.py)."""
    problems = [gang_tick(s, bundles=40) for s in range(4)]
    assert fallback_plans_like_batched(problems, monkeypatch) > 20    # 136 when written


def test_per_unit_fallback_leaves_the_packing_as_the_kernel_does(monkeypatch):
    """The packing itself after move 1 (free room, labels, contents, live slots),
    both ways, over every pass's packing of the gang ticks: a node whose units do not
    all fit leaves no trace either way."""
    from vecsched.engine.efficient import gang_place as gp
    from vecsched.engine.efficient.cost import Costs
    from vecsched.engine.efficient.state import State
    failed = 0
    for seed in range(6):
        p = gang_tick(seed, bundles=60)
        opts = EfficientOptions(gang_cpsat_bundles=0)
        st, costs = State(p), Costs(p, opts)
        batches = [gp.gang_batch(p, g) for g in range(p.G)]
        for how, largest, tight in gp.PASSES:
            snap = st.snapshot()
            _, place = gp._pass(st, costs, opts, batches, gp.gang_order(p, costs, largest),
                                how, tight)
            st.restore(snap)
            got = []
            for stale in (False, True):
                monkeypatch.setattr(improve_mod, "_selectors_see_anti", lambda p, s=stale: s)
                pk = improve_mod.Packing(st, batches, place)
                improve_mod._empty_new_nodes(pk, costs)
                got.append(pk)
            a, b = got
            assert a.free.tobytes() == b.free.tobytes() and np.array_equal(a.label, b.label)
            assert np.array_equal(a.live, b.live) and a.content == b.content
            failed += int((a.live & a.new).sum())
    assert failed > 0          # some nodes could not be emptied: the undo was exercised


def _merge_pairs_twin(pk, costs, tf, rounds: int = 64) -> None:
    """Move 2 one round at a time: the node arrays and order rebuilt from the packing,
    the first mergeable pair searched (``first_merge``), merged, and again."""
    from tests.kits.merge_reference import first_merge
    for _ in range(rounds):
        slots = pk.new_slots()
        if len(slots) < 2:
            return
        load, ptr, nq, ok, aptr, aids, adup = tf.nodes(pk, slots)
        ntype = pk.type[slots]
        order = np.asarray(sorted(range(len(slots)),
                                  key=lambda j: (-tf.price[ntype[j]], pk.key[slots[j]])), np.int64)
        a, b, t = first_merge(order, ntype, load, ptr, nq, ok, aptr, aids, adup, tf.tsort,
                              tf.price, tf.conf, pk.room, tf.cap_tol)
        if a < 0:
            return
        sa, sb = slots[a], slots[b]
        items = [list(x) for x in pk.content.get(sa, []) + pk.content.get(sb, [])]
        pk.room[pk.type[sa]] += 1
        pk.drop(sb)
        pk.room[t] -= 1
        pk.set_node(sa, int(t), items)
        tf.forget(sa, sb)


def test_merge_rounds_in_one_kernel_merge_as_round_by_round():
    """Move 2 with every round inside ``merge_rounds`` leaves the packing (types,
    free room, labels, contents, live slots, launch room) as the round-by-round twin,
    over every pass's packing of gang ticks and cluster_v2 problems, with some merges
    made (and with a round cap that stops it early)."""
    from vecsched.engine.efficient import gang_place as gp
    from vecsched.engine.efficient.cost import Costs
    from vecsched.engine.efficient.state import State

    from bench.benchmarks.common import cached_problem_v2
    problems = [gang_tick(s, bundles=60) for s in range(4)]
    problems += [cached_problem_v2(nodes=200, units=1000, shapes=20, gangs=60, seed=s)
                 for s in range(2)]
    merged = 0
    for p in problems:
        opts = EfficientOptions(gang_cpsat_bundles=0)
        st, costs = State(p), Costs(p, opts)
        batches = [gp.gang_batch(p, g) for g in range(p.G)]
        for how, largest, tight in gp.PASSES:
            snap = st.snapshot()
            _, place = gp._pass(st, costs, opts, batches, gp.gang_order(p, costs, largest),
                                how, tight)
            st.restore(snap)
            for rounds in (64, 2):
                got = []
                for fn in (improve_mod._merge_pairs, _merge_pairs_twin):
                    pk = improve_mod.Packing(st, batches, place)
                    improve_mod._empty_new_nodes(pk, costs)
                    before = int(pk.live.sum())
                    fn(pk, costs, improve_mod._TypeFit(pk, costs), rounds)
                    got.append((pk, before - int(pk.live.sum())))
                (a, na), (b, nb) = got
                assert na == nb and na <= rounds
                assert np.array_equal(a.type, b.type) and np.array_equal(a.live, b.live)
                assert a.free.tobytes() == b.free.tobytes() and np.array_equal(a.label, b.label)
                assert a.content == b.content and np.array_equal(a.room, b.room)
                merged += na
    assert merged > 0
