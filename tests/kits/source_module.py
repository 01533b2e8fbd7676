"""A module loaded from a source file under a name of its own, as a new process would
import it: numba's disk cache then answers for it as for a fresh start (the kernel
cache tests)."""
from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def load_module(path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[name]
    return mod
