"""Trace replay: a recorded trace played through Ray's instance lifecycle on a simulated
cloud and clock, once per scheduler, with the metrics, plots and demo of the main job.

One concept per module:

| module | what it owns |
|---|---|
| ``trace.py`` | loading and checking a trace, the time scaling |
| ``window.py`` | the replayed window: by rows or by time, the arrival scale |
| ``config.py`` | ``ReplayConfig`` (tick, timeouts, launch limits, the simulated cloud), ``DEFAULT_WINDOW`` |
| ``world.py`` | the simulated world: clock, cloud, instance store, cluster, and their sync |
| ``cluster.py`` | the stand-in for Ray's raylets and placement group scheduler |
| ``draining.py`` | consolidation drains with a deadline, on the simulated cloud |
| ``view.py`` | the scheduler's view of a tick (``TickState``), built once per tick |
| ``interface.py`` | ``TickState``, ``Decision`` and ``ReplayScheduler``, the base of every scheduler |
| ``schedulers.py`` | the schedulers (engine through ``EngineScheduler``, baseline, Ray) |
| ``efficient.py`` | the efficient mode's schedulers |
| ``registry.py`` | the schedulers by name (``make``, ``register``) |
| ``simulation.py`` | the driver: ``Replay``'s tick loop (why each step runs where it runs) |
| ``warm_start.py`` | work alive at a time window's start, running at t = 0 |
| ``placement_groups.py`` | placement groups: the trace's own and the seeded ``--gangs`` overlay |
| ``demand_specs.py`` | a tick as the protobuf ``SchedulingRequest`` Ray's reconciler builds |
| ``metrics.py`` | what a replay measures (definitions, ``Metrics`` per tick, ``summarize``) |
| ``accounting.py`` | the instances, from the store and from the simulated cloud, checked |
| ``pending_demand.py`` | units in = placed + still pending + infeasible, pending times |
| ``disruption.py`` | restarts, drains and disruption of running nodes |
| ``cross_check.py`` | ``--cross-check``: placement-group ticks against the CP-SAT optimum |
| ``demo_tick.py`` | ``vecsched demo``'s tick, decided three ways |
| ``report.py`` | the replay's tables, legend and progress lines (rich) |
| ``plots.py``, ``palette.py`` | PNG plots (matplotlib, the ``cli`` extra) and their fixed colours |

The command line (``vecsched demo`` / ``replay``) is ``adapters/cli/replay.py``.

    from vecsched.adapters.replay import replay, Window, GangOverlay
    r = replay(None, "engine", window=Window(start=None, pods=500, arrival_scale=200),
               gangs=GangOverlay(0.2, seed=1), check_ray=True)
    r.metrics["node_hours"], r.check["differing"]

**How a tick flows** (``simulation.py`` says why each step is where it is): the cluster
plays arrivals and completions up to the tick's time; the simulated cloud
(``world.provider``) reports launches, boots, failures and stops; the world syncs the
nodes into the cluster and places work; the instance store reconciles: timeouts, then
the scheduler decides on the tick's one ``TickState`` (``view.TickView``) and its
launches and terminations are applied, then the launch step; the ``Metrics`` record the
applied moves and sample the store. At the end, ``metrics.summarize`` turns the world,
the metrics and the last decision into ``ReplayResult.metrics`` (``summary.json``, the
report's table and the suite's cells read it).

**Where things plug in:**

- *a scheduler*: a ``ReplayScheduler`` subclass (``interface.py``: ``run`` and
  ``decision``; optional hooks ``use_trace``, ``start``, ``after``,
  ``drain_deadline_s``, ``check`` with their defaults) and one ``registry.register``.
- *a per-scheduler metric* (one figure per replay, i.e. per scheduler's column): count it
  per tick in ``Metrics`` (``tick`` samples the store, ``applied`` sees the applied
  moves) or compute it at the end from the world in ``summarize``; add its key to
  ``summarize``'s dict and its one-line definition to ``metrics.DEFINITIONS``; the
  report (``report.py``) and ``bench/suite.py``'s ``CELL_KEYS`` show what they list.
  A figure only the scheduler object knows is handed to ``summarize`` by
  ``Replay.run``, as its ``check`` is.
- *a cloud behaviour* (capacity, stock-outs, spot interruptions): the simulated cloud
  is built in ``World.build`` from ``ReplayConfig`` fields (``adapters/sim/lifecycle``:
  ``SimProvider`` / ``SimCloud``); its answers reach the scheduler only through the
  instance records (ALLOCATION_FAILED, RAY_STOPPED...) in the next tick's view, as in
  Ray; what the cloud counted goes to the summary's ``provider`` (``provider.stats``)
  or an ``instances`` field (``accounting.py``).

Importing this package imports neither matplotlib nor rich.
"""
from .config import DEFAULT_WINDOW, ReplayConfig
from .interface import Decision, ForwardingScheduler, ReplayScheduler, TickState
from .metrics import Metrics, summarize
from .placement_groups import GangOverlay, Gangs
from .registry import NAMES, SCHEDULERS, make, register
from .simulation import Replay, ReplayResult, replay
from .trace import LoadedTrace, Window, load

__all__ = ["DEFAULT_WINDOW", "Decision", "ForwardingScheduler", "GangOverlay", "Gangs",
           "LoadedTrace", "Metrics", "NAMES", "Replay", "ReplayConfig", "ReplayResult",
           "ReplayScheduler", "SCHEDULERS", "TickState", "Window", "load", "make",
           "register", "replay", "summarize"]
