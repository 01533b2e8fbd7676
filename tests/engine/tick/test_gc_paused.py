"""engine.schedule pauses the cyclic garbage collector for the tick and gives it back
as it found it, also when the tick fails."""
from __future__ import annotations

import gc
import importlib

import pytest

from bench.benchmarks import common
from vecsched.engine import schedule

sched_mod = importlib.import_module("vecsched.engine.schedule")   # the module, not the function


def test_collector_paused_during_the_tick_and_restored(monkeypatch):
    p = common.engine_problem(common.cluster_v2(nodes=20, units=40, gangs=4))
    real, during = sched_mod.run, []

    def spy(*a, **k):
        during.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setattr(sched_mod, "run", spy)
    was = gc.isenabled()
    try:
        gc.enable()
        for mode in ("ray-compat", "efficient"):
            schedule(p, mode=mode)
            assert gc.isenabled()
        gc.disable()
        schedule(p)
        assert not gc.isenabled()            # left off when the caller had it off
        gc.enable()

        def boom(*a, **k):
            during.append(gc.isenabled())
            raise RuntimeError("tick failed")

        monkeypatch.setattr(sched_mod, "run", boom)
        with pytest.raises(RuntimeError):
            schedule(p)
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert during == [False] * 4
