"""The efficient mode's options for the installed scheduler (``VECSCHED_MODE=efficient``).

Ray builds the autoscaler's scheduler itself, with no arguments of ours, so the options
come from the autoscaler process's environment: ``VECSCHED_EFFICIENT_OPTIONS`` holds a
JSON object, either inline (the value starts with ``{``) or in a file (any other value
is read as the file's path). Its keys are the fields of
``vecsched.engine.efficient.EfficientOptions`` that a deployment sets (every field but
``clock``, ``consolidate_hold``, ``consolidate_disrupting`` and ``consolidate_order``,
which the scheduler supplies per tick); JSON lists become the
tuples the options expect, e.g.::

    VECSCHED_MODE=efficient
    VECSCHED_EFFICIENT_OPTIONS='{"prices": {"gpu-a100-8": 32.8, "cpu-32": 1.5},
                                 "consolidate": 0.25, "drain_deadline_s": 60,
                                 "consolidate_after_s": 300,
                                 "consolidate_windows": [["22:00", "06:00"]]}'

With ``tick_budget_s`` set, the budget's wall-clock guard runs on ``time.monotonic``.
Every mistake (unreadable file, bad JSON, a key that is not an option, a value the
options refuse, options given to another mode) is an :class:`InstallError` naming
``VECSCHED_EFFICIENT_OPTIONS`` and the field, raised before anything is installed.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Optional

from .checks import ENV_MODE, InstallError

ENV_OPTIONS = "VECSCHED_EFFICIENT_OPTIONS"

# Supplied by the scheduler, never by a deployment.
_INTERNAL = ("clock", "consolidate_hold", "consolidate_disrupting", "consolidate_order")


def settable_fields() -> tuple:
    """The option names ``VECSCHED_EFFICIENT_OPTIONS`` may set, in declaration order."""
    from vecsched.engine.efficient import EfficientOptions
    return tuple(f.name for f in dataclasses.fields(EfficientOptions) if f.name not in _INTERNAL)


def efficient_options(mode: str, raw: Optional[str] = None):
    """The ``EfficientOptions`` for ``mode`` from ``raw`` (default: the environment), or
    None when no options are given (the mode's defaults). Raises :class:`InstallError`."""
    raw = os.environ.get(ENV_OPTIONS) if raw is None else raw
    if raw is None or not raw.strip():
        return None
    if mode != "efficient":
        raise InstallError(f"{ENV_OPTIONS} is set but {ENV_MODE}={mode!r}: only "
                           f"{ENV_MODE}=efficient takes options; nothing was installed")
    return _build(_parse(raw))


def _parse(raw: str, env: str = ENV_OPTIONS) -> dict:
    """The JSON object of ``raw`` (inline, or the path of a file), read for ``env``."""
    text, where = raw, "its value"
    if not raw.lstrip().startswith("{"):
        where = f"file {raw!r}"
        try:
            with open(raw, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise InstallError(f"{env}: cannot read {where}: {e.strerror or e}; "
                               "nothing was installed") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InstallError(f"{env}: {where} is not JSON ({e.msg} at line {e.lineno} "
                           f"column {e.colno}); nothing was installed") from None
    if not isinstance(data, dict):
        raise InstallError(f"{env}: {where} must be a JSON object of options, got "
                           f"{type(data).__name__}; nothing was installed")
    return data


def _build(data: dict):
    from vecsched.engine.efficient import EfficientOptions
    from vecsched.engine.solver.cpsat import SolverUnavailable
    known = settable_fields()
    for key in data:
        if key not in known:
            raise InstallError(f"{ENV_OPTIONS}: {key!r} is not an option of the efficient "
                               f"mode (options: {', '.join(known)}); nothing was installed")
    defaults = {f.name: f.default for f in dataclasses.fields(EfficientOptions)}
    for key, v in data.items():
        if isinstance(defaults[key], tuple) and not isinstance(v, list):
            raise InstallError(f"{ENV_OPTIONS}: {key!r} must be a JSON list, got {v!r}; "
                               "nothing was installed")
    kw = {k: _tuples(v) if k != "prices" else v for k, v in data.items()}
    if kw.get("prices") is not None and not isinstance(kw["prices"], dict):
        raise InstallError(f"{ENV_OPTIONS}: 'prices' must be an object of node type -> price "
                           f"per node-hour, got {kw['prices']!r}; nothing was installed")
    if kw.get("tick_budget_s") is not None:
        kw["clock"] = time.monotonic
    try:
        return EfficientOptions(**kw)
    except (ValueError, TypeError, SolverUnavailable) as e:
        raise InstallError(f"{ENV_OPTIONS}: {e}; nothing was installed") from None


def _tuples(v):
    """JSON lists (nested too) as tuples, the options' own types."""
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    return v
