"""``vecsched explain PATH``: why isn't it scaling? One tick, in users' words.

The engine decides the dumped tick (``vecsched.adapters.ray.dump``) exactly as the autoscaler
did, and every answer is read from its decision data, not from a second algorithm:

* each request it left unplaced, with ``Plan.infeasible_why`` (per plain request run)
  or ``Plan.gang_why`` (per placement group) turned into words: no worker group has
  the shape (the largest offer named), no group matches the label selector, the
  groups that fit are at ``maxReplicas``/``max_workers``, the cluster is at
  ``max_num_nodes``; an infeasible ``request_resources()`` constraint;
* each group that could not grow: at its maximum while demand that fits it waits; its
  decided nodes held back by the launch limits (upscaling speed / KubeRay's
  ``upscalingMode``, ``AUTOSCALER_MAX_CONCURRENT_LAUNCHES``), computed by Ray's own
  ``Reconciler._compute_to_launch`` on the tick's QUEUED instances plus the engine's
  new launches; nodes requested but not running Ray yet (pods Pending);
* each group whose idle nodes ``min_workers``/``minReplicas`` kept (``Plan.idle_kept``),
  and nodes with every resource free that Ray does not count idle (their idle time is
  0: referenced objects, tasks that declare no resources), so they never scale down.
"""
from __future__ import annotations

import json
from collections import Counter

import numpy as np

def register(sub) -> None:
    p = sub.add_parser("explain", help="why one dumped autoscaler tick did not scale "
                                       "(unplaced requests, groups that could not grow)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="a request dumped by the monitor (VECSCHED_DUMP_DIR) or by "
                                "vecsched.adapters.ray.dump_request")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    p.set_defaults(fn=main)


def _fmt(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}"
                           for k, v in d.items()) + "}"


def _selectors(rr) -> str:
    from ray.core.generated.common_pb2 import LabelSelectorOperator as Op
    alts = []
    for sel in rr.label_selectors:
        cons = [f"{c.label_key} {'in' if c.operator == Op.LABEL_OPERATOR_IN else 'not in'} "
                f"{list(c.label_values)}" for c in sel.label_constraints]
        alts.append(" and ".join(cons) or "(any)")
    return " or ".join(alts)


class _Words:
    """Group limits in the vocabulary of where the request came from."""

    def __init__(self, context: dict):
        self.kuberay = context.get("source") == "kuberay"

    def max(self, name: str, n: int) -> str:
        return (f"maxReplicas (max_workers {n}: maxReplicas x numOfHosts)" if self.kuberay
                else f"max_workers {n}")

    def min(self, n: int) -> str:
        return f"minReplicas (min_workers {n})" if self.kuberay else f"min_workers {n}"


def _largest_offer(p, need: dict) -> str:
    """For a shape no group can hold: which resources fall short, and the most any
    configured group offers of each; else the group that comes closest."""
    types = [t for t in range(p.T) if p.type_configured[t]]
    short = []
    for k, v in need.items():
        if v <= 0:
            continue
        r = p.col(k)
        best = max(types, key=lambda t: p.type_free[t, r] if r >= 0 else 0.0, default=None)
        have = float(p.type_free[best, r]) if (best is not None and r >= 0) else 0.0
        if have < v:
            short.append(f"{k} {v:g}: the most any group offers is {have:g}"
                         + (f" ({p.type_names[best]})" if have > 0 else ""))
    if short:
        return "; ".join(short)

    def covered(t):
        return sum(1 for k, v in need.items() if v <= 0 or p.type_free[t, p.col(k)] >= v)
    best = max(types, key=covered)
    offer = {p.resources[r]: float(p.type_free[best, r]) for r in range(p.R)
             if p.type_cap[best, r] > 0}
    return f"no single group has all of it; the closest is {p.type_names[best]} {_fmt(offer)}"


