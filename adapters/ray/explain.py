"""``vecsched explain PATH``: why isn't it scaling? One tick, in users' words.

The engine decides the dumped tick (``vecsched.adapters.ray.dump``) exactly as the autoscaler
did, and every answer is read from its decision data, not from a second algorithm:

* each request it left unplaced, with ``Plan.infeasible_why`` (per plain request run)
  or ``Plan.gang_why`` (per placement group) turned into words: no worker group has
  the shape (the largest offer named), no group matches the label selector, the
  groups that fit are at ``maxReplicas``/``max_workers``, the cluster is at
  ``max_num_nodes``; an infeasible ``request_resources()`` constraint;
* demand held back by a limit on a total (``VECSCHED_LIMITS``: the dump's context
  ``limits``, else the variable where explain runs; docs/capacity.md), with each
  limit's value and what the tick asked for; demand every fitting group of which
  is held out after the cloud refused it (the context's ``held_out``: the
  availability memory of the scheduler that dumped it);
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

from collections import Counter

import numpy as np


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


class _Offers:
    """What the configured worker groups offer, computed once per tick, so that each
    unplaced row's words are a lookup rather than a scan of the groups."""

    def __init__(self, p):
        self.p = p
        self.types = np.flatnonzero(p.type_configured)
        free = p.type_free[self.types]                        # (T', R)
        self.best = (self.types[np.argmax(free, axis=0)] if len(self.types)
                     else np.full(p.R, -1))                   # (R,) group offering most
        self.most = free.max(axis=0) if len(self.types) else np.zeros(p.R)

    def fits(self, need: np.ndarray, chunk: int = 8192) -> np.ndarray:
        """(A, T') bool: which configured groups hold each of the A bundles (compared
        ``chunk`` bundles at a time, to bound the (chunk, T', R) temporary)."""
        free = self.p.type_free[self.types][None, :, :]
        out = np.empty((len(need), len(self.types)), bool)
        for a in range(0, len(need), chunk):
            n = need[a:a + chunk, None, :]
            out[a:a + chunk] = ((n <= 0) | (free >= n)).all(axis=2)
        return out

    def largest(self, need: dict, row: np.ndarray) -> str:
        """For a shape no group can hold: which resources fall short, and the most any
        configured group offers of each; else the group that comes closest."""
        p = self.p
        short = []
        for k, v in need.items():
            if v <= 0:
                continue
            r = p.col(k)
            have = float(self.most[r]) if (r >= 0 and len(self.types)) else 0.0
            if have < v:
                short.append(f"{k} {v:g}: the most any group offers is {have:g}"
                             + (f" ({p.type_names[self.best[r]]})" if have > 0 else ""))
        if short:
            return "; ".join(short)
        if not len(self.types):
            return "no worker group is configured"
        covered = ((row[None, :] <= 0) | (p.type_free[self.types] >= row[None, :])).sum(axis=1)
        best = int(self.types[int(np.argmax(covered))])
        offer = {p.resources[r]: float(p.type_free[best, r]) for r in range(p.R)
                 if p.type_cap[best, r] > 0}
        return (f"no single group has all of it; the closest is {p.type_names[best]} "
                f"{_fmt(offer)}")


