#!/usr/bin/env bash
# Benchmark smoke for CI (about 3 minutes of CPU on 2 cores; no timing is asserted):
#   1. the published generator outputs have not drifted (append-only rule),
#   2. every asv benchmark and param runs once (asv run --quick) on the interpreter,
#      the trace-replay ones (bench_traces.py) included,
#   3. compare_ray runs Ray and the engine on one small tick and exits 1 if
#      their decisions differ.
# Usage: bash bench/smoke.sh   (PYTHON=... to choose the interpreter; default .venv)
# The scripts run as modules from the repository root (`python -m bench.X`), and asv
# gets the root on its path through ASV_PYTHONPATH, so that both import `bench` and
# `tests.kits` as packages.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-.venv/bin/python}
PY=$("$PY" -c "import sys; print(sys.executable)")     # absolute, for asv -E existing:PY
"$PY" -c "import asv" 2>/dev/null || "$PY" -m pip install -q "asv>=0.6"

echo "== generator fingerprints"
"$PY" -m bench.benchmarks.common

echo "== asv run --quick (existing environment = $PY)"
ASV=("$PY" -m asv)
log=$(mktemp)
(
  cd bench
  "${ASV[@]}" machine --yes >/dev/null
  ASV_PYTHONPATH="$ROOT" "${ASV[@]}" run --quick -E "existing:$PY" --show-stderr 2>&1 | tee "$log"
)
# asv 0.6 exits 2 when a benchmark fails (pipefail stops us above); older asv
# versions exit 0, so also look for failures in the log.
if grep -E "failed|Traceback" "$log" >/dev/null; then
  echo "asv: a benchmark failed" >&2; rm -f "$log"; exit 1
fi
rm -f "$log"

echo "== compare_ray (small)"
"$PY" -m bench.compare_ray --nodes 200 --requests 1000 --shapes 20 --repeat 1 --ray-cap 30
