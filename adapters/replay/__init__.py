"""Trace replay: a recorded trace played through Ray's instance lifecycle on a simulated
cloud and clock, once per scheduler, with the metrics, plots and demo of the main job.

One concept per module:

| module | what it owns |
|---|---|
| ``trace.py`` | loading and checking a trace, the time scaling |
| ``window.py`` | the replayed window: by rows or by time, the arrival scale |
| ``warm_start.py`` | work alive at a time window's start, running at t = 0 |
| ``placement_groups.py`` | placement groups: the trace's own and the seeded ``--gangs`` overlay |
| ``cluster.py`` | the stand-in for Ray's raylets and placement group scheduler |
| ``schedulers.py`` | the schedulers (engine through ``EngineScheduler``, baseline, Ray) |
| ``efficient.py`` | the efficient mode's schedulers |
| ``registry.py`` | the schedulers by name (``make``, ``register``) |
| ``simulation.py`` | one replay: the tick loop on the simulated clock and cloud |
| ``metrics.py`` | what a replay measures (definitions, cost, launch-limit warnings) |
| ``accounting.py`` | the instances, from the store and from the simulated cloud, checked |
| ``pending_demand.py`` | units in = placed + still pending + infeasible, pending times |
| ``cross_check.py`` | ``--cross-check``: placement-group ticks against the CP-SAT optimum |
| ``demo_tick.py`` | ``vecsched demo``'s tick, decided three ways |
| ``report.py`` | the replay's tables, legend and progress lines (rich) |
| ``plots.py``, ``palette.py`` | PNG plots (matplotlib, the ``cli`` extra) and their fixed colours |

The command line (``vecsched demo`` / ``replay``) is ``adapters/cli/replay.py``.

    from vecsched.adapters.replay import replay, Window, GangOverlay
    r = replay(None, "engine", window=Window(start=None, pods=500, arrival_scale=200),
               gangs=GangOverlay(0.2, seed=1), check_ray=True)
    r.metrics["node_hours"], r.check["differing"]

Importing this package imports neither matplotlib nor rich.
"""
from .placement_groups import GangOverlay, Gangs
from .registry import NAMES, SCHEDULERS, make, register
from .schedulers import Decision, TickState
from .simulation import DEFAULT_WINDOW, Replay, ReplayConfig, ReplayResult, replay
from .trace import LoadedTrace, Window, load

__all__ = ["DEFAULT_WINDOW", "Decision", "GangOverlay", "Gangs", "LoadedTrace", "NAMES",
           "Replay", "ReplayConfig", "ReplayResult", "SCHEDULERS", "TickState", "Window",
           "load", "make", "register", "replay"]