class _Reasons:
    """Why unplaced demand waits, in words, for one decided tick: ``Plan.infeasible_why``
    / ``Plan.gang_why`` codes turned into text. The groups that fit a bundle are found
    for all bundles at once (one array comparison), and each distinct answer is
    worded once."""

    def __init__(self, p, counts: np.ndarray, words: _Words, plan=None):
        self.p, self.counts, self.words, self.plan = p, counts, words, plan
        self.offers = _Offers(p)
        self.cols = {name: r for r, name in enumerate(p.resources)}
        self.blocked_max: set = set()
        self._at_max: dict = {}

    def row(self, need: dict) -> np.ndarray:
        """A bundle as a row of the problem's resource columns."""
        row = np.zeros(self.p.R)
        for k, v in need.items():
            r = self.cols.get(k, -1)
            if r >= 0:
                row[r] = v
        return row

    def words_for(self, whys: np.ndarray, needs: list, selectors: list) -> list:
        """(reason code, text) of each unplaced bundle: ``whys`` the engine's codes,
        ``needs`` the bundles (dicts), ``selectors`` their label selectors in words."""
        rows = np.array([self.row(n) for n in needs]).reshape(len(needs), self.p.R)
        out: list = [None] * len(needs)
        at_max = np.flatnonzero((whys != 1) & (whys != 3) & (whys != 4) & (whys != 5)
                                & (whys != 6))
        if at_max.size:
            fits = self.offers.fits(rows[at_max])
            for i, f in zip(at_max.tolist(), fits):
                out[i] = self._at_max_words(f)
        for i in np.flatnonzero(whys == 1).tolist():
            out[i] = ("no_shape", "no worker group has this shape: "
                      + self.offers.largest(needs[i], rows[i]))
        for i in np.flatnonzero(whys == 4).tolist():
            out[i] = ("no_label_match", f"no worker group with room for it matches its label "
                                        f"selector ({selectors[i] or '?'})")
        for i in np.flatnonzero(whys == 5).tolist():
            out[i] = ("held_back_by_limit", "held back by a limit: " + self._limits_words())
        for i in np.flatnonzero(whys == 6).tolist():
            st = self.plan.stats if self.plan is not None else {}
            held = ", ".join(list(st.get("held_out", [])) + list(st.get("probing", [])) or
                             ["?"])
            out[i] = ("out_of_stock", f"every worker group that fits it and has room is held "
                                      f"out after the cloud refused it (one node a tick "
                                      f"asked of those that are its only fit): {held}")
        for i in np.flatnonzero(whys == 3).tolist():
            out[i] = ("at_max_num_nodes",
                      f"the cluster is at max_num_nodes ({self.p.max_num_nodes} nodes)")
        return out

    def _limits_words(self) -> str:
        rows = (self.plan.stats.get("limits") if self.plan is not None else None) or {}
        return "; ".join(f"{name} {r['asked']:g} asked of {r['limit']:g}"
                         for name, r in rows.items()) or "?"

    def _at_max_words(self, fits: np.ndarray) -> tuple:
        key = fits.tobytes()
        if key not in self._at_max:
            p, counts = self.p, self.counts
            types = self.offers.types[fits].tolist()
            self.blocked_max.update(types)
            names = ", ".join(f"{p.type_names[t]} ({int(counts[t])}/{int(p.type_max[t])})"
                              for t in types)
            limit = "maxReplicas" if self.words.kuberay else "max_workers"
            self._at_max[key] = ("at_max_workers",
                                 f"every group that fits it is at its {limit}: {names}")
        return self._at_max[key]


def _bundle(rr) -> dict:
    """A bundle as a dict sorted by resource name: protobuf iterates maps in hash-table
    order, which may differ between processes, and the explanation must not."""
    return {k: float(v) for k, v in sorted(rr.resources_bundle.items())}


def _unplaced_runs(d, plan, reasons: _Reasons) -> list:
    """One entry per plain request run the engine left (partly) unplaced."""
    runs = np.flatnonzero(plan.infeasible)
    msgs = [d.requests[s] for s in runs.tolist()]
    needs = [_bundle(rr) for rr in msgs]
    sels = [_selectors(rr) if rr.label_selectors else "" for rr in msgs]
    worded = reasons.words_for(np.asarray(plan.infeasible_why)[runs].astype(np.int64),
                               needs, sels)
    return [{"kind": "task/actor", "shape": need, "count": int(plan.infeasible[s]),
             "label_selector": sel or None, "reason": code, "why": text}
            for s, need, sel, (code, text) in zip(runs.tolist(), needs, sels, worded)]


def _unplaced_gangs(d, plan, reasons: _Reasons) -> list:
    """One entry per placement group the engine could not place, worded by its largest
    bundle."""
    gangs = np.flatnonzero(plan.gang_infeasible).tolist()
    shapes, firsts, sels = [], [], []
    for g in gangs:
        reqs = d.gangs[g].requests
        bundles = [_bundle(r) for r in reqs]
        shapes.append(bundles)
        firsts.append(max(bundles, key=lambda b: sum(b.values())) if bundles else {})
        sels.append(_selectors(reqs[0]) if len(reqs) else "")
    whys = np.array([int(plan.gang_why[g]) if len(plan.gang_why) else 2 for g in gangs],
                    np.int64)
    worded = reasons.words_for(whys, firsts, sels)
    return [{"kind": "placement group", "shape": bundles, "count": 1,
             "detail": d.gangs[g].details, "reason": code, "why": text}
            for g, bundles, (code, text) in zip(gangs, shapes, worded)]


