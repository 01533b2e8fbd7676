"""Compatibility path: the simulated Ray cluster moved to `adapters.ray.sim` (one
module per concept: clock, config, provider, gcs, autoscaler). Import from there."""
from .sim import (HEAD_MARKER, SimAutoscaler, SimClock, SimCloud, SimCloudInstance,  # noqa: F401
                  SimCloudProvider, SimGcs, SimNodeType, SimRayNode, SimTask,
                  autoscaling_config, node_id_for, ray_clock, scheduler_clock)

__all__ = ["SimClock", "SimNodeType", "SimCloudProvider", "SimGcs", "SimAutoscaler",
           "autoscaling_config", "ray_clock", "HEAD_MARKER"]
