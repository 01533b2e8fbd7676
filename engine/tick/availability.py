"""The availability memory: which worker groups the cloud refused lately.

An adapter keeps one ``AvailabilityMemory`` across ticks (``EngineScheduler``, the
trace replay, the KubeRay side-car) and tells it what the cloud answered:

- ``refused(group, at_s, stockout=True)``: a launch of the group stocked out (the
  cloud had no capacity, or a KubeRay pod stayed Pending past its timeout). The
  group is held out for ``ttl_s`` (Karpenter keeps an offering that failed with an
  insufficient-capacity error out of its choices for 3 minutes); a refusal after
  a hold has expired (the retry failed too) doubles the hold (``backoff``), up to
  ``max_ttl_s``. Refusals that arrive while a hold is on (launches asked before the
  hold) neither extend nor escalate it.
- ``refused(group, at_s, stockout=False)``: a launch error that does not say it is
  about capacity. Clouds fail calls for many reasons that say nothing about capacity
  (and Ray's adapter of a node provider drops the cloud's error text: docs/capacity.md),
  so such a group is held out only for ``error_ttl_s`` (30 s: a few ticks), doubled
  on each failed retry like a stock-out; a group that keeps failing is held out
  longer and longer, one that failed once by chance is back soon.
- ``succeeded(group, at_s)``: a launch of the group landed: its escalation starts
  over (an active hold runs out on its own).
- ``observe(live, now_s)``: the instances each group holds this tick (QUEUED to
  running: in flight included), told every tick before the queries below. A group
  that stocked out since the last tick has reached what the cloud gives it: that
  count is its **learned cap** (the least of the counts after each refusal). At
  its cap a group stays out after its hold ends (``unavailable``), so no retry is
  spent on a cloud that already said no, except a probe for a request no other
  group fits; below it (some of its nodes went) it may launch up to the cap
  (``room``) without a probe. The cap is forgotten when the group holds more than
  it (capacity grew: a probe was accepted) and ``cap_ttl_s`` after its last
  refusal (the cloud's capacity moves: one retry then). Launch errors that do not
  name capacity teach no cap.
- ``interrupted(group, at_s)``: a (spot) instance of the group was taken back;
  ``interruptions(now_s)`` counts them over the last ``interruption_window_s``.

``unavailable(now_s)`` is the set of groups held out at ``now_s`` (or at their
learned cap); ``room(now_s)`` the launches a group below its learned cap may make
(group -> count); the efficient
mode and the baseline do not launch them that tick (``vecsched.engine.tick.seam``)
and fall back to the next group that fits. ``probing(now_s)``: groups whose hold
ended without a launch landing since (they launch one node a tick until one lands),
and held groups last refused ``probe_interval_s`` ago (one node, and only for a
request that fits no other group). Ray-compat never reads this memory: it
reads Ray's own availability scores (docs/ray-semantics.md §14).

Pure and deterministic: every time is a number the caller passes (its clock), no
wall clock is read, and the same calls give the same answers.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class AvailabilityOptions:
    """How long refused groups are held out (seconds)."""
    ttl_s: float = 180.0              # Karpenter's unavailable-offerings TTL (3 minutes)
    backoff: float = 2.0              # each failed retry multiplies the hold
    max_ttl_s: float = 1800.0
    error_ttl_s: float = 30.0         # the first hold after a launch error that does not
                                      # name capacity (0: such errors never hold a group)
    interruption_window_s: float = 3600.0
    # What one interruption costs, in hours of the group's price (the work it loses, the
    # new node's boot): the efficient mode prices a group interrupted n times over the
    # window at price x (1 + rate x this), rate = n / (window hours x its running nodes).
    interruption_cost_h: float = 1.0
    # A held group that is some pending request's only fit may launch one node when its
    # last refusal is this old (a probe: capacity may have freed); 0: every tick.
    probe_interval_s: float = 30.0
    # An instance the cloud accepted but left unusable this long (a KubeRay pod Pending
    # for lack of room) counts as a stock-out once; None: only the instance manager's
    # own ALLOCATION_TIMEOUT does. The KubeRay side-car sets 300 s.
    pending_stockout_s: float | None = None
    # How long a learned cap (the instances a group held when it stocked out) is
    # trusted after the group's last refusal; 0: caps are never learned.
    cap_ttl_s: float = 1800.0

    def __post_init__(self):
        for name in ("ttl_s", "backoff", "max_ttl_s", "interruption_window_s",
                     "pending_stockout_s", "interruption_cost_h", "error_ttl_s",
                     "probe_interval_s", "cap_ttl_s"):
            v = getattr(self, name)
            if v is None and name == "pending_stockout_s":
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) \
                    or v < 0:
                raise ValueError(f"availability.{name}: must be a finite number >= 0, got {v!r}")
        if self.backoff < 1:
            raise ValueError(f"availability.backoff: must be >= 1, got {self.backoff!r}")
        for name in ("ttl_s", "error_ttl_s"):       # the first hold is never cut short
            if getattr(self, name) > self.max_ttl_s:
                raise ValueError(f"availability.max_ttl_s: must be >= {name} "
                                 f"({getattr(self, name)!r}), got {self.max_ttl_s!r}")


@dataclass
class _Group:
    until: float = -math.inf          # held out while now < until
    strikes: int = 0                  # holds since the last launch that landed
    last: float = -math.inf           # the last refusal
    interruptions: list = field(default_factory=list)   # times, ascending
    cap: int | None = None            # learned cap (instances it held at a stock-out)
    fresh: bool = False               # stocked out since the last ``observe``
    live: int = 0                     # the instances it held at the last ``observe``
    misses: int = 0                   # refusals in a row while held or at its cap


def live_counts(problem) -> dict:
    """group -> the instances a tick's Problem holds of it (every node of the tick:
    QUEUED to running, in flight included): what ``AvailabilityMemory.observe`` reads."""
    counts = np.bincount(np.asarray(problem.node_type, np.int64), minlength=problem.T)
    return {problem.type_names[t]: int(k) for t, k in enumerate(counts.tolist()) if k}


def _hold(base: float, backoff: float, strikes: int, most: float) -> float:
    """``base x backoff ** (strikes - 1)``, at most ``most``: computed without
    overflowing however many holds a group has had (2.0 ** 1024 is not a float)."""
    n = strikes - 1
    if n <= 0 or backoff == 1 or base >= most:
        return min(base, most)
    if n * math.log(backoff) >= math.log(most / base):
        return most
    return min(base * backoff ** n, most)


class AvailabilityMemory:
    """See the module docstring."""

    def __init__(self, options: AvailabilityOptions | None = None):
        self.options = options or AvailabilityOptions()
        self._groups: dict[str, _Group] = {}
        self.counts = {"stockouts": 0, "launch_failures": 0, "holds": 0, "interruptions": 0}

    def _g(self, group: str) -> _Group:
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group()
        return g

    def refused(self, group: str, at_s: float, *, stockout: bool = True) -> None:
        g = self._g(group)
        o = self.options
        self.counts["stockouts" if stockout else "launch_failures"] += 1
        if at_s > g.last and (at_s < g.until or self._capped(g)):
            g.misses += 1                   # a refused probe (one a time: a batch is one)
        g.last = max(g.last, float(at_s))
        g.fresh |= stockout
        base = o.ttl_s if stockout else o.error_ttl_s
        if base <= 0 or at_s < g.until:
            return                          # never held, or asked before the hold
        g.strikes += 1
        g.until = at_s + _hold(base, o.backoff, g.strikes, o.max_ttl_s)
        self.counts["holds"] += 1

    def succeeded(self, group: str, at_s: float) -> None:
        g = self._groups.get(group)
        if g is not None:
            g.strikes = g.misses = 0

    def observe(self, live, now_s: float) -> None:
        """``live``: group -> the instances it holds now (QUEUED to running); learns
        and forgets caps (module docstring)."""
        ttl = self.options.cap_ttl_s
        for name, g in self._groups.items():
            n = int(live.get(name, 0))
            if g.fresh and ttl > 0:
                g.cap = n if g.cap is None else min(g.cap, n)
            elif g.cap is not None and (n > g.cap or now_s - g.last >= ttl):
                g.cap = None
            g.fresh, g.live = False, n

    def _capped(self, g: _Group) -> bool:
        return g.cap is not None and g.live >= g.cap

    def room(self, now_s: float) -> dict:
        """group -> the launches it may make: groups below a learned cap, not held."""
        return {n: g.cap - g.live for n, g in self._groups.items()
                if g.cap is not None and g.live < g.cap and now_s >= g.until}

    def interrupted(self, group: str, at_s: float) -> None:
        self._g(group).interruptions.append(float(at_s))
        self.counts["interruptions"] += 1

    def unavailable(self, now_s: float) -> frozenset:
        """The groups held out at ``now_s``."""
        return frozenset(n for n, g in self._groups.items()
                         if now_s < g.until or self._capped(g))

    def interruption_prices(self, prices: dict, running: dict, now_s: float) -> dict:
        """``prices`` (group -> price per node-hour) with each group's recent
        interruptions priced in (``AvailabilityOptions.interruption_cost_h``);
        ``running``: group -> its running nodes now."""
        hits = self.interruptions(now_s)
        o = self.options
        if not hits or o.interruption_window_s <= 0:
            return prices
        out = dict(prices)
        hours = o.interruption_window_s / 3600.0
        for g, n in hits.items():
            if g in out and out[g] is not None:
                rate = n / (hours * max(1, running.get(g, 0)))
                out[g] = float(out[g]) * (1.0 + rate * o.interruption_cost_h)
        return out

    def probing(self, now_s: float) -> frozenset:
        """Groups that may launch one node this tick: those whose hold ended with no
        launch of theirs landed since (a retry costs one refusal, not a batch), and
        held ones last refused ``probe_interval_s`` ago (the seam lets them launch
        only for a request no other group fits)."""
        o = self.options
        return frozenset(n for n, g in self._groups.items()
                         if (g.strikes > 0 and g.cap is None and now_s >= g.until)
                         or ((g.strikes > 0 or self._capped(g))
                             and now_s - g.last >= _hold(o.probe_interval_s, o.backoff,
                                                         g.misses + 1,
                                                         max(o.max_ttl_s, o.probe_interval_s))
                             and (now_s < g.until or self._capped(g))))

    def held_until(self, group: str) -> float:
        g = self._groups.get(group)
        return g.until if g is not None else -math.inf

    def interruptions(self, now_s: float) -> dict[str, int]:
        """Interruptions per group over the last ``interruption_window_s`` (older
        ones are forgotten)."""
        lo = now_s - self.options.interruption_window_s
        out = {}
        for n, g in self._groups.items():
            g.interruptions = [t for t in g.interruptions if t > lo]
            if g.interruptions:
                out[n] = len(g.interruptions)
        return out
