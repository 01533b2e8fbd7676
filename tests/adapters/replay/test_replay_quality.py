"""Engine (Ray 2.60's decisions, through EngineScheduler) against the first-fit-decreasing
baseline on fixed windows of the bundled traces: their replay figures asserted against
each other, not only each one's legality.

Measured ratios engine / baseline on these windows (this commit, deterministic):

| window                              | node-hours | GPU-hours | pending p95 |
|-------------------------------------|-----------:|----------:|------------:|
| openb last 300 x200, openb groups   | 1.68       | 1.12      | 1.30        |
| openb last 300 x200, pai2020 groups | 1.04       | 1.04      | 1.00        |
| openb last 300 x200, spot2026 groups| 0.23       | 1.53      | 0.33        |
| openb rows 3000.. 500 x200          | 2.42       | 1.16      | 1.06        |
| openb rows 1000.. 500 x100          | 3.52       | 1.36      | 1.24        |
| openb_gpuspec33 last 500 x200       | 0.87       | 1.16      | 0.84        |
| openb last 500 x200, --gangs 0.2    | 1.80       | 1.14      | 1.14        |
| openb last 2,000 x200 (the default) | 2.08       | 1.09      | 1.10        |

The bounds, and why:

- **Demand (both ways, exact).** Both schedulers place every placeable unit by the end
  of the tail (``still_pending == 0``) and call the same units infeasible: neither may
  strand demand the other serves. The engine never places fewer units.
- **What the baseline must never beat** (the engine may lose, by at most): pending p95
  1.5x (measured at most 1.30x: Ray launches for the demand it sees each tick, while
  FFD packs larger shapes first and reuses what it opened), GPU-hours 1.75x (at most
  1.53x: Ray's utilisation score takes the best-fitting GPU type, not the fewest GPUs),
  node-hours 4.5x (at most 3.52x on openb rows 1000.. at 100x, 2.08x on the default:
  Ray's known over-provisioning - one best-scoring node per request shape and tick, GPU
  avoidance sending CPU pods to CPU types - which the efficient mode targets).
  Past these, the replay or the engine has regressed, not Ray.
- **What the engine must never lose**: demand (above), and where FFD's type rule (the
  first configured type that holds a unit, by name) misfires - on the spot2026 groups
  it opens a small node for nearly every pod (221 launches for 300 pods) - the engine
  must stay at most half the baseline's node-hours and half its pending p95 (measured
  0.23x / 0.33x).
- **Drift.** Those bounds are the story; they are wide, and a regression that keeps
  idle nodes alive or doubles every launch moves the figures by only 5-25 %. So each
  window's ratios must also stay within 10 % of the table above (``RECORDED``). Every
  replay is deterministic and the engine decides exactly as Ray, so a ratio moves only
  when the replay model, Ray's decisions or the baseline change: re-measure, restate
  the table and check the bounds' reasons when that is meant.
"""
from __future__ import annotations

import pytest

from vecsched.adapters.replay import GangOverlay, Window, load, replay

pytest.importorskip("ray.autoscaler.v2.scheduler",
                    reason="the engine runs through Ray's protobuf interface")

WINDOWS = {
    "openb-300-openb": ("openb", "openb_nodes",
                        Window(start=None, pods=300, arrival_scale=200.0), 0.0),
    "openb-300-pai2020": ("openb", "pai2020_nodes",
                          Window(start=None, pods=300, arrival_scale=200.0), 0.0),
    "openb-300-spot2026": ("openb", "spot2026_nodes",
                           Window(start=None, pods=300, arrival_scale=200.0), 0.0),
    "openb-3000+500": ("openb", "openb_nodes", Window(start=3000, pods=500, arrival_scale=200.0),
                       0.0),
    "openb-1000+500-x100": ("openb", "openb_nodes",
                            Window(start=1000, pods=500, arrival_scale=100.0), 0.0),
    "gpuspec33-500": ("openb_gpuspec33", "openb_nodes",
                      Window(start=None, pods=500, arrival_scale=200.0), 0.0),
    "openb-500-gangs": ("openb", "openb_nodes", Window(start=None, pods=500, arrival_scale=200.0),
                        0.2),
}
SLOW = {"openb-2000-default": ("openb", "openb_nodes",
                               Window(start=None, pods=2000, arrival_scale=200.0), 0.0)}

# engine / baseline may be at most this (the baseline must never beat the engine by more)
MAX_RATIO = {"pending_p95_s": 1.5, "gpu_hours": 1.75, "node_hours": 4.5}
ENGINE_WINS = {"openb-300-spot2026": {"node_hours": 0.5, "pending_p95_s": 0.5}}
# engine / baseline (node-hours, GPU-hours, pending p95) as measured; +-DRIFT allowed
RECORDED = {
    "openb-300-openb": (1.679, 1.122, 1.298),
    "openb-300-pai2020": (1.040, 1.042, 0.995),
    "openb-300-spot2026": (0.228, 1.533, 0.329),
    "openb-3000+500": (2.422, 1.158, 1.059),
    # re-recorded when the raylet stand-in began to keep CPU-only pods off GPU nodes as
    # Ray's raylet does (RAY_scheduler_avoid_gpu_nodes, cluster.py): were 3.614, 1.330, 1.236
    "openb-1000+500-x100": (3.524, 1.360, 1.241),
    "gpuspec33-500": (0.871, 1.156, 0.839),
    "openb-500-gangs": (1.800, 1.140, 1.139),
    "openb-2000-default": (2.084, 1.093, 1.103),   # were 2.018, 1.100, 1.057 (same reason)
}
DRIFT = 0.10

_RUNS: dict = {}


def _both(name: str, spec) -> tuple[dict, dict]:
    if name not in _RUNS:
        trace, groups, window, gangs = spec
        t = load(trace, groups, window, GangOverlay(gangs, seed=0))
        _RUNS[name] = tuple(replay(scheduler=s, loaded=t).metrics for s in ("engine", "baseline"))
    return _RUNS[name]


def check(name: str, spec) -> None:
    e, b = _both(name, spec)
    for m in (e, b):
        assert m["units_in"] == m["placed"] + m["still_pending"] + m["infeasible"]
        assert m["still_pending"] == 0, (name, m["still_pending"])
    assert e["infeasible"] == b["infeasible"] and e["placed"] >= b["placed"]
    for key, hi in MAX_RATIO.items():
        assert e[key] <= hi * b[key], \
            f"{name}: engine {key} {e[key]:.2f} > {hi} x baseline {b[key]:.2f}"
    for key, hi in ENGINE_WINS.get(name, {}).items():
        assert e[key] <= hi * b[key], \
            f"{name}: engine {key} {e[key]:.2f} > {hi} x baseline {b[key]:.2f} (must win)"
    for key, was in zip(("node_hours", "gpu_hours", "pending_p95_s"), RECORDED[name]):
        now = e[key] / b[key]
        assert abs(now / was - 1) <= DRIFT, \
            f"{name}: engine/baseline/ffd {key} {now:.3f}, recorded {was:.3f} (see RECORDED)"


@pytest.mark.parametrize("name", list(WINDOWS))
@pytest.mark.slow
def test_engine_against_baseline(name):
    check(name, WINDOWS[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW))
def test_engine_against_baseline_default_replay(name):
    check(name, SLOW[name])
