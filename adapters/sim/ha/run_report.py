"""The figures of an HA run, from the records of the parts that were acted upon:

- the **world's** record (its own log of every mutating call with the caller's epoch,
  the cloud instances it created, where every demand unit is) against the same
  record of a failure-free reference run of the same replay;
- the **fenced store's** audit (every write attempt with its epoch, the fence at
  that moment and the result, written by the Lua script that decided);
- the final instance records in Redis.

Nothing here is taken from a replica's account of itself, except the fault times
the harness itself took and the hold it imposed, and the epochs the replicas report
they were granted (`epoch_regressions` also counts the epochs the world or the store
saw from two holders, which needs no replica's word).

`stuck_s` (after a Redis restart): the longest stretch, from the moment Redis went
down, in which the world did not advance a tick. It includes, on purpose, the wait
of the replica granted the lease by the emptied Redis (`reset_wait_s`: it holds the
lease but does not act until one ttl after its acquisition, so that the old leader,
whose lease runs by its own clock, has stopped acting): that wait is time in which
no leader makes progress, and is counted as such.

`reset_wait_s`: the time the replicas held a granted lease back that way, in total
(their lease counters, `LeaseStats.reset_waits_ms`); 0 in a run without a loss.

`acted_during_reset` (after a Redis restart or restore): the world's calls (a claim
included) of another replica, in a term newer than the one that held the lease when
Redis went down, made before that term's lease can have run out: the old leader's
last renewal was sent before Redis went down, so by its own clock it may act until
`down_at + ttl`. (The old leader's own next term is not counted: it stepped down
first, in the same process.) From the world's record and the harness's own fault
time; must be 0 (another replica's grant waits one ttl from its acquisition, which
came after Redis was back). With `--backend kube` the Lease survives a Redis restart:
the old leader takes its next term itself, at once, and nothing is counted.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from vecsched.engine.model.dtypes import Status

FENCED = ("stale", "unknown", "expired")
_HOLDER = re.compile(r"(.+)-[0-9a-f]{32}")


def name_of(holder: str) -> str:
    """The replica name in a holder id `name-<uuid4 hex>` (any other id as it is)."""
    m = _HOLDER.fullmatch(holder)
    return m.group(1) if m else holder


def _instances(world: dict) -> dict:
    return {i["cloud_id"]: (i["type"], i["created_tick"]) for i in world["instances"]}


def _launch_changes(world: dict) -> tuple[list, list]:
    """Accepted world calls in order (a new leader's claim is not an action), and the
    indexes where the calling replica changes."""
    accepted = [c for c in world["calls"] if c.get("result") != "stale" and c["op"] != "claim"]
    changes = [k for k in range(1, len(accepted))
               if accepted[k]["replica"] != accepted[k - 1]["replica"]]
    return accepted, changes


def _failover_s(fault: dict, accepted: list) -> float | None:
    """Fault -> the first call the world accepted from the next leader, less any hold
    the harness imposed on that leader."""
    for c in accepted:
        if c["t"] > fault["at"] and name_of(c["replica"]) == fault["next"] \
                and c["epoch"] >= fault.get("min_epoch", 0):
            return c["t"] - fault["at"] - fault["hold_s"]
    return None


def epoch_regressions(result: dict, world: dict, audit: list[dict]) -> list[int]:
    """Epochs granted at or below an epoch granted before (the replicas' leader
    events in time order), and epochs the world's calls (refused ones too) or the
    store's written entries carry from more than one holder."""
    grants = sorted((e["t"], e["epoch"]) for evs in result["leader_events"].values()
                    for e in evs)
    bad, top = set(), 0
    for _, epoch in grants:
        if epoch <= top:
            bad.add(epoch)
        top = max(top, epoch)
    holders: dict[int, set] = defaultdict(set)
    for c in world["calls"]:
        holders[c["epoch"]].add(c["replica"])
    written: dict[int, set] = defaultdict(set)
    for e in audit:
        if e["result"] == "written":
            written[e["epoch"]].add(e["holder"])
    bad |= {e for hs in (holders, written) for e, h in hs.items() if len(h) > 1}
    return sorted(bad)


def acted_during_reset(faults: list[dict], world: dict, ttl_s: float) -> list[dict]:
    """The world's calls of another replica's newer term made while the term from
    before a Redis restart could still act (module docstring)."""
    out = []
    for f in faults:
        if "down_at" not in f:
            continue
        until = f["down_at"] + ttl_s
        out += [c for c in world["calls"]
                if c["epoch"] > f["epoch_before"] and c["t"] < until
                and name_of(c["replica"]) != f["replica"]]
    return out


def stuck_s(fault: dict, world: dict) -> float | None:
    """The longest time from `fault["down_at"]` on without an accepted advance."""
    if "down_at" not in fault:
        return None
    ts = sorted(c["t"] for c in world["calls"]
                if c["op"] == "advance" and c.get("result") == "done"
                and c["t"] > fault["down_at"])
    points = [fault["down_at"]] + ts
    return max((b - a for a, b in zip(points, points[1:])), default=None)

@dataclass
class _Figures:
    """Everything `summarize` reports, worked out once from the run's records."""
    scenario: str
    bound: float
    # launches: the world's cloud instances against the reference run's
    ha: dict
    ref: dict
    lost: list
    duplicated: list
    orphaned: list
    never_sent: list
    # demand units: where each one was placed, against the reference run
    demand_lost: int
    demand_delayed: int
    # the fenced store's audit
    stale: list
    rejected: list
    writers: dict
    written: list
    version_matched: int
    # the world's calls
    accepted: list
    changes: list
    failover: list
    recovery: list
    calls_by_leader: bool
    stale_calls: list
    replays: int
    # epochs, stalls and the replicas' events
    regressions: list
    early: list
    stuck: list
    events: list
    errors: Counter
    rebuilds: list


def summarize(dc, result: dict, ref_world: dict, ref_records: dict) -> dict:
    """The figures of an HA run's raw `result` (`run.py`, `run_restart.py`) against the
    reference run's world record and final records: `ha.json` less the keys `run_demo`
    adds (`backend`, `wall_s`, `detail.kube_api`)."""
    f = _figures(dc, result, ref_world)
    checks = _checks(f, result, ref_records)
    return {
        "scenario": f.scenario,
        "lease_ttl_s": dc.ttl_s,
        "tick_real_s": dc.tick_real_s,
        "failovers": len(f.changes),
        "failover_s": f.failover,
        "failover_bound_s": f.bound,
        "stale_writes_attempted": len(f.stale),
        "stale_writes_rejected": len(f.rejected),
        "stale_writes_only_the_fence_stopped": f.version_matched,
        "stale_cloud_calls_refused": len(f.stale_calls),
        "launches_lost": len(f.lost) + len(f.never_sent),
        "launches_duplicated": len(f.duplicated) + len(f.orphaned),
        "demand_lost": f.demand_lost,
        "demand_delayed": f.demand_delayed,
        "epoch_regressions": len(f.regressions),
        "acted_during_reset": len(f.early),
        "stuck_s": max(f.stuck) if f.stuck and None not in f.stuck else None,
        "reset_wait_s": _reset_wait_s(result),
        "checks": checks,
        "ok": all(checks.values()),
        "detail": _detail(f, dc, result, ref_world),
    }


def _reset_wait_s(result: dict) -> float:
    """Seconds the replicas held granted leases back to wait out an earlier holder
    (their lease counters; a replica killed before its `stats` has none)."""
    return round(sum(s["lease"].get("reset_waits_ms", 0.0)
                     for s in result["replica_stats"].values()) / 1000, 3)


def _figures(dc, result: dict, ref_world: dict) -> _Figures:
    """Work out every figure from the world's record, the audit and the records."""
    world, audit = result["world"], result["audit"]
    writes = _write_figures(audit)
    return _Figures(
        scenario=result.get("scenario", "kill-pause"),
        bound=dc.ttl_s + dc.tick_real_s,
        **_launch_figures(world, ref_world, result["records"]),
        **_demand_figures(world, ref_world),
        **writes,
        **_call_figures(result["faults"], world, writes["writers"]),
        **_event_figures(result, world, audit),
        early=acted_during_reset(result["faults"], world, dc.ttl_s),
    )


def _launch_figures(world: dict, ref_world: dict, records: dict) -> dict:
    """Cloud instances lost or duplicated against the reference run, instances no
    single record owns, and launches recorded but never sent to the cloud."""
    ha, ref = _instances(world), _instances(ref_world)
    owners = _owners(world, records)
    asked = {(c["instance_id"], c["request_id"]) for c in world["calls"]
             if c["op"] == "launch" and c.get("result") in ("created", "replayed")}
    return {
        "ha": ha, "ref": ref,
        "lost": sorted(k for k, v in ref.items() if ha.get(k) != v),
        "duplicated": sorted(k for k, v in ha.items() if ref.get(k) != v),
        "orphaned": sorted(k for k in ha if owners[k] != 1),
        "never_sent": sorted(i for i, r in records.items()
                             if any(s == Status.REQUESTED for s, _ in r["history"])
                             and (i, r["request"]) not in asked),
    }


def _owners(world: dict, records: dict) -> Counter:
    """How many records own each cloud instance at the end: the record that names it,
    or the REQUESTED record whose launch key it carries (allocated after the last
    sync)."""
    owners = Counter(r["cloud"] for r in records.values() if r["cloud"])
    by_key = {(i["instance_id"], i["request_id"]): i["cloud_id"] for i in world["instances"]}
    for iid, r in records.items():
        if not r["cloud"] and r["history"][-1][0] == Status.REQUESTED:
            cloud_id = by_key.get((iid, r["request"]))
            if cloud_id:
                owners[cloud_id] += 1
    return owners


def _demand_figures(world: dict, ref_world: dict) -> dict:
    """Demand units the reference run placed and this run did not (or that never
    arrived), and units this run placed later than the reference run."""
    ru, hu = ref_world["units"], world["units"]
    pairs = list(zip(ru["placed_at"], hu["placed_at"]))
    lost = sum(1 for a, b in pairs if a is not None and b is None) \
        + abs(ru["arrived"] - hu["arrived"])
    delayed = sum(1 for a, b in pairs if a is not None and b is not None and b > a)
    return {"demand_lost": lost, "demand_delayed": delayed}


def _write_figures(audit: list[dict]) -> dict:
    """Stale write attempts in the audit and which of them were rejected (and by the
    fence alone), the holders that wrote in each epoch, and the written epochs in
    order."""
    stale = [e for e in audit if e["epoch"] < e["fence"] or e["result"] in FENCED]
    rejected = [e for e in stale if e["result"] != "written"]
    writers: dict[int, set] = defaultdict(set)
    for e in audit:
        if e["result"] == "written":
            writers[e["epoch"]].add(e["holder"])
    return {
        "stale": stale, "rejected": rejected, "writers": writers,
        "written": [e["epoch"] for e in audit if e["result"] == "written"],
        "version_matched": sum(1 for e in rejected
                               if e["expected"] is None or e["expected"] == e["version"]),
    }


def _call_figures(faults: list[dict], world: dict, writers: dict) -> dict:
    """From the world's calls: the failover time of each fault, the recovery time
    (the new leader saw its lease -> its first accepted call), whether only leaders
    reached the cloud, and the stale and replayed calls."""
    accepted, changes = _launch_changes(world)
    failover = [_failover_s(f, accepted) for f in faults]
    return {
        "accepted": accepted, "changes": changes, "failover": failover,
        "recovery": [None if f is None or "next_acquired_at" not in fault else
                     f + fault["at"] - fault["next_acquired_at"]
                     for f, fault in zip(failover, faults)],
        # Every call the cloud accepted came from the holder that wrote in that epoch
        # (calls carry the holder id): no passive replica ever reached the cloud.
        "calls_by_leader": all(c["replica"] in writers.get(c["epoch"], {c["replica"]})
                               for c in accepted),
        "stale_calls": [c for c in world["calls"] if c.get("result") == "stale"],
        "replays": sum(1 for c in world["calls"] if c.get("result") == "replayed"),
    }


def _event_figures(result: dict, world: dict, audit: list[dict]) -> dict:
    """Epoch regressions, the stalls after each Redis restart, and the replicas'
    reported events (errors by kind, rebuilds)."""
    events = [e for evs in result.get("replica_events", {}).values() for e in evs]
    return {
        "regressions": epoch_regressions(result, world, audit),
        "stuck": [stuck_s(f, world) for f in result["faults"] if "down_at" in f],
        "events": events,
        "errors": Counter(e.get("kind") for e in events if e["ev"] == "error"),
        "rebuilds": [e for e in events if e["ev"] == "rebuilt"],
    }


def _checks(f: _Figures, result: dict, ref_records: dict) -> dict:
    """The pass/fail checks of `ha.json` (the redis-restart scenario adds two)."""
    together = result["started_together"]
    checks = {
        "one_leader_at_start": len(together["leaders"]) == 1 and not together["both_led"],
        "failover_within_ttl_plus_tick": all(x is not None and x <= f.bound
                                             for x in f.failover),
        "every_stale_write_rejected": len(f.rejected) == len(f.stale)
        and (len(f.stale) >= 1 or f.scenario != "kill-pause"),
        "no_epoch_regression": not f.regressions,
        "never_stuck_on_a_world_mismatch": f.errors["WorldMismatch"] == 0,
        "one_writer_per_epoch": all(len(h) == 1 for h in f.writers.values()),
        "epochs_never_go_back": all(a <= b for a, b in zip(f.written, f.written[1:])),
        "cloud_called_only_by_the_leader": f.calls_by_leader,
        "no_launch_lost": not f.lost and not f.never_sent,
        "no_launch_duplicated": not f.duplicated and not f.orphaned,
        "no_demand_lost": f.demand_lost == 0,
        "records_match_reference": result["records"] == ref_records,
    }
    if f.scenario in ("redis-restart", "redis-old-snapshot"):
        checks["records_rebuilt_from_the_cloud"] = bool(f.rebuilds)
        checks["progress_after_the_restart"] = all(x is not None for x in f.stuck)
        checks["no_new_term_acts_while_the_old_may"] = not f.early
    return checks


def _detail(f: _Figures, dc, result: dict, ref_world: dict) -> dict:
    """The `detail` section of `ha.json`: the lists behind the counts, and the run."""
    world, accepted = result["world"], f.accepted
    return {
        "recovery_s": f.recovery,   # the new leader saw its lease -> its first accepted call
        "regressed_epochs": f.regressions, "replica_errors": dict(f.errors),
        "acted_during_reset": f.early,
        "rebuilds": f.rebuilds,
        "redis_restarts_seen": [e for e in f.events if e["ev"] == "redis-restart"],
        "reset_waits": [e for e in f.events if e["ev"] == "waiting"],
        "cloud_instances": len(f.ha), "reference_cloud_instances": len(f.ref),
        "launch_calls_replayed": f.replays,
        "lost": f.lost, "never_sent": f.never_sent, "duplicated": f.duplicated,
        "orphaned": f.orphaned,
        "units": {k: v for k, v in world["units"].items() if k != "placed_at"},
        "reference_units": {k: v for k, v in ref_world["units"].items() if k != "placed_at"},
        "world_ticks": world["tick"], "world_reads": world["reads"],
        "writes_audited": len(result["audit"]), "epochs_written": sorted(f.writers),
        "leader_sequence": [name_of(accepted[k]["replica"]) for k in [0] + f.changes]
        if accepted else [],
        "faults": result["faults"], "fenced_event": result["fenced_event"],
        "started_together": result["started_together"],
        "replica_stats": result["replica_stats"],
        "reference_wall_s": result.get("reference_wall_s"),
        "sim": dc.sim.__dict__ if hasattr(dc.sim, "__dict__") else str(dc.sim),
        "scheduler": dc.scheduler,
    }
