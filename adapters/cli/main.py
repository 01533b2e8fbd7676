"""The vecsched command: demos of the engine against Ray's own scheduler, trace replays,
the HA and KubeRay demos, and explain for a dumped autoscaler tick.

Every user error is one "error: ..." line on stderr and exit status 2; set
VECSCHED_DEBUG=1 to see the traceback.
"""
from __future__ import annotations

import argparse
import re
import sys

from . import warmup as cli_warmup
from .errors import check_output_dir, require_extras, run_guarded

# The extras each subcommand needs, checked before it starts (a subcommand may set its
# own with set_defaults(needs=...)).
NEEDS = {"demo": ("cli",), "replay": ("cli",), "ha-demo": ("cli", "ha"),
         "kuberay-demo": ("cli", "ray"), "explain": ("cli", "ray"), "warmup": (),
         "trace": (), "sweep": ("cli", "ray")}
# Subcommands whose --out is checked here, before they start (the others check their
# own, after their other arguments).
OUT_CHECKED_HERE = ("kuberay-demo",)


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as one line: ``error: <prog>: <message>``, exit 2 (the
    usage is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


_ROLE = re.compile(r":[a-z]+:`([^`]*)`")        # :class:`x` -> x
_LITERAL = re.compile(r"``([^`]*)``")           # ``x`` -> x
_TICKS = re.compile(r"`([^`]*)`")               # `x` -> x


def plain(text):
    """Help text without reStructuredText markup (docstrings are written in it; a
    terminal shows it raw)."""
    if not text:
        return text
    return _TICKS.sub(r"\1", _LITERAL.sub(r"\1", _ROLE.sub(r"\1", text)))


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Strip markup from a parser's description, epilog and every argument's help,
    and from its subcommands', recursively."""
    parser.description = plain(parser.description)
    parser.epilog = plain(parser.epilog)
    for action in parser._actions:
        action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain(choice.help)
            for sub in action.choices.values():
                _plain_help(sub)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("vecsched")
    except PackageNotFoundError:
        return "unknown (not installed as a distribution)"


def _demo(args) -> int:
    from .replay import run_demo
    return run_demo(args)


def _replay(args) -> int:
    from .replay import run_replay
    return run_replay(args)


def build_parser() -> argparse.ArgumentParser:
    """The command line: every subcommand and its arguments."""
    ap = OneLineParser(prog="vecsched", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"vecsched {_version()}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    d = sub.add_parser("demo", help="one realistic tick: engine vs greedy baseline vs Ray",
                       description="Decide one realistic tick from a bundled trace with the "
                                   "engine, the greedy baseline and Ray 2.60's own scheduler "
                                   "and show their decisions and times side by side.")
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
    from .explain import register as _explain
    _kuberay_demo(sub)                 # vecsched kuberay-demo (adapters/cli/kuberay.py)
    _explain(sub)                      # vecsched explain (adapters/cli/explain.py)
    from . import sweep as _sweep, trace as _trace
    _trace.register(sub)               # vecsched trace import (adapters/cli/trace.py)
    _sweep.register(sub)               # vecsched sweep (adapters/cli/sweep.py)
    cli_warmup.add_parser(sub)
    _plain_help(ap)
    return ap


def main(argv=None) -> int:
    def run() -> int:
        args = build_parser().parse_args(argv)
        require_extras(args.cmd, getattr(args, "needs", None) or NEEDS.get(args.cmd, ()))
        if args.cmd in OUT_CHECKED_HERE:
            check_output_dir(args.out, "--out")
        return args.fn(args)
    command = next((a for a in (sys.argv[1:] if argv is None else argv)
                    if not a.startswith("-")), "")
    return run_guarded(run, command)


if __name__ == "__main__":
    sys.exit(main())