def explain(request, context: dict | None = None) -> dict:
    """The explanation of one tick as plain data (see the module doc)."""
    from vecsched.engine import schedule
    from vecsched.engine.model.dtypes import Status

    from .codec import decode

    context = dict(context or {})
    words = _Words(context)
    d = decode(request)
    p = d.problem
    plan = schedule(p)
    live = np.ones(p.N, bool)
    live[plan.term_node] = False
    counts = np.bincount(p.node_type[live], minlength=p.T) + plan.launch
    out = {"unplaced": [], "groups": [], "summary": {
        "nodes": int(p.N), "launch": plan.launches(),
        "terminate": dict(Counter(c for _, c in plan.terminations())),
        "groups": {p.type_names[t]: int(counts[t]) for t in range(p.T) if p.type_configured[t]}}}
    blocked_max = set()

    def reason(why: int, need: dict, rr=None) -> tuple:
        if why == 1:
            return "no_shape", f"no worker group has this shape: {_largest_offer(p, need)}"
        if why == 4:
            return "no_label_match", (f"no worker group with room for it matches its label "
                                      f"selector ({_selectors(rr) if rr is not None else '?'})")
        if why == 3:
            return "at_max_num_nodes", (f"the cluster is at max_num_nodes ({p.max_num_nodes}"
                                        f" nodes)")
        fits = [t for t in range(p.T) if p.type_configured[t] and all(
            v <= 0 or (p.col(k) >= 0 and p.type_free[t, p.col(k)] >= v)
            for k, v in need.items())]
        blocked_max.update(fits)
        names = ", ".join(f"{p.type_names[t]} ({int(counts[t])}/{int(p.type_max[t])})"
                          for t in fits)
        return "at_max_workers", (f"every group that fits it is at its "
                                  f"{'maxReplicas' if words.kuberay else 'max_workers'}: "
                                  f"{names}")

    for s in np.flatnonzero(plan.infeasible).tolist():
        rr = d.requests[s]
        need = {k: float(v) for k, v in rr.resources_bundle.items()}
        code, text = reason(int(plan.infeasible_why[s]), need, rr)
        out["unplaced"].append({"kind": "task/actor", "shape": need,
                                "count": int(plan.infeasible[s]),
                                "label_selector": _selectors(rr) or None,
                                "reason": code, "why": text})
    for g in np.flatnonzero(plan.gang_infeasible).tolist():
        gang = d.gangs[g]
        bundles = [{k: float(v) for k, v in r.resources_bundle.items()} for r in gang.requests]
        why = int(plan.gang_why[g]) if len(plan.gang_why) else 2
        first = max(bundles, key=lambda b: sum(b.values())) if bundles else {}
        code, text = reason(why, first, gang.requests[0] if len(gang.requests) else None)
        out["unplaced"].append({"kind": "placement group", "shape": bundles, "count": 1,
                                "detail": gang.details, "reason": code, "why": text})
    if plan.constraint_infeasible:
        out["unplaced"].append({"kind": "request_resources()", "shape": None, "count": 1,
                                "reason": "constraint_infeasible",
                                "why": "the request_resources() minimum cannot be met with "
                                       "the groups' limits"})
    for t in sorted(blocked_max):
        out["groups"].append({"group": p.type_names[t], "reason": "at_max",
                              "why": f"at {words.max(p.type_names[t], int(p.type_max[t]))} "
                                     f"with {int(counts[t])} nodes; demand that fits it waits"})
    out["groups"] += _held_back(request, plan, p, context)
    pend = Counter()
    for inst in request.current_instances:
        im = inst.im_instance
        if im is not None and im.status in (Status.REQUESTED, Status.ALLOCATED,
                                            Status.RAY_INSTALLING) and inst.ray_node is None:
            pend[im.instance_type] += 1
    for name, n in sorted(pend.items()):
        out["groups"].append({"group": name, "reason": "not_running_yet",
                              "why": f"{n} node(s) requested from the cloud are not running Ray"
                                     f" yet (on Kubernetes: pods Pending or starting)"})
    out["groups"] += _busy_without_resources(request, d, p, plan)
    kept = Counter(p.type_names[int(p.node_type[m])] for m in plan.idle_kept.tolist())
    for name, n in sorted(kept.items()):
        t = p.type_names.index(name)
        out["groups"].append({"group": name, "reason": "idle_kept_by_min",
                              "why": f"{n} idle node(s) past the idle timeout kept by "
                                     f"{words.min(int(p.type_min[t]))}"})
    out["context"] = context
    return out


