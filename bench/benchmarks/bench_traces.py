"""asv benchmarks on recorded traces: speed and quality side by side.

Each benchmark replays a window of the bundled openb trace (``vecsched.adapters.replay``: Ray's
instance lifecycle on a simulated cloud and clock) once per worker-group set and per
scheduler, in ``setup_cache``, recording the scheduler's input of every tick. Then:

- ``TraceReplay.time_tick`` times the scheduler call proper on the recorded ticks, one tick per
  call, cycling through the window with ONE scheduler object (for the engine,
  ``EngineScheduler.schedule`` on the tick's protobuf request: decode, engine, encode;
  its vocabulary and caches carry over as in production; for the baseline its
  ``build_problem`` and packing). asv's median is the median tick.
- ``TraceQuality.track_node_hours``, ``track_gpu_hours``, ``track_pending_p95_s`` are
  the replay's quality figures (``adapters/replay/metrics.py``), ``track_requeued`` the
  units restarted because their node went (``efficient-consolidate`` stops low-use GPU
  nodes; 0 for the others), ``track_tick_p50_ms`` the median tick as the replay
  measured it.

The schedulers are every registered one of ``BENCHED`` (an efficient mode registered in
``vecsched.adapters.replay.registry.SCHEDULERS`` as "efficient" is picked up with no change
here). Ray's own scheduler is not benchmarked: its decisions, hence its quality
figures, are the engine's (``--check-ray``), and its speed is ``compare_ray.py``'s.

Windows are small so ``asv run --quick`` (bench/smoke.sh, CI) stays short: the last
300 openb pods at 200x arrivals (about 180 ticks; every replay is deterministic).
``TraceReplayGangs`` / ``TraceQualityGangs`` add the seeded gang overlay (``--gangs
0.2``) on the openb groups.
"""
from __future__ import annotations

from . import common  # noqa: F401,I001  (first: puts the repo root on sys.path)

import vecsched.engine as engine
from vecsched.adapters.replay import GangOverlay, Replay, ReplayConfig, SCHEDULERS, Window, load, make
from vecsched.adapters.replay import ForwardingScheduler, TickState
from vecsched.adapters.traces import WORKER_GROUP_SETS

BENCHED = tuple(n for n in ("engine", "baseline", "efficient", "efficient-consolidate")
                if n in SCHEDULERS)
WINDOW = Window(start=None, pods=300, arrival_scale=200.0)
_TIMEOUT = 900


class _Recorder(ForwardingScheduler):
    """Wraps a replay scheduler and keeps every tick's state."""

    def __init__(self, inner):
        super().__init__(inner)
        self.states: list[TickState] = []

    def decide(self, state):
        self.states.append(state)
        return self.inner.decide(state)


def _replay(groups: str, scheduler: str, gangs: float) -> dict:
    trace = load("openb", groups, WINDOW, GangOverlay(gangs, seed=0))
    rec = _Recorder(make(scheduler))
    result = Replay(trace, rec, ReplayConfig(seed=0)).run()
    return {"metrics": result.metrics, "states": rec.states}


def _replay_all(params, gangs: float) -> dict:
    engine.warmup()
    return {(g, s): _replay(g, s, gangs) for g in params[0] for s in params[1]}


PLAIN = (list(WORKER_GROUP_SETS), list(BENCHED))
GANGS = (["openb_nodes"], list(BENCHED))


# asv keeps one cache per setup_cache definition: a speed class and a quality class
# share theirs by sharing the function.
def _plain_cache(self):
    return _replay_all(PLAIN, 0.0)


def _gang_cache(self):
    return _replay_all(GANGS, 0.2)


class TraceReplay:
    """Scheduler time per tick on openb (last 300 pods at 200x arrivals) with each
    bundled worker-group set."""
    params = PLAIN
    param_names = ["groups", "scheduler"]
    timeout = _TIMEOUT
    setup_cache = _plain_cache

    def setup(self, cache, groups, scheduler):
        engine.warmup()
        run = cache[(groups, scheduler)]
        self.sched = make(scheduler)
        self.sched.start(lambda: 0)
        self.inputs = [self.sched.prepare(s) for s in run["states"]]
        self.k = 0
        self.sched.run(self.inputs[0])          # first call: caches and vocabulary warm

    def time_tick(self, cache, groups, scheduler):
        self.sched.run(self.inputs[self.k])
        self.k = (self.k + 1) % len(self.inputs)


class TraceQuality:
    """The same replays' quality (and the median tick as the replay measured it)."""
    params = PLAIN
    param_names = ["groups", "scheduler"]
    timeout = _TIMEOUT
    setup_cache = _plain_cache

    def track_node_hours(self, cache, groups, scheduler):
        return cache[(groups, scheduler)]["metrics"]["node_hours"]
    track_node_hours.unit = "node-hours"

    def track_gpu_hours(self, cache, groups, scheduler):
        return cache[(groups, scheduler)]["metrics"]["gpu_hours"]
    track_gpu_hours.unit = "GPU-hours"

    def track_pending_p95_s(self, cache, groups, scheduler):
        return cache[(groups, scheduler)]["metrics"]["pending_p95_s"]
    track_pending_p95_s.unit = "seconds"

    def track_requeued(self, cache, groups, scheduler):
        return cache[(groups, scheduler)]["metrics"]["requeued"]
    track_requeued.unit = "units"

    def track_tick_p50_ms(self, cache, groups, scheduler):
        return cache[(groups, scheduler)]["metrics"]["tick_p50_ms"]
    track_tick_p50_ms.unit = "ms"


class TraceReplayGangs(TraceReplay):
    """TraceReplay on the openb groups with the seeded gang overlay (share 0.2:
    placement groups of 2-8 bundles, PACK / SPREAD / STRICT_PACK / STRICT_SPREAD)."""
    params = GANGS
    setup_cache = _gang_cache


class TraceQualityGangs(TraceQuality):
    """TraceQuality of the gang-overlay replays."""
    params = GANGS
    setup_cache = _gang_cache
