"""``vecsched warmup``: compile the numba kernels a tick runs, or load them from
numba's disk cache, once - for image builds (run it after ``pip install`` so
that no container compiles at start-up) - and the CLI's spinner while that
happens on a first run.

numba keeps compiled kernels next to the sources (``__pycache__``) or under
``NUMBA_CACHE_DIR``; with a warm cache a warm-up is a load of well under a second.
``VECSCHED_KERNEL_CACHE`` names a cache built at install time that is only read
(engine/kernels/_cache.py). ``--check`` compiles nothing and says, in one line
and its exit status, whether a start would only load the kernels. ``--portable``
builds such a cache for any CPU of this architecture (numba's ``generic`` CPU), for
an image built on one machine and run on others.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import os
import subprocess
import sys
import time
from typing import Callable, Optional

SPINNER_TEXT = "compiling kernels (first run only)"


def _parts(codec: bool) -> tuple[Callable[[], object], tuple]:
    """What warms up (a function) and the kernels it leaves in the cache: the
    engine's in both modes (an image is built once for either), and the Ray codec's
    when ``codec`` and Ray is installed."""
    if codec:
        try:
            from vecsched.adapters.ray.warming import entry_kernels, warm_all
            return functools.partial(warm_all, efficient=True), entry_kernels(efficient=True)
        except ImportError:            # no Ray here: the engine alone
            pass
    from vecsched.engine import warmup
    from vecsched.engine.warmup import entry_kernels
    return functools.partial(warmup, efficient=True), entry_kernels(efficient=True)


def warm_parts(codec: bool = True) -> tuple[Callable[[], object], tuple]:
    """(a function that warms every kernel a tick runs, those kernels): the engine's,
    and the Ray codec's when ``codec`` and Ray is installed (the test session's
    warm-up, ``tests/conftest.py``, uses it as ``warm_with_spinner`` does)."""
    return _parts(codec)


def kernels_missing(kernels) -> Optional[list]:
    """The ones of ``kernels`` numba's disk cache does not hold for this machine
    and these sources (a warm-up would compile them); None when it cannot tell.
    Reads numba's cache index (a private layout, hence None on any surprise)."""
    try:
        from vecsched.engine.warmup import portable_magic
        out = []
        for d in kernels:
            index = d._cache._cache_file._load_index()
            codegen = d.targetctx.codegen()
            magics = {codegen.magic_tuple()}
            if getattr(d._cache, "read_only", False):   # a shipped cache: portable too
                magics.add(portable_magic(codegen))
            code = hashlib.sha256(d.py_func.__code__.co_code).hexdigest()
            if not any(k[1] in magics and k[2][0] == code for k in index):
                out.append(d)
        return out
    except Exception:
        return None


def kernels_cached(kernels) -> Optional[bool]:
    """Whether numba's disk cache holds every one of ``kernels`` (a warm-up would
    only load them); None when it cannot tell."""
    missing = kernels_missing(kernels)
    return None if missing is None else not missing


def cache_place() -> str:
    """Where the kernels' cache is read from, in words."""
    shipped = os.environ.get("VECSCHED_KERNEL_CACHE")
    own = os.environ.get("NUMBA_CACHE_DIR") or "__pycache__ beside the kernels' sources"
    return f"{shipped} (read only), then {own}" if shipped else own


def check(codec: bool) -> tuple[int, str]:
    """``vecsched warmup --check``: (exit status, one line) - 0 warm (a start
    only loads the kernels), 1 cold (it would compile), 2 cannot tell. Compiles
    nothing."""
    kernels = _parts(codec)[1]
    missing = kernels_missing(kernels)
    where = cache_place()
    if missing is None:
        return 2, f"unknown: cannot read numba's cache index (cache: {where})"
    if missing:
        names = ", ".join(d.py_func.__name__ for d in missing[:3])
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        return 1, (f"cold: {len(missing)} of {len(kernels)} entry kernels not in the cache "
                   f"({names}{more}; cache: {where}); run vecsched warmup")
    return 0, f"warm: all {len(kernels)} entry kernels in the cache (cache: {where})"


