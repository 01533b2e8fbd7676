"""asv benchmarks of the engine, one class per area (numpy's benchmarks/ style).

Data come from the seeded, append-only generators in ``common.py`` (the synthetic
cluster of docs/ray-semantics.md §12, saturated scenario unless a parameter says
otherwise). Setup builds inputs and warms the numba kernels up; only the call
named by the method is measured. ``Tick`` is the grid without placement groups
(``cluster_v1``); ``TickGangs`` adds 1,000 GCS-encoded placement groups and
``TickLarge`` reaches 30,000 nodes and 1,000,000 pending units (``cluster_v2``);
``TickEfficient`` times the efficient mode on the three rows of its speed targets.
``EndToEnd`` and ``EndToEndTargets`` time ``EngineScheduler.schedule`` on a
protobuf ``SchedulingRequest`` (decode + engine + encode); ``Codec`` times the
decode and the encode on their own.
The CI smoke runs every param once and must stay under 3 minutes.
"""
from __future__ import annotations

import copy
import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from . import common

import vecsched.engine as engine

_SETUP_TIMEOUT = 600


class Tick:
    """One engine tick, ``vecsched.engine.schedule(problem)``, on a pre-built Problem."""
    params = ([1000, 10000], [1000, 100000], [10, 200])
    param_names = ["nodes", "units", "shapes"]
    timeout = _SETUP_TIMEOUT

    def setup(self, nodes, units, shapes):
        engine.warmup()
        self.problem = common.cached_problem(nodes=nodes, units=units, shapes=shapes,
                                             scenario="saturated", seed=0)

    def time_tick(self, nodes, units, shapes):
        engine.schedule(self.problem)


class TickGangs:
    """One engine tick with placement groups: every gang is packed atomically."""
    params = ([1000, 10000], [1000, 100000], [200], [1000])
    param_names = ["nodes", "units", "shapes", "gangs"]
    timeout = _SETUP_TIMEOUT

    def setup(self, nodes, units, shapes, gangs):
        engine.warmup()
        self.problem = common.cached_problem_v2(nodes=nodes, units=units, shapes=shapes,
                                                scenario="saturated", seed=0, gangs=gangs)

    def time_tick(self, nodes, units, shapes, gangs):
        engine.schedule(self.problem)


class TickEfficient:
    """One efficient-mode tick (``mode="efficient"``, default options) on the three
    ``cluster_v2`` rows of its speed targets (nodes / units / groups: 1k / 1k /
    50, 1k / 30k / 0, 10k / 100k / 1,000); ``python -m bench.compare_ray --mode efficient``
    puts the same rows beside ray-compat in one process. Setup runs one untimed tick,
    which compiles (or loads) the mode's kernels and imports OR-Tools."""
    params = ([(1000, 1000, 50), (1000, 30000, 0), (10000, 100000, 1000)],)
    param_names = ["nodes_units_groups"]
    timeout = _SETUP_TIMEOUT

    def setup(self, row):
        nodes, units, gangs = row
        self.problem = common.cached_problem_v2(nodes=nodes, units=units, shapes=20,
                                                scenario="saturated", seed=0, gangs=gangs)
        engine.schedule(self.problem, mode="efficient")

    def time_tick(self, row):
        engine.schedule(self.problem, mode="efficient")


class TickLarge(TickGangs):
    """The largest grid benchmarked: 30,000 nodes and 1,000,000 pending units."""
    params = ([30000], [1000000], [10, 200], [0, 1000])


class TickMemory:
    """Peak RSS of a process that built the Problem and ran one tick."""
    params = ([1000, 10000], [100000], [200])
    param_names = ["nodes", "units", "shapes"]
    timeout = _SETUP_TIMEOUT

    def setup(self, nodes, units, shapes):
        engine.warmup()
        self.problem = common.cached_problem(nodes=nodes, units=units, shapes=shapes,
                                             scenario="saturated", seed=0)

    def peakmem_tick(self, nodes, units, shapes):
        engine.schedule(self.problem)


class EndToEnd:
    """``EngineScheduler.schedule(SchedulingRequest)``: decode + engine + encode, as
    inside Ray's autoscaler (one scheduler object across calls, vocabulary warm)."""
    params = ([1000], [1000, 30000], ["saturated", "fragmented"])
    param_names = ["nodes", "units", "scenario"]
    timeout = _SETUP_TIMEOUT

    def setup(self, nodes, units, scenario):
        from vecsched.adapters.ray import EngineScheduler
        engine.warmup()
        self.request = common.make_request(nodes=nodes, units=units, shapes=20,
                                           scenario=scenario, seed=0)
        self.scheduler = EngineScheduler(new_id=lambda: "id", now_ns=lambda: 0)
        self.scheduler.schedule(self.request)

    def time_end_to_end(self, nodes, units, scenario):
        self.scheduler.schedule(self.request)


