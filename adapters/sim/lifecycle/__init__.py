"""Ray's instance lifecycle without Ray: the status machine, an instance store with the
reconciler's steps and launch rate limits, the simulated cloud (`SimCloud`, shared with
Ray's own reconciler loop in `vecsched.adapters.sim.raycluster`) and its provider for the store."""
from .cloud import CloudInstance, EventQueue, SimClock, SimCloud, SimNodeType
from .instances import (InstanceRecord, InstanceStore, InvalidMove, LaunchStep, Move,
                        ReconcileConfig, TickMoves, compute_to_launch, sequential_ids,
                        timeout_target, upscaling_speed_for_mode)
from .provider import SimProvider, run
from .status import (CREATABLE, TERMINAL, TRANSITIONS, IllegalTransition, can_transition,
                     reachable, status_name)

__all__ = [
    "CREATABLE", "TERMINAL", "TRANSITIONS", "CloudInstance", "EventQueue", "IllegalTransition",
    "InstanceRecord", "InstanceStore", "InvalidMove", "LaunchStep", "Move", "ReconcileConfig",
    "SimClock", "SimCloud", "SimNodeType", "SimProvider", "TickMoves", "can_transition",
    "compute_to_launch", "reachable", "run", "sequential_ids", "status_name",
    "timeout_target", "upscaling_speed_for_mode",
]
