"""Where a cold start's compile time goes: every numba compilation of
``vecsched.engine.warmup()`` (and the codec's scan) in a fresh interpreter with an empty
numba cache, per kernel and per specialisation.

    python -m bench.compile_profile [--top 40] [--json] [--warm] [--python PY]

Runs a child interpreter with ``NUMBA_CACHE_DIR`` set to a new temporary
directory (so everything compiles) and listens to numba's ``numba:compile``
events. Each compilation is one (kernel, argument types) specialisation; its
*inclusive* time contains the compilations it triggered (callees are compiled
first, as nested events), its *self* time does not. Prints per kernel: how many
specialisations, self and inclusive seconds; then the wall and CPU (user+sys)
seconds of the whole warm-up. ``--warm`` runs a second child on the same cache
(cache load only). Nothing is asserted; the machine is shared, so compare CPU
seconds as well as wall seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, time
from numba.core import event

records, stack = [], []


class _L(event.Listener):
    def on_start(self, ev):
        stack.append([time.perf_counter(), 0.0, 0.0])

    def on_end(self, ev):
        t0, nested, llvm = stack.pop()
        dt = time.perf_counter() - t0
        if stack:
            stack[-1][1] += dt
        d = ev.data["dispatcher"]
        py = d.py_func
        records.append({"kernel": f"{py.__module__}.{py.__qualname__}",
                        "args": str(ev.data["args"]), "incl": dt, "self": dt - nested,
                        "llvm": llvm, "depth": len(stack)})


class _Lock(event.Listener):
    # LLVM time (the LLVM lock held) of the innermost compilation
    def on_start(self, ev):
        self.t0 = time.perf_counter()

    def on_end(self, ev):
        if stack:
            stack[-1][2] += time.perf_counter() - self.t0


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


event.register("numba:compile", _L())
event.register("numba:llvm_lock", _Lock())
w0, c0 = time.perf_counter(), cpu()
import vecsched.engine as engine
from vecsched.engine import warmup
w1, c1 = time.perf_counter(), cpu()
warmup()
w2, c2 = time.perf_counter(), cpu()
codec = None
try:
    from vecsched.adapters.ray import wire
    wire.warmup()
    codec = True
except ImportError:          # no Ray here: the engine alone
    codec = False
w3, c3 = time.perf_counter(), cpu()
print(json.dumps({"records": records, "import_wall": w1 - w0, "import_cpu": c1 - c0,
                  "warmup_wall": w2 - w1, "warmup_cpu": c2 - c1,
                  "codec": codec, "codec_wall": w3 - w2, "codec_cpu": c3 - c2,
                  "python": sys.version.split()[0]}))
"""


def run_child(cache_dir: str, python: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir,
               PYTHONPATH=os.pathsep.join(p for p in (str(_ROOT),
                                                      os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([python, "-c", _CHILD], env=env, capture_output=True, text=True,
                         cwd=str(_ROOT))
    if out.returncode:
        raise SystemExit(f"warm-up child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarise(res: dict, top: int) -> str:
    by: dict = {}
    for r in res["records"]:
        k = by.setdefault(r["kernel"], {"specs": 0, "self": 0.0, "incl": 0.0, "llvm": 0.0,
                                        "args": []})
        k["specs"] += 1
        k["self"] += r["self"]
        k["llvm"] += r.get("llvm", 0.0)
        k["incl"] += r["incl"]
        k["args"].append(r["args"])
    rows = sorted(by.items(), key=lambda kv: -kv[1]["self"])
    total_self = sum(v["self"] for v in by.values())
    lines = [f"{'kernel':58s} {'specs':>5s} {'self s':>8s} {'llvm s':>8s} {'incl s':>8s}"]
    for name, v in rows[:top]:
        short = name.replace("vecsched.engine.kernels.", "k.").replace("vecsched.adapters.ray.", "a.")
        lines.append(f"{short:58s} {v['specs']:5d} {v['self']:8.2f} {v['llvm']:8.2f} "
                     f"{v['incl']:8.2f}")
    lines.append(f"{len(by)} kernels, {len(res['records'])} specialisations, "
                 f"self total {total_self:.2f} s, of which LLVM "
                 f"{sum(v['llvm'] for v in by.values()):.2f} s")
    dup = {k: v for k, v in by.items() if v["specs"] > 1}
    for name, v in sorted(dup.items(), key=lambda kv: -kv[1]["self"]):
        lines.append(f"  {v['specs']} specialisations of {name}:")
        for a in v["args"]:
            lines.append(f"      {a[:200]}")
    lines.append(f"python {res['python']}: import {res['import_wall']:.2f} s wall "
                 f"({res['import_cpu']:.2f} s CPU); vecsched.engine.warmup() "
                 f"{res['warmup_wall']:.2f} s wall ({res['warmup_cpu']:.2f} s CPU); codec "
                 f"scan {res['codec_wall']:.2f} s wall ({res['codec_cpu']:.2f} s CPU)")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--warm", action="store_true", help="also a second run on the same cache")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vecsched-numba-") as d:
        cold = run_child(d, a.python)
        warm = run_child(d, a.python) if a.warm else None
    if a.json:
        print(json.dumps({"cold": cold, "warm": warm}))
        return
    print(summarise(cold, a.top))
    if warm is not None:
        print(f"warm: vecsched.engine.warmup() {warm['warmup_wall']:.2f} s wall "
              f"({warm['warmup_cpu']:.2f} s CPU), {len(warm['records'])} compilations")


if __name__ == "__main__":
    main()