class EndToEndTargets:
    """The end-to-end targets' cases through ``EngineScheduler.schedule``: the round
    of ray-project/ray PR #64175 (1,337 nodes, 13,315 pending {CPU: 2} tasks,
    ``cluster_pr64175``) and 1,000 nodes / 1,000 units in 20 shapes with 50 or
    1,000 placement groups (``cluster_v2``). Ray's side is bench/compare_ray.py."""
    params = (["pr64175-saturated", "pr64175-fragmented", "1k-50pg", "1k-1000pg"],)
    param_names = ["case"]
    timeout = _SETUP_TIMEOUT

    def setup(self, case):
        from vecsched.adapters.ray import EngineScheduler
        engine.warmup()
        self.request = _target_request(case)
        self.scheduler = EngineScheduler(new_id=lambda: "id", now_ns=lambda: 0)
        self.scheduler.schedule(self.request)

    def time_end_to_end(self, case):
        self.scheduler.schedule(self.request)


@functools.lru_cache(maxsize=None)
def _target_request(case: str):
    """The SchedulingRequest of an ``EndToEndTargets`` case (built once per process)."""
    if case.startswith("pr64175"):
        spec = common.cluster_pr64175(scenario=case.split("-")[1])
    else:
        spec = common.cluster_v2(nodes=1000, units=1000, shapes=20, scenario="saturated",
                                 seed=0, gangs=int(case.split("-")[1][:-2]))
    return common.scheduling_request(spec)


class Codec:
    """The adapter's codec on its own. ``time_decode``: a fresh copy of the
    request, as every autoscaler tick receives one (a copy is made in setup,
    before each single timed call), with the previous tick's vocabulary and
    decoded placement groups. ``time_encode``: the plan into a SchedulingReply."""
    params = (["1k-50pg", "1k-1000pg", "pr64175-saturated"],)
    param_names = ["case"]
    number = 1
    repeat = 25
    warmup_time = 0
    timeout = _SETUP_TIMEOUT

    def setup(self, case):
        from vecsched.adapters.ray.codec import decode
        engine.warmup()
        req = _target_request(case)
        self.cache = decode(copy.deepcopy(req)).cache      # last tick's groups, as in a loop
        self.fresh = copy.deepcopy(req)
        self.decoded = decode(copy.deepcopy(req), self.cache)
        self.plan = engine.schedule(self.decoded.problem)

    def time_decode(self, case):
        from vecsched.adapters.ray.codec import decode
        decode(self.fresh, self.cache)

    def time_encode(self, case):
        from vecsched.adapters.ray.codec import encode
        encode(self.decoded, self.plan, new_id=lambda: "id", now_ns=lambda: 0)


class Quality:
    """Decisions tracked beside speed: in ray-compat mode they must equal Ray's, so a
    change here is a behaviour change (bench/compare_ray.py checks it against Ray)."""
    params = ([1000], [1000, 100000], ["saturated", "fragmented"])
    param_names = ["nodes", "units", "scenario"]
    timeout = _SETUP_TIMEOUT

    def setup(self, nodes, units, scenario):
        engine.warmup()
        self.plan = engine.schedule(common.cached_problem(
            nodes=nodes, units=units, shapes=20, scenario=scenario, seed=0))

    def track_nodes_launched(self, nodes, units, scenario):
        return self.plan.n_launched
    track_nodes_launched.unit = "nodes"

    def track_nodes_terminated(self, nodes, units, scenario):
        return int(len(self.plan.term_node))
    track_nodes_terminated.unit = "nodes"

    def track_infeasible_units(self, nodes, units, scenario):
        return int(self.plan.infeasible.sum())
    track_infeasible_units.unit = "units"


_WARMUP = "import vecsched.engine, sys; sys.stdout.write(repr(vecsched.engine.warmup()))"


def _warmup_in_subprocess(cache_dir: str) -> float:
    root = str(Path(__file__).resolve().parents[2])      # the repository root
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, PYTHONPATH=path)
    out = subprocess.run([sys.executable, "-c", _WARMUP], env=env, capture_output=True,
                         text=True, timeout=_SETUP_TIMEOUT, cwd=root)
    if out.returncode:
        raise RuntimeError(f"vecsched.engine.warmup() subprocess failed:\n{out.stderr}")
    return float(out.stdout.strip())


class Warmup:
    """``vecsched.engine.warmup()`` seconds in a fresh interpreter: "cold" with an empty numba
    cache (NUMBA_CACHE_DIR = a new temporary directory, i.e. full compilation),
    "warm" on the second start with that cache filled (cache load only)."""
    params = (["cold", "warm"],)
    param_names = ["cache"]
    timeout = _SETUP_TIMEOUT

    def track_warmup_seconds(self, cache):
        with tempfile.TemporaryDirectory(prefix="vecsched-numba-") as d:
            first = _warmup_in_subprocess(d)
            return first if cache == "cold" else _warmup_in_subprocess(d)
    track_warmup_seconds.unit = "seconds"
