"""Ray's own settings that its scheduler reads while it schedules, read for the
engine at every tick from the same places, so a setting changed while the cluster runs
reaches both alike (docs/ray-compat.md).

From Ray 2.60's ``ray/autoscaler/v2/scheduler.py``, the values read from module
globals or class attributes during ``schedule()`` that decide anything:

- ``AUTOSCALER_CONSERVE_GPU_NODES`` - the scheduler module's own name, bound at
  its import from ``ray.autoscaler._private.constants`` (env
  ``AUTOSCALER_CONSERVE_GPU_NODES``, default 1); ``_compute_score`` tests it;
- ``IMPLICIT_RESOURCE_PREFIX`` - the scheduler module's name (imported from
  ``ray._raylet``) in the pre-filter ``_can_fit_any_request``, and
  ``ray._raylet.IMPLICIT_RESOURCE_PREFIX`` itself, looked up at every call by
  ``_fits`` and ``_inplace_subtract`` (``ray.autoscaler._private.
  resource_demand_scheduler``);
- ``ResourceDemandScheduler.PENDING_TERMINABLE_STATUSES`` - read through the
  base class by pending-idle tracking, its release and idle termination
  (membership, and the order that ranks pending nodes);
- ``time.monotonic`` / ``time.time_ns`` through the module's ``time`` - the
  pending-idle clock and launch timestamps (``EngineScheduler``'s default
  clocks call them the same way).

The rest are not settings: ids (``uuid``), logging, protobuf enums, and code
(``_fits``, ``InstanceUtil``'s transition table, ``ResourceRequestUtil``).
"""
from __future__ import annotations

import ray._raylet
import ray.autoscaler.v2.scheduler as rds

from vecsched.engine.model.problem import ProblemError


def ray_settings() -> dict:
    """The module-level settings Ray's scheduler reads while it schedules, read
    now from where it reads them (a setting patched there - or an environment
    read at Ray's import - takes effect on the next tick, as in Ray):

    - ``AUTOSCALER_CONSERVE_GPU_NODES``, the name in ``ray.autoscaler.v2.scheduler``
      (imported there from ``ray.autoscaler._private.constants``, env
      ``AUTOSCALER_CONSERVE_GPU_NODES``): GPU avoidance in the score (truthiness);
    - ``IMPLICIT_RESOURCE_PREFIX``: the scheduler module's name (its pre-filter)
      and ``ray._raylet``'s (``_fits``/``_inplace_subtract`` read it there at
      every call); the engine models one prefix, so they must agree;
    - ``ResourceDemandScheduler.PENDING_TERMINABLE_STATUSES`` (a class attribute,
      read through the base class by pending-idle tracking and idle termination).
    """
    prefix = rds.IMPLICIT_RESOURCE_PREFIX
    if ray._raylet.IMPLICIT_RESOURCE_PREFIX != prefix:
        raise ProblemError("ray.autoscaler.v2.scheduler.IMPLICIT_RESOURCE_PREFIX",
                           f"is {prefix!r} but ray._raylet.IMPLICIT_RESOURCE_PREFIX is "
                           f"{ray._raylet.IMPLICIT_RESOURCE_PREFIX!r}; the engine models one")
    return dict(conserve_gpu=bool(rds.AUTOSCALER_CONSERVE_GPU_NODES), implicit_prefix=prefix,
                pending_terminable=rds.ResourceDemandScheduler.PENDING_TERMINABLE_STATUSES)
