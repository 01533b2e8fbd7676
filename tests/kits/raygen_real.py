"""The real-world modes of tests/kits/raygen.py: quantities as a raylet reports them
(fixed point, odd byte counts) and placement groups placed on running nodes as
the GCS reports them. See raygen's module docstring."""
from __future__ import annotations

from ray.core.generated.autoscaler_pb2 import (ClusterResourceConstraint, ResourceRequest,
                                               ResourceRequestByCount)
from ray.core.generated.instance_manager_pb2 import NodeKind

GIB = float(2 ** 30)
UNITS = 10_000                 # ray._raylet.RESOURCE_UNIT_SCALING: raylet fixed point
MARK = 2.0 ** -10              # a dyadic stand-in for Ray's 0.001 (default mode)


def _fixed(x: float) -> float:
    """A quantity as a raylet reports it: whole units of 1/10,000."""
    return round(x * UNITS) / UNITS


def odd_bytes(rng, gib: float) -> float:
    """About ``gib`` GiB as raylets report memory: an odd count of bytes."""
    return float(int(GIB * gib * float(rng.uniform(0.6, 0.95))) | 1)


def real_shape(rng, types) -> dict:
    """A request as a raylet reports it: fixed-point CPU and GPU fractions, odd
    memory byte counts, the 0.001 accelerator marker."""
    roll = rng.random()
    if roll < 0.04:
        return {"CPU": 0.0}
    if roll < 0.07:
        return {"GPU": 0.0, "CPU": 0.3}
    if roll < 0.1:
        return {"CPU": 1000.0}
    if roll < 0.17:
        t = types[int(rng.integers(len(types)))]
        return {k: v for k, v in t.items() if k in ("CPU", "GPU")}
    s = {"CPU": float(rng.choice([0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.7, 3.3, 4.0]))}
    if rng.random() < 0.4:
        s["memory"] = float(int(rng.integers(1, 9)) * 268_435_456
                            + 2 * int(rng.integers(0, 999)) + 1)
    if rng.random() < 0.3:
        s["GPU"] = float(rng.choice([0.1, 0.25, 0.3, 1.0, 2.0]))
        if rng.random() < 0.3:
            s["accelerator_type:A100"] = 0.001
    if rng.random() < 0.07:
        s["ssd"] = 0.3
    if rng.random() < 0.05:
        s["node:__internal_implicit_resource_x"] = 0.3
    return s


def placed_groups(rng, insts, reqs: list, constraints: list, real: bool):
    """Placement groups already placed on running nodes, in the nodes' maps as
    the GCS reports them, and tasks waiting on their bundles (plain requests
    and, sometimes, the constraint). Returns (requests, constraints)."""
    running = [x for x in insts
               if x.ray_node is not None and x.im_instance.node_kind != NodeKind.HEAD]
    if not running:
        return reqs, constraints
    task = 0.001 if real else MARK             # a task's share of a bundle
    placed = []
    for g in range(int(rng.integers(1, 7))):
        pg = f"{g:02x}{int(rng.integers(1 << 30)):08x}" + "c0" * 13
        cpu = (_fixed(float(rng.choice([0.1, 0.3, 1.0, 1.5]))) if real
               else float(rng.integers(1, 9)) / 4)
        bundle = {"CPU": cpu} if rng.random() < 0.7 else {"CPU": cpu, "GPU": 1.0}
        nb = int(rng.integers(1, 4))
        spread = rng.random() < 0.6            # one bundle a node, else all on one node
        hosts = [running[int(j)] for j in rng.choice(len(running), size=min(nb, len(running)),
                                                     replace=False)] if spread \
            else [running[int(rng.integers(len(running)))]] * nb
        for i, x in enumerate(hosts):
            tot, av = x.ray_node.total_resources, x.ray_node.available_resources
            if not all(av[k] >= v if k in av else False for k, v in bundle.items()):
                continue                       # no room: the GCS put it elsewhere
            for k, v in bundle.items():        # a placed bundle reserves its resources
                av[k] = (round(av[k] * UNITS) - round(v * UNITS)) / UNITS if real else av[k] - v
            tasks = int(rng.integers(0, 3))
            for k, v in bundle.items():
                used = min(v, _fixed(0.1 * tasks) if real else 0.25 * tasks)
                for name in (f"{k}_group_{i}_{pg}", f"{k}_group_{pg}"):
                    tot[name] = tot[name] + v if name in tot else v
                    av[name] = av[name] + v - used if name in av else v - used
            for name in (f"bundle_group_{i}_{pg}", f"bundle_group_{pg}"):
                tot[name] = tot[name] + 1000.0 if name in tot else 1000.0
                left = 1000.0 - task * tasks
                if not (left == 0 and rng.random() < 0.5):
                    av[name] = av[name] + left if name in av else left
            x.ray_node.dynamic_labels[f"_PG_{pg}"] = ""
        placed.append((pg, len(hosts)))
    reqs = list(reqs)
    for pg, nb in placed:
        if rng.random() < 0.6:                 # a task waiting on the group (any bundle)
            i = int(rng.integers(nb))
            bundle = ({f"CPU_group_{pg}": 1.0 if rng.random() < 0.5 else 0.25,
                       f"bundle_group_{pg}": task} if rng.random() < 0.5
                      else {f"CPU_group_{i}_{pg}": 0.5, f"bundle_group_{i}_{pg}": task})
            reqs.append(ResourceRequestByCount(request=ResourceRequest(resources_bundle=bundle),
                                               count=int(rng.integers(1, 5))))
    if placed and rng.random() < 0.15:         # request_resources() naming a bundle
        pg = placed[0][0]
        con = ResourceRequestByCount(request=ResourceRequest(
            resources_bundle={f"CPU_group_{pg}": 0.25}), count=1)
        if constraints:
            constraints[0].resource_requests.append(con)
        else:
            constraints = [ClusterResourceConstraint(resource_requests=[con])]
    return reqs, constraints
