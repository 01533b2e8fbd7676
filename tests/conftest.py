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
