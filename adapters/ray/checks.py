"""Whether the engine may be installed here: the mode asked for and the Ray
version (adapters/ray/install.py; docs/ray.md "Version guard")."""
from __future__ import annotations

import logging
import os
from typing import Optional

import ray

logger = logging.getLogger(__name__)

TESTED_RAY_VERSIONS = ("2.60.0",)
MODES = ("engine", "efficient", "shadow", "ray")
ENV_MODE = "VECSCHED_MODE"
ENV_UNTESTED_RAY = "VECSCHED_UNTESTED_RAY"


class InstallError(RuntimeError):
    """The engine cannot be installed here; nothing was changed."""


def resolve_mode(mode: Optional[str] = None) -> str:
    mode = (mode if mode is not None else os.environ.get(ENV_MODE, "engine")).strip().lower()
    if mode not in MODES:
        raise InstallError(f"{ENV_MODE}={mode!r} is not one of {', '.join(MODES)}; "
                           "nothing was installed")
    return mode


def ray_version_supported(version: Optional[str] = None) -> bool:
    return (version or ray.__version__) in TESTED_RAY_VERSIONS


def check_ray_version(version: Optional[str] = None) -> bool:
    """True if this Ray is a tested one. Otherwise raise :class:`InstallError`, or, with
    ``VECSCHED_UNTESTED_RAY=ray``, log at ERROR level and return False (run stock Ray)."""
    version = version or ray.__version__
    if version in TESTED_RAY_VERSIONS:
        return True
    policy = os.environ.get(ENV_UNTESTED_RAY, "refuse").strip().lower()
    what = (f"vecsched's EngineScheduler is tested with Ray {', '.join(TESTED_RAY_VERSIONS)} "
            f"only, and this is Ray {version} ({ray.__file__})")
    if policy == "ray":
        logger.error("%s: NOT installed; the autoscaler runs Ray's own "
                     "ResourceDemandScheduler (%s=ray).", what, ENV_UNTESTED_RAY)
        return False
    if policy != "refuse":
        what += f"; also, {ENV_UNTESTED_RAY}={policy!r} is neither 'refuse' nor 'ray'"
    raise InstallError(
        f"{what}. Refusing to install it; nothing was changed. Either install "
        f"ray=={TESTED_RAY_VERSIONS[-1]}, or run Ray's own autoscaler (drop RAY_START_HOOK / "
        f"use Ray's monitor command), or set {ENV_UNTESTED_RAY}=ray to start with Ray's "
        "scheduler and an error in the log.")
