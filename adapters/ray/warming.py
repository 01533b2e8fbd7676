"""Compiling (or loading from numba's cache) everything a tick runs, once per
process: the engine's kernels and the codec's scan of the nodes' maps.

The installed autoscaler scheduler (``AutoscalerScheduler``) warms up in a
background thread (:class:`Warmup`) and lets Ray's own scheduler decide until
it is done, so an autoscaler never waits on a compile; ``vecsched warmup``
runs :func:`warm_all` ahead of time (an image build), so that the background
warm-up is only a cache load.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

logger = logging.getLogger(__name__)


def warm_all(efficient: bool = False) -> dict:
    """Compile or load every kernel a tick runs (with ``efficient``, the efficient
    mode's too); seconds per part."""
    from vecsched.engine import warmup

    from . import wire

    t0 = time.perf_counter()
    engine_s = warmup(efficient)
    t1 = time.perf_counter()
    wire.warmup()
    return {"engine_s": engine_s, "codec_s": time.perf_counter() - t1,
            "total_s": time.perf_counter() - t0}


def entry_kernels(efficient: bool = False) -> tuple:
    """The numba functions a tick calls from Python (engine and codec; with
    ``efficient``, the efficient mode's too)."""
    from vecsched.engine.warmup import entry_kernels as engine_kernels

    from . import wire

    return engine_kernels(efficient) + (wire._scan,)


class Warmup:
    """One warm-up in a daemon thread (started at once).

    ``fn`` does the work (default :func:`warm_all`). :meth:`ready` is true once
    it returned; if it raised, the error is kept (:attr:`error`), logged, and
    :meth:`ready` stays false."""

    def __init__(self, fn: Optional[Callable[[], object]] = None):
        self._fn = fn or warm_all
        self._done = threading.Event()
        self.seconds: Optional[float] = None
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name="vecsched-warmup", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            self._fn()
        except BaseException as e:          # reported, never raised into the autoscaler
            self.error = e
            logger.exception("vecsched: the engine's warm-up failed; Ray's "
                             "ResourceDemandScheduler keeps deciding")
        finally:
            self.seconds = time.perf_counter() - t0
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def ready(self) -> bool:
        return self._done.is_set() and self.error is None

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the warm-up is over (tests, tools); True if it is."""
        return self._done.wait(timeout)
