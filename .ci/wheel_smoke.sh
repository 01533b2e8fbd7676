#!/usr/bin/env bash
# Wheel smoke: build the wheel (not an editable install), install it with the README's
# extras into a fresh venv, and run the main job's two commands from a directory outside
# the checkout, so the bundled traces must come from the package data. Also checks that
# the engine and the Ray adapter import neither matplotlib nor rich when installed so.
# Usage: bash .ci/wheel_smoke.sh   (PYTHON=... for the interpreter of the fresh venv)
# Bounded: the demo and the replay each run under `timeout` (the first call compiles the
# numba kernels of the fresh install, 45-100 s on a 2-core machine).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== build the wheel"
"$PY" -m venv "$tmp/build-env"
"$tmp/build-env/bin/pip" install -q --upgrade pip >/dev/null
# from a copy without build/, .venv/ and caches: setuptools would pack stale build/lib files
mkdir "$tmp/src"
tar -C "$repo" --exclude=./.venv --exclude=./build --exclude=./.git --exclude='*.egg-info' \
    --exclude=__pycache__ --exclude=./bench/.asv -cf - . | tar -C "$tmp/src" -xf -
"$tmp/build-env/bin/pip" wheel -q --no-deps -w "$tmp/dist" "$tmp/src"
wheel=$(ls "$tmp"/dist/vecsched-*.whl)
echo "$wheel"
# Every installed module lives under vecsched: nothing named engine or adapters at the top.
tops=$("$PY" -c "import sys, zipfile; print(' '.join(sorted({n.split('/')[0] for n in zipfile.ZipFile(sys.argv[1]).namelist() if not n.split('/')[0].endswith('.dist-info')})))" "$wheel")
[ "$tops" = "vecsched" ] || { echo "wheel smoke: top-level names are '$tops', not 'vecsched'" >&2; exit 1; }
echo "== install it into a fresh venv"
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --upgrade pip >/dev/null
"$tmp/venv/bin/pip" install -q "${wheel}[cli,ray]"
cd "$tmp"          # outside the checkout: nothing can come from the repository
export NUMBA_CACHE_DIR="$tmp/numba-cache"
"$tmp/venv/bin/python" - <<'EOF'
import sys
import vecsched.adapters.traces as T
import vecsched.engine as engine
from vecsched.adapters.ray import EngineScheduler
EngineScheduler()
assert "site-packages" in T.__file__, T.__file__
assert T.read_demand(T.bundled("openb")).num_rows == 8152
bad = [m for m in ("matplotlib", "rich") if m in sys.modules]
assert not bad, f"the engine and the Ray adapter imported {bad}"
print("installed package:", engine.__file__, "- bundled traces present, no matplotlib/rich")
EOF
echo "== vecsched demo (from $tmp)"
timeout 900 "$tmp/venv/bin/vecsched" demo --nodes 100 --pending 300 --repeat 1
echo "== vecsched replay (from $tmp)"
timeout 600 "$tmp/venv/bin/vecsched" replay --pods 150 --out "$tmp/replay-out"
test -s "$tmp/replay-out/summary.json" && test -s "$tmp/replay-out/pending.png"
echo "wheel smoke: ok"
