"""Placement-group churn: a cluster whose placement groups come and go, tick by
tick, reported as a real Ray 2.60 GCS reports them (seeded; append-only like
benchmarks/common.py: change nothing ``PgChurn`` returns for given arguments, add a new
version instead).

A placed bundle ``i`` of group ``<pg>`` adds to its node's total and available
maps ``<r>_group_<i>_<pg>`` and ``<r>_group_<pg>`` for every resource ``r`` of the
bundle, ``bundle_group_<i>_<pg>`` and ``bundle_group_<pg>`` (1000 per bundle; a
task in the group takes 0.001 of it), and the dynamic label ``_PG_<pg>: ""``
(names and values as seen on a live ``ray.init`` with placement groups). The
bundle's own resources leave the node's plain availability.

Each tick: the running nodes with the groups placed so far, ``replace`` new
groups pending (GCS-encoded gang requests), and plain demand - tasks, actors,
and a few tasks waiting on a bundle of a live group (their shapes name
``CPU_group_<pg>`` and ``bundle_group_<pg>: 0.001``, as the raylet reports a
queued task of a group). ``advance()`` then places the pending groups (the GCS's
part, first fit by strategy), retires the ``replace`` oldest and makes
``replace`` new pending ones, so ``groups`` stay live.

Quantities: quarter CPUs, whole GPUs, memory in odd byte counts as raylets
report them (not dyadic), bundle usage in 0.001 steps.
"""
from __future__ import annotations

from collections import deque
from typing import Optional

import numpy as np
from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
from ray.autoscaler.v2.scheduler import SchedulingRequest
from ray.autoscaler.v2.schema import AutoscalerInstance
from ray.core.generated.autoscaler_pb2 import (AffinityConstraint, AntiAffinityConstraint,
                                               BundleSelector, GangResourceRequest, NodeState,
                                               PlacementConstraint, ResourceRequest,
                                               ResourceRequestByCount)
from ray.core.generated.instance_manager_pb2 import Instance, NodeKind

GIB = 2 ** 30
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# name: (resources, share of the running nodes)
TYPES = {
    "cpu-16": ({"CPU": 16.0, "memory": 64 * GIB - 137_216_000}, 0.55),
    "cpu-64": ({"CPU": 64.0, "memory": 256 * GIB - 541_020_160}, 0.30),
    "gpu-8": ({"CPU": 32.0, "GPU": 8.0, "memory": 256 * GIB - 541_020_160,
               "accelerator_type:A100": 1.0}, 0.15),
}
HEAD = {"CPU": 8.0, "memory": 32 * GIB - 68_608_000}


