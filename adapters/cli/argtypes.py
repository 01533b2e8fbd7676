"""argparse value types that refuse bad numbers at parse time, naming the limit (one
``error:`` line from the parser, before any work)."""
from __future__ import annotations

import argparse
import math


def _number(text: str, kind: type):
    try:
        value = kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    n = _number(text, int)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def count(text: str) -> int:
    """A whole number >= 0."""
    n = _number(text, int)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def positive_float(text: str) -> float:
    """A finite number > 0."""
    x = _number(text, float)
    if x <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return x


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    x = _number(text, float)
    if x < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return x


def share(text: str) -> float:
    """A number from 0 to 1."""
    x = _number(text, float)
    if not 0 <= x <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return x