def _busy_without_resources(request, d, p, plan) -> list:
    """Worker nodes with every resource free that Ray does not count idle (idle time 0:
    referenced objects, a driver, tasks that declare no resources), so no idle timeout
    ever starts for them."""
    from vecsched.engine.model.dtypes import Kind, Status

    by_type: dict = {}
    terminated = set(plan.term_node.tolist())
    for m in range(p.N):
        if (int(p.node_kind[m]) != Kind.WORKER or int(p.node_status[m]) != Status.RAY_RUNNING
                or m in terminated or p.node_idle_ms[m] > 0 or not p.node_has_ray[m]):
            continue
        if not np.all(p.node_free[m] >= p.node_total[m]):
            continue                                   # using resources: busy for a reason
        node = d.instances[int(p.node_source[m])].ray_node
        why = ", ".join(node.node_activity) if node is not None and node.node_activity else ""
        by_type.setdefault(p.type_names[int(p.node_type[m])], []).append(why)
    return [{"group": name, "reason": "not_idle_without_resources",
             "why": f"{len(acts)} node(s) use no resources but Ray does not count them idle, "
                    f"so the idle timeout never starts (referenced objects: `ray memory`; "
                    f"tasks that declare no resources)"
                    + (f"; Ray says: {'; '.join(sorted(set(a for a in acts if a)))}"
                       if any(acts) else "")}
            for name, acts in sorted(by_type.items())]


def _held_back(request, plan, p, context: dict) -> list:
    """Groups whose decided nodes wait for the launch limits (Ray's own arithmetic)."""
    from ray.autoscaler.v2.instance_manager.reconciler import Reconciler
    from ray.core.generated.instance_manager_pb2 import Instance

    speed = context.get("upscaling_speed")
    cap = context.get("max_concurrent_launches")
    if speed is None or cap is None:
        from ray.autoscaler._private.constants import AUTOSCALER_MAX_CONCURRENT_LAUNCHES
        speed = 1000.0 if speed is None else speed
        cap = AUTOSCALER_MAX_CONCURRENT_LAUNCHES if cap is None else cap
        context.setdefault("assumed", "upscaling_speed/max_concurrent_launches not in the "
                                      "dump: KubeRay Default mode (1000) and Ray's default")
    queued, requested, running = [], [], []
    for inst in request.current_instances:
        im = inst.im_instance
        if im is None:
            continue
        {Instance.QUEUED: queued, Instance.REQUESTED: requested,
         Instance.RAY_RUNNING: running}.get(im.status, []).append(im)
    for name, n in plan.launches().items():
        queued += [Instance(instance_id=f"new-{name}-{i}", instance_type=name,
                            status=Instance.QUEUED) for i in range(n)]
    if not queued:
        return []
    go = Reconciler._compute_to_launch(queued, requested, running, float(speed), int(cap))
    out = []
    by_type = Counter(im.instance_type for im in queued)
    run = Counter(im.instance_type for im in running)
    for name, n in by_type.items():
        sent = len(go.get(name, []))
        if sent >= n:
            continue
        allowed = max(1, int(np.ceil(float(speed) * max(run[name], 1))))
        if sent < allowed:
            why = (f"{n - sent} of {n} decided node(s) wait: the concurrent-launch limit "
                   f"(AUTOSCALER_MAX_CONCURRENT_LAUNCHES = {cap}) is taken by "
                   f"{len(requested)} node(s) already requested")
            code = "held_by_concurrent_launches"
        else:
            mode = context.get("upscaling_mode")
            why = (f"{n - sent} of {n} decided node(s) wait: upscaling speed {float(speed):g}"
                   + (f" (upscalingMode {mode})" if mode else "")
                   + f" allows {allowed} in flight for {run[name]} running node(s)")
            code = "held_by_upscaling_speed"
        out.append({"group": name, "reason": code, "why": why})
    return out


def main(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .dump import DumpError, load_dump

    console = Console()
    try:
        doc = load_dump(args.path)
    except (OSError, DumpError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    res = explain(doc["request"], doc["context"])
    if args.json:
        print(json.dumps(res, indent=1, default=str))
        return 0
    s = res["summary"]
    console.print(f"[bold]{args.path}[/bold]: {s['nodes']} nodes; launch {s['launch'] or 'none'}"
                  f"; terminate {s['terminate'] or 'none'}")
    t = Table(title=f"Unplaced requests ({len(res['unplaced'])})")
    for c in ("kind", "shape", "count", "reason", "why"):
        t.add_column(c, overflow="fold")
    for u in res["unplaced"]:
        t.add_row(u["kind"], json.dumps(u["shape"]), str(u["count"]), u["reason"], u["why"])
    console.print(t)
    g = Table(title=f"Groups that could not grow or shrink ({len(res['groups'])})")
    for c in ("group", "reason", "why"):
        g.add_column(c, overflow="fold")
    for r in res["groups"]:
        g.add_row(r["group"], r["reason"], r["why"])
    console.print(g)
    return 0
