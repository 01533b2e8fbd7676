"""The `vecsched` command."""
from __future__ import annotations

import argparse
import sys

from . import warmup as cli_warmup


def _demo(args) -> int:
    from .replay import run_demo
    return run_demo(args)


def _replay(args) -> int:
    from .replay import run_replay
    return run_replay(args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="vecsched", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="one realistic tick: engine vs greedy baseline vs Ray")
    from .replay import add_demo_arguments, add_replay_arguments
    add_demo_arguments(d)
    d.set_defaults(fn=_demo)
    r = sub.add_parser(
        "replay", help="replay a trace through the instance lifecycle: engine vs baseline vs Ray",
        description="Replay a recorded trace on a simulated clock with each scheduler; print "
                    "a summary table and write PNG plots. Default: the last 2,000 openb pods, "
                    "durations as recorded, arrivals 200x denser (see adapters/replay/).")
    add_replay_arguments(r)
    r.set_defaults(fn=_replay)
    from .ha import register as register_ha_demo
    register_ha_demo(sub)
    from .kuberay import register as _kuberay_demo
    from vecsched.adapters.ray.explain import register as _explain
    _kuberay_demo(sub)                 # vecsched kuberay-demo (adapters/cli/kuberay.py)
    _explain(sub)                      # vecsched explain (adapters/ray/explain.py)
    cli_warmup.add_parser(sub)
    from . import sweep as _sweep, trace as _trace
    _trace.register(sub), _sweep.register(sub)        # vecsched trace import / sweep
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
