"""Ray autoscaler v2 adapter: ``EngineScheduler`` (a subclass of Ray's
``ResourceDemandScheduler``), its codec, install and start hook, shadow mode, metrics,
dump and explain.

Its modules may import Ray at module top; this package's ``__init__`` does not. Other
adapters bind to Ray too (the KubeRay side-car, the lease's Ray storage, the simulated
Ray cluster, the replay's Ray contender): docs/design.md §2, "Where Ray is imported",
lists them, and tests/house/test_layering.py checks the list.

``EngineScheduler`` is imported lazily so that ``vecsched.adapters.ray.install`` can check
the Ray version before Ray's scheduler module (and the engine) are loaded.
"""
__all__ = ["EngineScheduler", "dump_request", "load_request"]


def __getattr__(name):
    if name == "EngineScheduler":
        from .scheduler import EngineScheduler
        return EngineScheduler
    if name in ("dump_request", "load_request"):      # one tick's request to/from a file
        from . import dump
        return getattr(dump, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
