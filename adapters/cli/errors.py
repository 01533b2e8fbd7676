"""The command's errors: what counts as the user's mistake, how it is shown, and the
checks every subcommand makes before it starts any work.

A user error (a bad argument, a missing or unreadable file, a malformed input file,
vecsched's own typed errors, an optional dependency that is not installed) is shown as
one ``error: ...`` line on stderr and exit status 2. Anything else is a bug: one line
naming the exception, a hint to set ``VECSCHED_DEBUG=1``, exit status 1. With
``VECSCHED_DEBUG=1`` both show the full traceback.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Callable, Iterable

DEBUG_ENV = "VECSCHED_DEBUG"

# Which extra of the vecsched distribution brings each optional top-level module.
EXTRA_OF_MODULE = {
    "rich": "cli", "matplotlib": "cli",
    "ray": "ray", "google": "ray", "jsonpatch": "ray", "trustme": "ray",
    "ortools": "solver", "redis": "ha",
}
# What each extra must make importable, checked before a subcommand runs.
MODULES_OF_EXTRA = {
    "cli": ("rich", "matplotlib"),
    "ray": ("ray", "ray.autoscaler.v2.scheduler"),
    "solver": ("ortools",),
    "ha": ("redis",),
}


class UsageError(Exception):
    """A mistake in what the user asked for (an argument value, a file): the message
    names the offending argument or file."""


class MissingExtra(UsageError):
    """An optional dependency is not installed: the message says which extra brings it."""

    def __init__(self, command: str, extra: str, module: str):
        super().__init__(f"vecsched {command} needs the {extra!r} extra ({module} is not "
                         f"installed): pip install 'vecsched[{extra}]'")
        self.extra, self.module = extra, module


def _user_error_types() -> tuple:
    """The typed errors that are the user's mistake, wherever they are raised."""
    from vecsched.adapters.traces import TraceError
    from vecsched.engine.model.problem import ProblemError

    types = [UsageError, ProblemError, TraceError, OSError]
    try:
        from vecsched.adapters.ray.dump import DumpError
    except ImportError:             # no Ray: no dumps to read either
        pass
    else:
        types.append(DumpError)
    return tuple(types)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):     # a parent missing, or a None in sys.modules
        return False


def require_extras(command: str, extras: Iterable[str]) -> None:
    """Raise ``MissingExtra`` unless every module each of ``extras`` brings can be
    imported (checked without importing them)."""
    for extra in extras:
        for module in MODULES_OF_EXTRA[extra]:
            if not _importable(module):
                raise MissingExtra(command, extra, module.split(".")[0])


def check_output_dir(path: str, option: str) -> Path:
    """A directory the command will write into, made now (with its parents) and
    proven writable by writing a scratch file in it, so that a bad ``--out`` fails
    before the work rather than after it. (A permission check alone would pass
    everything for root.)"""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{option} {path}: exists and is not a directory (give a directory; "
                         f"it is made if it does not exist)")
    try:
        p.mkdir(parents=True, exist_ok=True)
        _probe(p)
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write there ({e.strerror or e})") from None
    return p


def check_output_file(path: str, option: str) -> Path:
    """A file the command will write: not a directory, and its directory made and
    proven writable now."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {path}: is a directory")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{option} {path}: file is not writable")
    try:
        p.absolute().parent.mkdir(parents=True, exist_ok=True)
        _probe(p.absolute().parent)
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write there ({e.strerror or e})") from None
    return p


def _probe(directory: Path) -> None:
    """Create and remove a scratch file in ``directory`` (raises OSError if it cannot)."""
    import tempfile
    with tempfile.NamedTemporaryFile(dir=directory, prefix=".vecsched-probe-"):
        pass


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 2000 else text[:2000] + "..."


def _describe(e: BaseException) -> str:
    """The message of a user error, with the file named for an OSError."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return _one_line(e)


def report(e: BaseException, command: str, debug: bool) -> int:
    """Show ``e`` as the command's one error line (plus the traceback when ``debug``);
    return the exit status."""
    if debug:
        traceback.print_exception(e, file=sys.stderr)
    if isinstance(e, ModuleNotFoundError) and e.name:
        top = e.name.split(".")[0]
        if top in EXTRA_OF_MODULE:
            e = MissingExtra(command, EXTRA_OF_MODULE[top], top)
    if isinstance(e, _user_error_types()):
        print(f"error: {_describe(e)}", file=sys.stderr)
        return 2
    if isinstance(e, MemoryError):
        print(f"error: out of memory in vecsched {command} (is an input count far too "
              f"large?)", file=sys.stderr)
        return 2
    hint = "" if debug else f" (set {DEBUG_ENV}=1 to see the traceback)"
    print(f"error: internal error in vecsched {command}: {type(e).__name__}: "
          f"{_one_line(e)}{hint}", file=sys.stderr)
    return 1


def run_guarded(fn: Callable[[], int], command: str) -> int:
    """Run ``fn`` and turn any exception into one error line and an exit status."""
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
    try:
        return fn()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        try:                                   # the reader went away (`| head`): quietly
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as e:  # noqa: BLE001 - the one place every error is shown
        return report(e, command, debug)
