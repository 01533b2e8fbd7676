"""Consolidation drains in a replay: the node takes no new work and stops when its work
ends or its deadline passes; only then is what still runs restarted.

The simulated cloud (``lifecycle.SimProvider``) plays every drain alike: accepted
(RAY_STOP_REQUESTED -> RAY_STOPPING), then RAY_STOPPED after the drain latency, which
for a busy node is stock Ray's outright stop (what RayStopper does for any cause but
IDLE). A termination with cause CONSOLIDATE is a drain with a deadline instead
(``adapters/ray/drain.py`` makes Ray do the same, through the GCS drain request):

- :class:`DrainingProvider` accepts such a drain as usual but does not schedule the
  stop; it keeps the drain (start, deadline) until :class:`Drains` ends it.
- :meth:`Drains.play_until` replaces ``Cluster.play_until`` in a tick: it plays the
  cluster up to each deadline that falls in the tick, and at a deadline a drain whose
  node still runs work is ended: the node leaves the cluster at the deadline (its
  units restart, counted as requeued and lost) and RAY_STOPPED is reported at that
  time. A drained node whose work has ended stops its drain latency after its last
  unit left (or after the drain began, if it was idle).

A draining node is RAY_STOPPING: ``Cluster`` places nothing on it (not placeable)
while what runs on it keeps running. ``deadline_s`` 0 (the scheduler's
``drain_deadline_s``: 0 unless its options give its drains a deadline) leaves every
drain to the provider: the old outright stop.
"""
from __future__ import annotations

from vecsched.engine.model.dtypes import Cause

from vecsched.adapters.sim.lifecycle import SimProvider
from vecsched.adapters.sim.lifecycle.provider import _DRAIN, _STOPPED

NS = 1_000_000_000


class DrainingProvider(SimProvider):
    """A ``SimProvider`` whose CONSOLIDATE drains wait for :class:`Drains` to end them."""

    def __init__(self, *args, deadline_s: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.deadline_ns = int(round(float(deadline_s) * NS))
        self.draining: dict[str, tuple[int, int]] = {}     # instance id -> (start, deadline)

    def _after(self, due: int, kind: int, move) -> None:
        rec = self.store[move.instance_id]
        if kind == _DRAIN and self.deadline_ns > 0 \
                and rec.termination_cause == Cause.CONSOLIDATE:
            self.draining[move.instance_id] = (int(due), int(due) + self.deadline_ns)
            return
        super()._after(due, kind, move)

    def end_drain(self, instance_id: str, at_ns: int) -> None:
        """Report the drained node's ray as stopped at ``at_ns`` (on the next step)."""
        del self.draining[instance_id]
        self._events.push(int(at_ns), _STOPPED, instance_id, self._token(instance_id))


class Drains:
    """Ends the drains of a :class:`DrainingProvider` against a replay's ``Cluster``;
    counts ``drained`` and ``deadline_hit``."""

    def __init__(self, provider: DrainingProvider, cluster):
        self.provider = provider
        self.cluster = cluster
        self.drained = 0          # drains ended (node stopped) in all
        self.deadline_hit = 0     # of which at the deadline, with work still running

    def play_until(self, until: float) -> None:
        """``Cluster.play_until(until)``, stopping the drained nodes on the way."""
        p, c = self.provider, self.cluster
        while True:
            due = sorted((d, iid) for iid, (_, d) in p.draining.items() if d <= until * NS)
            if not due:
                break
            d, iid = due[0]
            c.play_until(d / NS)
            self._end_empty(d)
            if iid in p.draining:
                slot = c.slot_of.get(iid)
                if slot is not None:
                    c.remove_node(slot, d / NS)
                p.end_drain(iid, d)
                self.drained += 1
                self.deadline_hit += 1
        c.play_until(until)
        self._end_empty(int(round(until * NS)))

    def _end_empty(self, now_ns: int) -> None:
        """Drained nodes with nothing left running stop, a drain latency after their
        last unit left (or after the drain began)."""
        p, c = self.provider, self.cluster
        for iid, (start, _) in sorted(p.draining.items()):
            slot = c.slot_of.get(iid)
            if slot is not None and c.running[slot]:
                continue
            last = start if slot is None else max(start, int(round(c.idle_since[slot] * NS)))
            rec = p.store[iid]
            at = last + int(round(p.spec(rec.instance_type).drain_latency_s * NS))
            p.end_drain(iid, max(at, start))
            self.drained += 1

