"""``vecsched explain`` on a large dump: the sample tick grown to N request rows
(``vecsched explain --write-sample PATH --rows N``), each phase timed in wall and CPU
seconds (on a shared machine the CPU seconds are the figure to compare).

    .venv/bin/python -m bench.explain_large --rows 100000
"""
from __future__ import annotations

import argparse
import io
import os
import tempfile
import time


def _clock():
    return time.perf_counter(), time.process_time()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args(argv)
    from rich.console import Console

    from vecsched.adapters.cli import explain as cli
    from vecsched.adapters.ray.explain import explain
    from vecsched.adapters.ray.explain_input import load_for_explain
    from vecsched.adapters.ray.explain_sample import write_sample
    from vecsched.engine import warmup
    warmup()
    with tempfile.TemporaryDirectory() as tmp:
        path = write_sample(os.path.join(tmp, "big.json"), args.rows)
        mb = os.path.getsize(path) / 1e6
        marks = [("start", _clock())]
        request, context = load_for_explain(path)
        marks.append(("load and check", _clock()))
        res = explain(request, context)
        marks.append(("decide and word", _clock()))
        cli.report(path, res, cli.DEFAULT_LIMIT, Console(file=io.StringIO(), width=120))
        marks.append(("report", _clock()))
    print(f"{args.rows} request rows ({mb:.1f} MB), {len(res['unplaced'])} unplaced rows")
    for (_, (w0, c0)), (name, (w1, c1)) in zip(marks, marks[1:]):
        print(f"  {name:<16} wall {w1 - w0:6.2f} s  cpu {c1 - c0:6.2f} s")
    w, c = marks[-1][1][0] - marks[0][1][0], marks[-1][1][1] - marks[0][1][1]
    print(f"  {'total':<16} wall {w:6.2f} s  cpu {c:6.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