def explain(request, context: dict | None = None) -> dict:
    """The explanation of one tick as plain data (see the module doc)."""
    from vecsched.engine import schedule

    from .codec import decode

    context = dict(context or {})
    words = _Words(context)
    d = decode(request)
    p = d.problem
    # The dumping scheduler's mode (efficient: its default options, the dump has not
    # its prices) and the groups its availability memory held out.
    mode = context.get("engine_mode", "ray-compat")
    plan = schedule(p, mode=mode, limits=_limits(context, request),
                    unavailable=context.get("held_out") or ())
    live = np.ones(p.N, bool)
    live[plan.term_node] = False
    counts = np.bincount(p.node_type[live], minlength=p.T) + plan.launch
    out = {"unplaced": [], "groups": [], "summary": {
        "nodes": int(p.N), "launch": plan.launches(),
        "terminate": dict(Counter(c for _, c in plan.terminations())),
        "groups": {p.type_names[t]: int(counts[t]) for t in range(p.T) if p.type_configured[t]}}}
    reasons = _Reasons(p, counts, words, plan)
    if "limits" in plan.stats:
        out["summary"]["limits"] = plan.stats["limits"]
    out["unplaced"] += _unplaced_runs(d, plan, reasons)
    out["unplaced"] += _unplaced_gangs(d, plan, reasons)
    if plan.constraint_infeasible:
        out["unplaced"].append({"kind": "request_resources()", "shape": None, "count": 1,
                                "reason": "constraint_infeasible",
                                "why": "the request_resources() minimum cannot be met with "
                                       "the groups' limits"})
    for t in sorted(reasons.blocked_max):
        out["groups"].append({"group": p.type_names[t], "reason": "at_max",
                              "why": f"at {words.max(p.type_names[t], int(p.type_max[t]))} "
                                     f"with {int(counts[t])} nodes; demand that fits it waits"})
    out["groups"] += _held_back(request, plan, p, context)
    out["groups"] += _not_running_yet(request)
    out["groups"] += _busy_without_resources(request, d, p, plan)
    out["groups"] += _idle_kept(p, plan, words)
    out["context"] = context
    return out


def _limits(context: dict, request):
    """The limits the tick was decided under: the dump's, else ``VECSCHED_LIMITS``."""
    import json

    from .capacity_settings import limits_from_env
    raw = context.get("limits")
    return limits_from_env(raw=json.dumps(raw)) if raw else limits_from_env()


def _not_running_yet(request) -> list:
    """Groups with nodes requested from the cloud that do not run Ray yet."""
    from vecsched.engine.model.dtypes import Status

    pend = Counter()
    for inst in request.current_instances:
        im = inst.im_instance
        if im is not None and im.status in (Status.REQUESTED, Status.ALLOCATED,
                                            Status.RAY_INSTALLING) and inst.ray_node is None:
            pend[im.instance_type] += 1
    return [{"group": name, "reason": "not_running_yet",
             "why": f"{n} node(s) requested from the cloud are not running Ray"
                    f" yet (on Kubernetes: pods Pending or starting)"}
            for name, n in sorted(pend.items())]


def _idle_kept(p, plan, words: _Words) -> list:
    """Groups whose idle nodes past the timeout min_workers / minReplicas kept."""
    kept = Counter(p.type_names[int(p.node_type[m])] for m in plan.idle_kept.tolist())
    return [{"group": name, "reason": "idle_kept_by_min",
             "why": f"{n} idle node(s) past the idle timeout kept by "
                    f"{words.min(int(p.type_min[p.type_names.index(name)]))}"}
            for name, n in sorted(kept.items())]


def _busy_without_resources(request, d, p, plan) -> list:
    """Worker nodes with every resource free that Ray does not count idle (idle time 0:
    referenced objects, a driver, tasks that declare no resources), so no idle timeout
    ever starts for them."""
    from vecsched.engine.model.dtypes import Kind, Status

    by_type: dict = {}
    free = ((p.node_kind == Kind.WORKER) & (p.node_status == Status.RAY_RUNNING)
            & (p.node_idle_ms <= 0) & p.node_has_ray
            & np.all(p.node_free >= p.node_total, axis=1))    # else busy for a reason
    free[plan.term_node] = False
    for m in np.flatnonzero(free).tolist():
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
