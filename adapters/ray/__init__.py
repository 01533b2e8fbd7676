"""Ray autoscaler v2 adapter: the only place (with tests) that imports Ray.

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
