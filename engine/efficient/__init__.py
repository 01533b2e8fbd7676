"""The efficient mode (``vecsched.engine.schedule(problem, mode="efficient")``): legal,
deterministic plans chosen for cost rather than for Ray's decisions.

- price- and shape-aware type choice (``cost``): price per node-hour when the
  worker groups have one, else 1 + GPUs; types scored by how well their
  resource ratios fit the demand mix (pending plus running), per price;
- multi-resource packing (``pack``): dot-product filling of new nodes, tightest
  fit on existing ones, GPU nodes kept for GPU work;
- placement groups best of k (``gangs``), with CP-SAT for small ones
  (deterministic: one worker, seed 0, a work limit; OR-Tools is a dependency, and
  where it is missing ``EfficientOptions`` raises rather than plan differently);
- no idle node stranded: pending nodes nothing needs are cancelled, never one a
  forming placement group could use (``tick``).

It is not Ray-exact and never runs in ray-compat mode.
"""
from .options import EfficientOptions
from .tick import schedule_efficient

__all__ = ["EfficientOptions", "schedule_efficient"]