def warm_with_spinner(console, *, codec: bool = True) -> dict:
    """Warm up; while kernels compile (a cold cache), say so: a spinner on a
    terminal, one line otherwise. Returns seconds, whether it compiled, the
    kernels it warmed."""
    fn, kernels = _parts(codec)
    cold = kernels_cached(kernels) is not True
    t0 = time.perf_counter()
    if not cold:
        fn()
    elif console.is_terminal:
        with console.status(SPINNER_TEXT, spinner="dots"):
            fn()
    else:
        console.print(f"{SPINNER_TEXT}...")
        fn()
    return {"seconds": time.perf_counter() - t0, "compiled": cold, "kernels": kernels}


def add_parser(sub) -> None:
    w = sub.add_parser(
        "warmup", help="compile the numba kernels (or load them from the cache) once",
        description="Compile every numba kernel a tick runs (the engine's and, with Ray "
                    "installed, the codec's), or load them from numba's cache when it is "
                    "warm. Run it at image build time, after pip install, so that "
                    "autoscalers start warm. NUMBA_CACHE_DIR chooses the cache directory "
                    "(it must be writable); VECSCHED_KERNEL_CACHE names a cache built that "
                    "way that is only read (a read-only image, docs/performance.md).")
    w.add_argument("--engine-only", action="store_true",
                   help="the engine's kernels only, not the Ray codec's")
    how = w.add_mutually_exclusive_group()
    how.add_argument("--check", action="store_true",
                     help="compile nothing: say whether the cache is warm (exit 0), cold "
                          "(1) or unreadable (2), in one line")
    how.add_argument("--portable", action="store_true",
                     help="build the cache in NUMBA_CACHE_DIR for any CPU of this "
                          "architecture (numba's generic CPU), to ship as "
                          "VECSCHED_KERNEL_CACHE to machines other than this one")
    w.set_defaults(fn=run)


class PlainConsole:
    """The part of rich's console the warm-up uses, for an install without the cli
    extra (an image that installs vecsched[ray] and warms up at build time): plain
    lines on stdout, rich's [markup] removed."""

    is_terminal = False

    def print(self, text: str = "", **_kw) -> None:
        import re
        print(re.sub(r"\[/?[a-z ]+\]", "", str(text)), flush=True)


def portable_child(engine_only: bool) -> int:
    """``--portable``: this warm-up again in a child interpreter whose numba builds
    generic code (numba reads NUMBA_CPU_NAME once, when it starts: this process
    may have started it already); the child's exit status."""
    from vecsched.engine.warmup import PORTABLE_CPU
    env = dict(os.environ, NUMBA_CPU_NAME=PORTABLE_CPU)
    env.pop("NUMBA_CPU_FEATURES", None)     # generic: none, numba's default for it
    argv = [sys.executable, "-m", "vecsched.adapters.cli.main", "warmup", "--portable"]
    return subprocess.call(argv + (["--engine-only"] if engine_only else []), env=env)


def run(args: argparse.Namespace) -> int:
    if args.check:
        status, line = check(codec=not args.engine_only)
        print(line, flush=True)
        return status
    if args.portable:
        from vecsched.engine.warmup import PORTABLE_CPU
        if not os.environ.get("NUMBA_CACHE_DIR"):
            print("error: --portable builds a cache to ship: set NUMBA_CACHE_DIR to the "
                  "directory to fill (then VECSCHED_KERNEL_CACHE to it at run time)",
                  file=sys.stderr, flush=True)
            return 2
        if os.environ.get("NUMBA_CPU_NAME") != PORTABLE_CPU:
            return portable_child(args.engine_only)
    try:
        from rich.console import Console
        console = Console()
    except ImportError:
        console = PlainConsole()
    res = warm_with_spinner(console, codec=not args.engine_only)
    where = cache_place()
    what = "compiled" if res["compiled"] else "loaded from the cache"
    portable = " for any CPU of this architecture (portable)" if args.portable else ""
    console.print(f"{len(res['kernels'])} entry kernels {what}{portable} in "
                  f"{res['seconds']:.1f} s (cache: {where})")
    if kernels_cached(res["kernels"]) is False:
        console.print("[red]error:[/red] the kernels are not in numba's cache after the "
                      "warm-up: is the cache directory writable?")
        return 1
    return 0
