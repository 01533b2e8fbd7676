"""Ray autoscaler v2 adapter: the only place (with tests) that imports Ray."""
from .scheduler import EngineScheduler

__all__ = ["EngineScheduler"]
