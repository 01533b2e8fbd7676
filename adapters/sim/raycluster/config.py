"""A real `AutoscalingConfig` (through Ray's own `prepare_config` / `validate_config`)
for a simulated cluster behind an "external" provider (`provider.SimCloudProvider`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ray.autoscaler.v2.instance_manager.config import AutoscalingConfig

__all__ = ["autoscaling_config"]

PROVIDER_MODULE = "vecsched.adapters.sim.raycluster.node_provider.SimCloudProvider"


def autoscaling_config(node_types: Mapping[str, Mapping[str, Any]], *, head_type: str,
                       max_workers: Optional[int] = None,
                       idle_timeout_s: Optional[float] = 60.0,
                       upscaling_speed: float = 1.0,
                       disable_node_updaters: bool = False,
                       cluster_name: str = "vecsched-sim") -> AutoscalingConfig:
    """A real `AutoscalingConfig` for a cluster of `node_types`.

    `node_types[name]` takes the cluster-YAML keys `resources`, `min_workers`,
    `max_workers`, `labels`, `idle_timeout_s` (optional per-type override) and
    `priority`. The provider is "external" (Ray's generic third-party provider type),
    the launch-config check is disabled (the IM never stamps a hash on instances, so an
    enabled check only produces Ray's quirk Q2). `disable_node_updaters=False` makes
    Ray's reconciler move allocated instances to RAY_INSTALLING itself (no installer
    subscriber runs; the simulated GCS brings ray up); True is KubeRay's setting
    (ALLOCATED -> RAY_RUNNING directly).
    """
    types = {}
    for name, spec in node_types.items():
        t = {"resources": dict(spec.get("resources", {})), "node_config": {},
             "min_workers": int(spec.get("min_workers", 0)),
             "max_workers": int(spec.get("max_workers", 0))}
        for key in ("labels", "idle_timeout_s", "priority"):
            if spec.get(key) is not None:
                t[key] = spec[key]
        types[name] = t
    raw = {
        "cluster_name": cluster_name,
        "provider": {"type": "external", "module": PROVIDER_MODULE,
                     "disable_node_updaters": bool(disable_node_updaters),
                     "disable_launch_config_check": True},
        "head_node_type": head_type,
        "available_node_types": types,
        "upscaling_speed": float(upscaling_speed),
        "setup_commands": [], "head_setup_commands": [], "worker_setup_commands": [],
        "cluster_synced_files": [], "file_mounts": {},
    }
    if max_workers is not None:
        raw["max_workers"] = int(max_workers)
    if idle_timeout_s is not None:
        raw["idle_timeout_minutes"] = idle_timeout_s / 60.0
    return AutoscalingConfig(raw, skip_content_hash=True)
