"""The replay's schedulers by name: ``make(name)`` and ``register(name, factory)``.

Every scheduler of ``schedulers.py`` (engine, baseline, ray) and of ``efficient.py``
(the efficient mode's three) is registered here, so neither module imports the other's
users. The efficient mode's engine code compiles on first use, not on import.
"""
from __future__ import annotations

from typing import Callable

from .efficient import EfficientConsolidateSched, EfficientProxySched, EfficientSched
from .interface import ReplayScheduler
from .schedulers import BaselineSched, EngineSched, RaySched

# name -> factory(check_ray=False) -> scheduler. Add a scheduler with one `register`.
SCHEDULERS: dict[str, Callable[..., ReplayScheduler]] = {}


def register(name: str, factory: Callable[..., ReplayScheduler]) -> None:
    """Make ``factory(check_ray=False)`` available to ``make`` / ``--scheduler`` as ``name``."""
    SCHEDULERS[name] = factory


def _no_check(cls):
    def factory(check_ray: bool = False):
        if check_ray:
            raise ValueError("check_ray: only the engine schedulers are checked against Ray")
        return cls()
    return factory


register("engine", EngineSched)
register("baseline", _no_check(BaselineSched))
register("ray", _no_check(RaySched))
register("efficient", EfficientSched)
register("efficient-proxy", EfficientProxySched)
register("efficient-consolidate", EfficientConsolidateSched)
NAMES = tuple(SCHEDULERS)            # the default order of `vecsched replay`


def make(name: str, *, check_ray: bool = False):
    """A scheduler by name (a key of SCHEDULERS)."""
    factory = SCHEDULERS.get(name)
    if factory is None:
        raise ValueError(f"scheduler: unknown scheduler {name!r}; choose from "
                         f"{', '.join(SCHEDULERS)}")
    return factory(check_ray=check_ray)



__all__ = ["NAMES", "SCHEDULERS", "make", "register"]