class PgChurn:
    def __init__(self, nodes: int = 1000, groups: int = 200, replace: int = 10, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.replace = replace
        self.serial = 0
        self.dropped = 0                    # pending groups the cluster had no room for
        names = list(TYPES)
        share = np.array([TYPES[t][1] for t in names])
        kinds = self.rng.choice(len(names), size=nodes, p=share / share.sum())
        self.node_type = ["head"] + [names[k] for k in kinds]
        self.base, self.used, self.hosted = [], [], []
        for n, t in enumerate(self.node_type):
            res = dict(HEAD if t == "head" else TYPES[t][0])
            ip = f"10.{n // 65536}.{n // 256 % 256}.{n % 256}"
            total = {**res, "object_store_memory": float(self.rng.integers(2, 20) * 1_000_003_147),
                     f"node:{ip}": 1.0}
            if t == "head":
                total["node:__internal_head__"] = 1.0
            self.base.append(total)
            cpu = total["CPU"]
            self.used.append({"CPU": float(self.rng.integers(0, int(cpu) * 2 + 1)) / 4,
                              "memory": float(self.rng.integers(0, 9)) * 1_234_567_891})
            self.hosted.append({})          # pg -> {bundle index: (bundle, tasks in it)}
        self._states: list = [None] * len(self.base)   # NodeState per node, rebuilt when changed
        self.live: deque = deque()          # (pg, {bundle index: node}) oldest first
        self.pending: list = []             # (pg, strategy, bundles) of this tick
        for _ in range(groups):
            self._place(self._new_group())
        self.pending = [self._new_group() for _ in range(replace)]

    # ---- the tick's request --------------------------------------------------------------
    def request(self) -> SchedulingRequest:
        insts = [self._instance(n) for n in range(len(self.base))]
        return SchedulingRequest(
            node_type_configs=self._configs(),
            disable_launch_config_check=True,
            idle_timeout_s=60.0,
            resource_requests=self._demand(),
            gang_resource_requests=[self._gang(*g) for g in self.pending],
            current_instances=insts,
        )

    def advance(self) -> None:
        """The GCS's part after a tick: place the pending groups, retire the
        oldest, make new pending ones."""
        for g in self.pending:
            self._place(g)
        for _ in range(min(self.replace, len(self.live))):
            pg, where = self.live.popleft()
            for n in set(where.values()):
                del self.hosted[n][pg]
                self._states[n] = None
        self.pending = [self._new_group() for _ in range(self.replace)]

    # ---- internals -------------------------------------------------------------------------
    def _new_group(self):
        self.serial += 1
        pg = f"{self.serial:08x}" + "".join(self.rng.choice(list("0123456789abcdef"), 20)) \
            + "01000000"
        strategy = STRATEGIES[int(self.rng.integers(4))]
        nb = int(self.rng.integers(1, 5))
        if self.rng.random() < 0.2:
            b = {"CPU": 4.0, "GPU": 1.0}
        else:
            b = {"CPU": float(self.rng.integers(1, 9)) / 2}
            if self.rng.random() < 0.5:
                b["memory"] = float(self.rng.integers(1, 5) * 1_073_741_824 + 4096)
        return pg, strategy, [dict(b) for _ in range(nb)]

    def _free(self, n: int) -> dict:
        free = {k: v for k, v in self.base[n].items()}
        for k, v in self.used[n].items():
            free[k] -= v
        for bundles in self.hosted[n].values():
            for b, _ in bundles.values():
                for k, v in b.items():
                    free[k] -= v
        return free

    def _fits(self, n: int, b: dict, extra: Optional[dict] = None) -> bool:
        free = self._free(n)
        for k, v in (extra or {}).items():
            free[k] = free.get(k, 0.0) - v
        return all(free.get(k, 0.0) >= v for k, v in b.items())

    def _place(self, group) -> None:
        pg, strategy, bundles = group
        start = int(self.rng.integers(1, len(self.base)))     # not the head
        order = list(range(start, len(self.base))) + list(range(1, start))
        where: dict = {}
        if strategy in ("PACK", "STRICT_PACK"):
            need: dict = {}
            for b in bundles:
                for k, v in b.items():
                    need[k] = need.get(k, 0.0) + v
            n = next((n for n in order if self._fits(n, need)), None)
            if n is not None:
                where = {i: n for i in range(len(bundles))}
        else:
            taken: set = set()
            for i, b in enumerate(bundles):
                n = next((n for n in order if n not in taken and self._fits(n, b)), None)
                if n is None:
                    where = {}
                    break
                where[i] = n
                taken.add(n)
        if not where:
            self.dropped += 1
            return
        for i, n in where.items():
            tasks = int(self.rng.integers(0, 3))
            self.hosted[n].setdefault(pg, {})[i] = (bundles[i], tasks)
            self._states[n] = None
        self.live.append((pg, where))

    def _maps(self, n: int) -> tuple:
        total = dict(self.base[n])
        avail = self._free(n)
        labels = {}
        for pg, bundles in self.hosted[n].items():
            labels[f"_PG_{pg}"] = ""
            for i, (b, tasks) in bundles.items():
                for k, v in b.items():
                    use = min(v, 0.5 * tasks) if k == "CPU" else 0.0
                    total[f"{k}_group_{i}_{pg}"] = v
                    avail[f"{k}_group_{i}_{pg}"] = v - use
                    total[f"{k}_group_{pg}"] = total.get(f"{k}_group_{pg}", 0.0) + v
                    avail[f"{k}_group_{pg}"] = avail.get(f"{k}_group_{pg}", 0.0) + v - use
                total[f"bundle_group_{i}_{pg}"] = 1000.0
                avail[f"bundle_group_{i}_{pg}"] = 1000.0 - 0.001 * tasks
                total[f"bundle_group_{pg}"] = total.get(f"bundle_group_{pg}", 0.0) + 1000.0
                avail[f"bundle_group_{pg}"] = (avail.get(f"bundle_group_{pg}", 0.0)
                                               + 1000.0 - 0.001 * tasks)
        return total, avail, labels

    def _instance(self, n: int) -> AutoscalerInstance:
        state = self._states[n]
        if state is None:                   # a fresh message, as the GCS sends one
            total, avail, labels = self._maps(n)
            state = self._states[n] = NodeState(
                node_id=n.to_bytes(4, "big"), total_resources=total,
                available_resources=avail, dynamic_labels=labels,
                idle_duration_ms=0 if self.hosted[n] or self.used[n]["CPU"] else 120_000)
        head = self.node_type[n] == "head"
        im = Instance(instance_id=f"i-{n}", instance_type=self.node_type[n],
                      status=Instance.RAY_RUNNING, node_id=f"n{n:05x}",
                      node_kind=NodeKind.HEAD if head else NodeKind.WORKER)
        return AutoscalerInstance(im_instance=im, ray_node=state, cloud_instance_id=f"c-{n}")

    def _configs(self) -> dict:
        have = {t: self.node_type.count(t) for t in TYPES}
        out = {t: NodeTypeConfig(name=t, min_worker_nodes=0, max_worker_nodes=have[t] + 50,
                                 resources=dict(res)) for t, (res, _) in TYPES.items()}
        out["head"] = NodeTypeConfig(name="head", min_worker_nodes=0, max_worker_nodes=0,
                                     resources=dict(HEAD))
        return out

    def _demand(self) -> list:
        rng = self.rng
        shapes = [({"CPU": 1.0}, 40), ({"CPU": 4.0, "memory": 8.0 * 1_073_741_824}, 8),
                  ({"CPU": 2.0, "GPU": 1.0}, 3), ({"CPU": 0.5}, 20)]
        out = [ResourceRequestByCount(request=ResourceRequest(resources_bundle=s),
                                      count=int(rng.integers(0, c + 1))) for s, c in shapes]
        for pg, where in list(self.live)[:: max(1, len(self.live) // 3)][:3]:
            i = min(where)                  # a task waiting on the group's first bundle
            bundle = {f"CPU_group_{pg}": 1.0, f"bundle_group_{pg}": 0.001} if rng.random() < 0.5 \
                else {f"CPU_group_{i}_{pg}": 1.0, f"bundle_group_{i}_{pg}": 0.001}
            out.append(ResourceRequestByCount(request=ResourceRequest(resources_bundle=bundle),
                                              count=int(rng.integers(1, 4))))
        return [r for r in out if r.count > 0]

    @staticmethod
    def _gang(pg: str, strategy: str, bundles: list) -> GangResourceRequest:
        label = f"_PG_{pg}"
        gang = GangResourceRequest(details=f"{pg}:{strategy}:PENDING")
        sel = BundleSelector()
        for b in bundles:
            pcs = []
            if strategy == "STRICT_PACK":
                pcs = [PlacementConstraint(affinity=AffinityConstraint(label_name=label,
                                                                       label_value=""))]
            elif strategy == "STRICT_SPREAD":
                pcs = [PlacementConstraint(anti_affinity=AntiAffinityConstraint(
                    label_name=label, label_value=""))]
            gang.requests.append(ResourceRequest(resources_bundle=b, placement_constraints=pcs))
            sel.resource_requests.append(ResourceRequest(resources_bundle=b,
                                                         placement_constraints=pcs))
        gang.bundle_selectors.append(sel)
        return gang
