"""KubeRay in-place pod resize (IPPR, docs/ray-semantics.md §4.4) as arrays.

A node's IPPR state mirrors Ray's ``IPPRStatus``: current, desired and
effective-max CPU/memory, whether a resize was issued (``resizing``), the
Kubernetes resize status (none / "new" / another), a terminal failure, and
whether the raylet id is known. Ray's predicates follow from these:
``has_resize_request_to_send = raylet and k8s == NEW``;
``is_in_progress = resizing or has_resize_request_to_send``;
``can_resize_up = not failed and k8s == NONE and not resizing and
(cur_cpu < max_cpu or cur_mem < max_mem)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

K8S_NONE, K8S_NEW, K8S_OTHER = 0, 1, 2


@dataclass
class IpprState:
    current_cpu: float
    current_memory: float
    desired_cpu: float
    desired_memory: float
    max_cpu: float                 # effective: suggested max if set, else the spec's
    max_memory: float
    resizing: bool = False         # resizing_at is set
    k8s: int = K8S_NONE            # K8S_NONE / K8S_NEW / K8S_OTHER
    failed: bool = False           # last_failed_at is set
    raylet: bool = False           # raylet_id is known


FIELDS = ("attached", "resizing", "k8s", "failed", "raylet", "cur", "desired", "max")


def encode(states: list[Optional[IpprState]]) -> dict:
    """Per-node IPPR arrays (N,) / (N, 2) [cpu, memory]."""
    n = len(states)
    out = {"attached": np.zeros(n, bool), "resizing": np.zeros(n, bool),
           "k8s": np.zeros(n, np.int8), "failed": np.zeros(n, bool), "raylet": np.zeros(n, bool),
           "cur": np.zeros((n, 2)), "desired": np.zeros((n, 2)), "max": np.zeros((n, 2))}
    for i in ([] if states.count(None) == n else range(n)):
        s = states[i]
        if s is None:
            continue
        out["attached"][i] = True
        out["resizing"][i] = bool(s.resizing)
        out["k8s"][i] = int(s.k8s)
        out["failed"][i] = bool(s.failed)
        out["raylet"][i] = bool(s.raylet)
        out["cur"][i] = (s.current_cpu, s.current_memory)
        out["desired"][i] = (s.desired_cpu, s.desired_memory)
        out["max"][i] = (s.max_cpu, s.max_memory)
    return out


def to_send(ctx, m: int) -> bool:
    return bool(ctx.ippr_attached[m] and ctx.ippr_raylet[m] and ctx.ippr_k8s[m] == K8S_NEW)


def in_progress(ctx, m: int) -> bool:
    return bool(ctx.ippr_attached[m] and (ctx.ippr_resizing[m] or to_send(ctx, m)))


def can_resize_up(ctx, m: int) -> bool:
    return bool(ctx.ippr_attached[m] and not ctx.ippr_failed[m] and ctx.ippr_k8s[m] == K8S_NONE
                and not ctx.ippr_resizing[m]
                and (ctx.ippr_cur[m, 0] < ctx.ippr_max[m, 0]
                     or ctx.ippr_cur[m, 1] < ctx.ippr_max[m, 1]))


def queue_resize(ctx, m: int) -> None:
    """Ray's queue_resize_request(desired = effective max): marks "new" only
    when the desired values change."""
    cpu, mem = ctx.ippr_max[m]
    if cpu != ctx.ippr_desired[m, 0] or mem != ctx.ippr_desired[m, 1]:
        ctx.touch(m)
        ctx.ippr_desired[m] = (cpu, mem)
        ctx.ippr_resizing[m] = False
        ctx.ippr_k8s[m] = K8S_NEW


def update_totals(ctx, m: int, cpu: float, mem: float) -> None:
    """Ray's update_total_resources({"CPU": cpu, "memory": mem}): each total set
    (clamped at 0; a missing key joins the end of the dict), each availability of
    both sources moved by the same delta (clamped at 0, and now present)."""
    p = ctx.p
    ctx.touch(m)
    for col, new in ((p.col("CPU"), cpu), (p.col("memory"), mem)):
        row = ctx.order[m]
        listed = bool((row == col).any())
        delta = new - (ctx.total[m, col] if listed else 0.0)
        if not listed:
            row[int((row >= 0).sum())] = col
        ctx.total[m, col] = max(0.0, new)
        for s in (ctx.src(0), ctx.src(1)):
            have = s.free[m, col] if s.present[m, col] else 0.0
            s.free[m, col] = max(0.0, have + delta)
            s.present[m, col] = True
