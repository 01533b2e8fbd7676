"""The knobs of the efficient mode, validated once."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

# The default ``tick_budget_s``: a tick of 1,000 nodes with up to 200 bundles in
# placement groups returns within it on the README's machine (docs/efficient.md).
DEFAULT_TICK_BUDGET_S = 0.25


@dataclass(frozen=True)
class EfficientOptions:
    """``prices``: price per node-hour by type name (the worker groups' ``price``);
    used when every configured type has one, else the proxy 1 + ``gpu_weight`` x
    GPUs per node-hour (GPU-hours first, then node-hours).

    ``fill_credit`` in [0, 1]: how much of a new node's room that this tick's
    demand leaves empty counts as used (by the next ticks' demand) when types are
    compared. 1 picks the type whose shape best fits the demand mix (running
    plus pending) however little is pending; 0 judges each node by what this
    tick's demand fills alone, which favours small nodes.

    ``gang_cpsat_bundles``: when the tick's placement groups hold at most this
    many bundles, CP-SAT packs them all at once within
    ``cpsat_dtime`` deterministic seconds (one worker, seed 0: reproducible),
    hinted with the best heuristic packing, and its packing is kept when strictly
    cheaper. 0 turns it off. (Without a budget: about 0.1-1 s of wall time at 50-100
    bundles, up to a few seconds at 200, on the 2-core machine of the README; under
    ``tick_budget_s`` less, or skipped.)

    ``lns_dtime``: after that, a neighbourhood search re-packs the gangs of a few
    least-filled new nodes at a time with CP-SAT (``lns.py``), up to this many
    deterministic seconds in all; 0 turns it off. (Measured without a budget on seeded
    gang ticks, tests/kits/ganggen.py: within 2 % of the optimum at 200 bundles on 18 of
    20 instead of 11, at 100 bundles 58-59 of 60 instead of 56, at ticks of seconds;
    under the default budget far fewer: docs/efficient.md.)

    ``cancel_pending``: QUEUED nodes (launches the cloud was not asked for yet) that
    this tick's plan puts nothing on, and that no placement group of the tick could
    use, are cancelled at once (cause IDLE; the replay counts them as cancelled
    before join). That loses nothing: no boot has started, nothing is billed.

    ``reserve`` (default on): after the tick's demand is placed, room for one more
    unit of each pending plain bundle (no label selector, anti-affinity or per-node
    cap) is kept on what is left, existing nodes first, then a launch (``reserve.py``):
    the next unit of a shape that is arriving finds a node instead of waiting for a
    boot. On by default because the efficient mode's misses were waiting: it packs
    tightly, so an arriving unit found no room where Ray's looser packing had left
    some. Measured on the workload suite, seeds 0-3 (docs/suite.md): with it 31 of 36
    cells meet every target of the efficient mode, without it 20 (pending p50 on the
    GPU-model-constrained mix 0.36-0.80 x Ray's instead of 1.40-1.74 x). What it
    costs: the room is paid in node-hours (mean cost over the better of Ray and FFD
    0.951 instead of 0.945), and on the services workload, where the mode's cost is
    within 0.5 % of FFD's without it, seeds 1-3 end 0.4-1.4 % above FFD's cost and
    1.0-1.6 % above its GPU-hours. On a single tick it is dearer by design (it may
    launch a node no pending unit needs): judge a tick's own placement quality with
    ``reserve=False``.

    ``cancel_booting`` (default off): the same for booting nodes (ALLOCATED,
    RAY_INSTALLING). Off because it costs more waiting than it saves: demand
    that keeps arriving (bursty services, fractional GPU pods) finds the node gone
    and waits for a new one to boot from scratch. Measured on the workload suite
    (bench/suite.py, seed 0, docs/suite.md): on, 9-26 % of launches were cancelled
    while booting; off, none, and pending p50 on the services workload went from
    67 s to 40 s (Ray's: 46 s) at a lower cost than Ray's and FFD's.

    ``keep_gpu_for_gpu``: no new GPU node is launched for demand without GPUs
    while a type without GPUs can take it; existing GPU nodes take such demand
    last.

    ``consolidate`` in [0, 1), opt-in (0: off): on a tick with nothing pending, a
    running GPU node whose GPUs are at most this share in use, and whose running
    work would fit in the free room of one other running node, is terminated
    (cause CONSOLIDATE; ``consolidate.py``), at most ``consolidate_per_tick`` a
    tick. **Its running work is stopped** and must be restarted elsewhere (Ray
    stops the ray node for any termination but an idle one): only for work that
    restarts (tasks with retries, actors with restarts, gang jobs excluded: a
    node hosting placement-group bundles is never chosen).
    ``consolidate_replace`` (opt-in): where no running node has room for a victim's
    work, launch one cheaper node that holds it and drain the victim (``replace.py``;
    measured neutral on the workload suite, docs/consolidation.md).
    ``consolidate_disrupting`` (set per tick by whoever keeps memory across ticks,
    ``EngineScheduler``; None: not known): how many nodes are being disrupted, drained
    or stopped for a cause other than idleness; the disruption budgets count these
    instead of every draining or stopping node (``disruption.py``).
    ``consolidate_order`` (set per tick by a caller that ranks the victims itself; None:
    least used first): node indices in the order they may be victims; a node not in
    it is not one. Every other rule (use, room, budget, opt-outs, windows) still holds.
    ``consolidate_quiet_s`` (0: off): nothing is consolidated until the cluster has had
    nothing pending and no node's use risen for this long (``quiet.py``; kept across
    ticks by ``EngineScheduler``; a caller of ``schedule`` alone gets no quiet window).

    ``gang_pass_work``: how many unit placements the heuristic passes over the
    placement groups may make in all (``gang_place.py``): each pass places every
    unit of the tick once (a bundle, or a merged STRICT_PACK group as one); myopic
    and joint always run, the other three in order of what they add while the total
    stays within this. Deterministic work units, like CP-SAT's: the same tick gets
    the same passes on any machine. The default (12,000) runs all five passes up to
    2,400 units, four up to 3,000, three up to 4,000 and two above (a ``cluster_v2``
    tick of 1,000 groups has 3,900-4,100); what the passes left out cost on seeded
    ticks is in docs/efficient.md, "Pass work".

    ``tick_budget_s`` (default 0.25; None: no budget, the limits above as they are): the
    wall seconds one tick may take on the machine the budget's constants were measured
    on (``budget.py``: the README's 2-core machine, with other jobs on it), spent in
    work units only, so the same input gives the same plan on any machine at any
    load. The heuristics' share is estimated from the tick's size (alive nodes, the
    passes' unit placements); what is left goes to the CP-SAT steps, each solve
    charged its model size and deterministic seconds: the gang packing gets at most
    two thirds of it (not solved when its model alone would spend that,
    ``stats["gang_cpsat_skipped"]``), the neighbourhood search the rest, each re-pack
    started only while affordable. Both are anytime (they keep the best packing found
    so far), and neither exceeds ``cpsat_dtime`` / ``lns_dtime``. Measured with the
    default: 1,000-node ticks with 25-200 bundles return within 0.25 s here, and the
    gang quality is in docs/efficient.md. ``clock`` (a monotonic clock in seconds,
    e.g. ``time.perf_counter``; default None: no guard) adds an opt-in wall-clock
    guard: a CP-SAT step that would start after the budget is spent is skipped, and a
    solve is stopped when the tick's wall time reaches the budget; either is counted
    in the plan's ``stats["budget_guard"]`` (then the plan may depend on the
    machine's speed: the count says so). The heuristic passes are budgeted by
    ``gang_pass_work`` instead, so a very large tick (thousands of nodes or groups)
    can still take longer than the budget.

    OR-Tools: with ``gang_cpsat_bundles`` above 0 (the default) the mode needs CP-SAT
    (the neighbourhood search runs only after it), and constructing the options where
    OR-Tools does not import raises ``SolverUnavailable`` (an ImportError) naming the
    option, rather than planning differently from an install that has it.
    ``gang_cpsat_bundles=0`` plans placement groups by heuristics alone: the same plans
    on every install.
    """
    prices: Optional[Mapping[str, float]] = None
    gpu_weight: float = 1.0
    fill_credit: float = 1.0
    gang_cpsat_bundles: int = 200
    gang_pass_work: int = 12_000
    cpsat_dtime: float = 2.0
    lns_dtime: float = 1.0
    cancel_pending: bool = True
    reserve: bool = True
    cancel_booting: bool = False
    keep_gpu_for_gpu: bool = True
    consolidate: float = 0.0
    consolidate_per_tick: int = 1
    tick_budget_s: Optional[float] = DEFAULT_TICK_BUDGET_S
    clock: Optional[Callable[[], float]] = None
    # ---- consolidation safety: drain deadlines, opt-outs, disruption budgets ----
    drain_deadline_s: float = 600.0
    consolidate_budget: int = 1
    consolidate_budget_pct: float = 0.0
    outdated_budget: int = 0
    outdated_budget_pct: float = 0.0
    consolidate_opt_out_types: tuple = ()
    consolidate_cpu: float = 0.0
    consolidate_after_s: float = 0.0
    consolidate_hold: frozenset = frozenset()
    consolidate_windows: tuple = ()
    consolidate_replace: bool = False
    consolidate_disrupting: Optional[int] = None
    consolidate_order: Optional[tuple] = None
    consolidate_quiet_s: float = 0.0

    def __post_init__(self):
        for name, lo, hi in (("gpu_weight", 0.0, math.inf), ("fill_credit", 0.0, 1.0),
                             ("cpsat_dtime", 0.0, math.inf), ("lns_dtime", 0.0, math.inf)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or not lo <= v <= hi:
                raise ValueError(f"options.{name}: must be a number in [{lo}, {hi}], got {v!r}")
        v = self.consolidate
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
            raise ValueError(f"options.consolidate: must be a number in [0, 1), got {v!r}")
        for name, lo in (("gang_cpsat_bundles", 0), ("gang_pass_work", 0),
                         ("consolidate_per_tick", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"options.{name}: must be an integer >= {lo}, got {v!r}")
        if not isinstance(self.reserve, bool):
            raise ValueError(f"options.reserve: must be True or False, got {self.reserve!r}")
        _check_consolidation_safety(self)
        if self.prices is not None:
            for k, x in dict(self.prices).items():
                if x is None:
                    continue
                if isinstance(x, bool) or not isinstance(x, (int, float)) \
                        or not math.isfinite(x) or x <= 0:
                    raise ValueError(f"options.prices[{k!r}]: must be a number > 0, got {x!r}")
        b = self.tick_budget_s
        if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))
                              or not math.isfinite(b) or b <= 0):
            raise ValueError(f"options.tick_budget_s: must be None or a number > 0, got {b!r}")
        if self.clock is not None and not callable(self.clock):
            raise ValueError(f"options.clock: must be None or a callable returning seconds, "
                             f"got {self.clock!r}")
        self._require_ortools()

    @property
    def uses_cpsat(self) -> bool:
        """Whether the CP-SAT steps (gang packing, then the neighbourhood search) are on."""
        return self.gang_cpsat_bundles > 0

    def _require_ortools(self) -> None:
        if self.uses_cpsat:
            from vecsched.engine.solver.cpsat import require_ortools
            require_ortools(f"the efficient mode (options.gang_cpsat_bundles="
                            f"{self.gang_cpsat_bundles})")


def _check_consolidation_safety(o: EfficientOptions) -> None:
    """The consolidation safety options (a separate block: see the class docstring)."""
    v = o.drain_deadline_s
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"options.drain_deadline_s: must be a finite number >= 0, got {v!r}")
    v = o.consolidate_budget
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"options.consolidate_budget: must be an integer >= 1, got {v!r}")
    v = o.consolidate_budget_pct
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise ValueError(f"options.consolidate_budget_pct: must be a number in [0, 1], "
                         f"got {v!r}")
    v = o.outdated_budget
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"options.outdated_budget: must be an integer >= 0 (0: no limit), "
                         f"got {v!r}")
    v = o.outdated_budget_pct
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise ValueError(f"options.outdated_budget_pct: must be a number in [0, 1] (0: no "
                         f"limit), got {v!r}")
    if not isinstance(o.consolidate_replace, bool):
        raise ValueError(f"options.consolidate_replace: must be True or False, "
                         f"got {o.consolidate_replace!r}")
    v = o.consolidate_cpu
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
        raise ValueError(f"options.consolidate_cpu: must be a number in [0, 1), got {v!r}")
    v = o.consolidate_after_s
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"options.consolidate_after_s: must be a finite number >= 0, "
                         f"got {v!r}")
    if not isinstance(o.consolidate_hold, frozenset) or \
            not all(isinstance(n, int) and n >= 0 for n in o.consolidate_hold):
        raise ValueError(f"options.consolidate_hold: must be a frozenset of node indices, "
                         f"got {o.consolidate_hold!r}")
    for w in o.consolidate_windows if isinstance(o.consolidate_windows, tuple) else [None]:
        if not (isinstance(w, tuple) and len(w) == 2 and all(_minute(x) is not None for x in w)):
            raise ValueError(f"options.consolidate_windows: must be a tuple of (\"HH:MM\", "
                             f"\"HH:MM\") pairs, got {o.consolidate_windows!r}")
    v = o.consolidate_disrupting
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
        raise ValueError(f"options.consolidate_disrupting: must be None or an integer >= 0, "
                         f"got {v!r}")
    v = o.consolidate_order
    if v is not None and (not isinstance(v, tuple) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in v)):
        raise ValueError(f"options.consolidate_order: must be None or a tuple of node "
                         f"indices, got {v!r}")
    v = o.consolidate_quiet_s
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"options.consolidate_quiet_s: must be a finite number >= 0, "
                         f"got {v!r}")
    types = o.consolidate_opt_out_types
    if isinstance(types, str) or not all(isinstance(t, str) for t in types):
        raise ValueError(f"options.consolidate_opt_out_types: must be a tuple of type "
                         f"names, got {types!r}")


def _minute(text) -> Optional[int]:
    """Minutes after midnight of ``"HH:MM"``, None if it is not one."""
    if not isinstance(text, str) or len(text) != 5 or text[2] != ":":
        return None
    h, m = text[:2], text[3:]
    if not (h.isdigit() and m.isdigit()) or int(h) > 23 or int(m) > 59:
        return None
    return int(h) * 60 + int(m)


def in_windows(windows: tuple, minute_of_day: int) -> bool:
    """The minute of the day (UTC) falls in one of the daily windows (none: always)."""
    if not windows:
        return True
    for a, b in windows:
        lo, hi = _minute(a), _minute(b)
        if (lo <= minute_of_day < hi) if lo <= hi else (minute_of_day >= lo or minute_of_day < hi):
            return True
    return False
