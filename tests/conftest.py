"""Settings every test process shares.

Ray 2.60 turns token authentication on for a new local cluster (`ray.init()` with no
address) when ``RAY_AUTH_MODE`` is unset, and writes ``~/.ray/auth_token``; every cluster
started later with the mode unset then requires that token, and a driver or child process
without it cannot connect. The tests' clusters, drivers and child processes all run with
authentication off, set here once, so no test depends on a token file or leaves one
that changes the next test's cluster.
"""
import os

os.environ["RAY_AUTH_MODE"] = "disabled"


def pytest_collection_finish(session):
    """On a cold numba cache (a fresh clone), compile the engine's kernels once before
    the first test, saying so, instead of inside whichever test needs them first (a
    minute or more with no output on a busy machine). A warm cache, a run whose tests
    never imported the engine, or --collect-only skips it; so does
    VECSCHED_TEST_NO_WARMUP=1."""
    import sys
    import time

    if session.config.option.collectonly or not session.items \
            or os.environ.get("VECSCHED_TEST_NO_WARMUP", "") not in ("", "0") \
            or not any(m.startswith("vecsched.engine") for m in sys.modules):
        return
    from vecsched.adapters.cli.warmup import kernels_cached, warm_parts
    fn, kernels = warm_parts(codec="ray" in sys.modules)
    if kernels_cached(kernels) is not False:       # cached, or cannot tell: leave it
        return
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    say = tr.write_line if tr is not None else print
    say(f"vecsched: compiling the engine's {len(kernels)} numba kernels once for this "
        f"checkout (a cold cache; 1-3 min on 2 cores; later runs load them in a second)")
    t0 = time.perf_counter()
    fn()
    say(f"vecsched: kernels compiled in {time.perf_counter() - t0:.0f} s")
