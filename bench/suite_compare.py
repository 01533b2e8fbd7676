"""Two runs of ``bench/suite.py`` cell by cell: every figure must be identical (not close),
wall-time figures aside.

    .venv/bin/python bench/suite_compare.py BEFORE/suite.json AFTER/suite.json

Cells are matched by (workload, gangs, seed, scheduler); every key of ``CELL_KEYS`` but
the tick times (``TIMING``: wall time, different run to run) is compared with ``==``.
Prints one line per difference and a count; exit code 1 when anything differs or a
cell is in one run only.
"""
from __future__ import annotations

import argparse
import json
import sys

TIMING = ("tick_p50_ms", "tick_max_ms")
KEY = ("workload", "gangs", "seed", "scheduler")


def _cells(path: str) -> dict:
    with open(path) as f:
        return {tuple(c[k] for k in KEY): c for c in json.load(f)["cells"]}


def compare(before: dict, after: dict) -> list:
    """(cell, figure, before, after) of every difference; figure None: a missing cell."""
    out = []
    for cell in sorted(set(before) | set(after), key=str):
        a, b = before.get(cell), after.get(cell)
        if a is None or b is None:
            out.append((cell, None, a is not None, b is not None))
            continue
        for k in sorted(set(a) | set(b)):
            if k not in TIMING and a.get(k) != b.get(k):
                out.append((cell, k, a.get(k), b.get(k)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    args = ap.parse_args(argv)
    before, after = _cells(args.before), _cells(args.after)
    diff = compare(before, after)
    for cell, k, a, b in diff:
        print(f"{'/'.join(map(str, cell))}: " +
              (f"in before {a}, in after {b}" if k is None else f"{k} {a!r} -> {b!r}"))
    n = len(set(before) & set(after))
    figures = sum(len([k for k in c if k not in TIMING and k not in KEY])
                  for cell, c in before.items() if cell in after)
    print(f"{n} cells, {figures} figures compared (tick times aside): "
          f"{len(diff)} differences")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
