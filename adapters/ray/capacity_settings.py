"""Limits and the availability memory for the installed scheduler, from the environment.

The same route as the efficient mode's options (``efficient_settings.py``): a JSON
object inline (the value starts with ``{``) or the path of a JSON file.

* ``VECSCHED_LIMITS`` (``VECSCHED_MODE`` ``engine`` or ``efficient``; docs/capacity.md)::

      {"total": {"GPU": 128, "cost_per_hour": 400},
       "per_group": {"gpu-a100-8": {"GPU": 64}},
       "prices": {"gpu-a100-8": 32.8, "cpu-32": 1.5}}

  ``total``: caps over the whole cluster, ``per_group``: caps per worker group,
  resource name -> value (``cost_per_hour`` needs ``prices`` for every group it
  covers; without ``prices`` here, the efficient options' ``prices`` are used).
* ``VECSCHED_AVAILABILITY`` (``VECSCHED_MODE=efficient``, the one installed mode that
  keeps the memory): the fields of ``vecsched.engine.tick.AvailabilityOptions``, e.g.
  ``{"ttl_s": 300}``; ``false`` turns the memory off (accepted in any mode).

Every mistake is an :class:`InstallError` naming the variable and the field, raised
before anything is installed.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Optional

from vecsched.engine.model.problem import ProblemError

from .checks import ENV_MODE, InstallError
from .efficient_settings import _parse

ENV_LIMITS = "VECSCHED_LIMITS"
ENV_AVAILABILITY = "VECSCHED_AVAILABILITY"
_LIMIT_KEYS = ("total", "per_group", "prices")


def limits_from_env(prices: Optional[dict] = None, raw: Optional[str] = None,
                    mode: Optional[str] = None):
    """The ``Limits`` of ``VECSCHED_LIMITS`` (``raw`` overrides the environment), or
    None when unset. ``prices``: the efficient options' prices, used when the
    variable gives none. ``mode``: the install mode; ``shadow`` takes no limits (Ray's
    scheduler decides, and knows none)."""
    from vecsched.engine.tick import Limits
    raw = os.environ.get(ENV_LIMITS) if raw is None else raw
    if raw is None or not raw.strip():
        return None
    if mode == "shadow":
        raise InstallError(f"{ENV_LIMITS} is set but {ENV_MODE}='shadow': in shadow mode "
                           "Ray's own scheduler decides, and it knows no limits; use "
                           f"{ENV_MODE}=engine or efficient; nothing was installed")
    data = _parse(raw, ENV_LIMITS)
    for key, v in data.items():
        if key not in _LIMIT_KEYS:
            raise InstallError(f"{ENV_LIMITS}: {key!r} is not a key of the limits (keys: "
                               f"{', '.join(_LIMIT_KEYS)}); nothing was installed")
        if not isinstance(v, dict):
            raise InstallError(f"{ENV_LIMITS}: {key!r} must be a JSON object, got {v!r}; "
                               "nothing was installed")
    if "prices" not in data and prices:
        data["prices"] = dict(prices)
    try:
        return Limits(**data)
    except (ProblemError, TypeError, ValueError, AttributeError) as e:
        raise InstallError(f"{ENV_LIMITS}: {e}; nothing was installed") from None


def availability_from_env(raw: Optional[str] = None, mode: Optional[str] = None):
    """``AvailabilityOptions`` from ``VECSCHED_AVAILABILITY``, ``False`` (off) or None
    (unset: the defaults). ``mode``: the install mode; options for a mode that keeps no
    memory (``engine``: ray-compat reads Ray's own availability scores; ``shadow``) are
    an error, as they would change nothing."""
    from vecsched.engine.tick import AvailabilityOptions
    raw = os.environ.get(ENV_AVAILABILITY) if raw is None else raw
    if raw is None or not raw.strip():
        return None
    if raw.strip().lower() == "false":
        return False
    if mode is not None and mode != "efficient":
        raise InstallError(f"{ENV_AVAILABILITY} is set but {ENV_MODE}={mode!r}: only "
                           f"{ENV_MODE}=efficient keeps an availability memory (ray-compat "
                           "reads Ray's own availability scores); nothing was installed")
    data = _parse(raw, ENV_AVAILABILITY)
    known = [f.name for f in dataclasses.fields(AvailabilityOptions)]
    for key in data:
        if key not in known:
            raise InstallError(f"{ENV_AVAILABILITY}: {key!r} is not an option of the "
                               f"availability memory (options: {', '.join(known)}); "
                               "nothing was installed")
    try:
        return AvailabilityOptions(**data)
    except (TypeError, ValueError) as e:
        raise InstallError(f"{ENV_AVAILABILITY}: {e}; nothing was installed") from None


# A KubeRay worker pod Pending this long counts as a stock-out (the node pool could not
# grow); Ray's own ALLOCATION_TIMEOUT comes only after allocate_status_timeout_s (1 h).
KUBERAY_PENDING_STOCKOUT_S = 300.0


def for_kuberay(setting):
    """The availability setting of the KubeRay side-car: ``setting`` (from
    ``VECSCHED_AVAILABILITY``) with ``pending_stockout_s`` defaulting to
    ``KUBERAY_PENDING_STOCKOUT_S``; ``False`` (off) stays off."""
    from vecsched.engine.tick import AvailabilityOptions
    if setting is False:
        return False
    base = setting if isinstance(setting, AvailabilityOptions) else AvailabilityOptions()
    if base.pending_stockout_s is None:
        base = dataclasses.replace(base, pending_stockout_s=KUBERAY_PENDING_STOCKOUT_S)
    return base


__all__ = ["ENV_LIMITS", "KUBERAY_PENDING_STOCKOUT_S", "for_kuberay", "ENV_AVAILABILITY", "limits_from_env", "availability_from_env"]
