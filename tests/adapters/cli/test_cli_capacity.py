"""``vecsched replay --capacity GROUP=N --limit RESOURCE=N``: bad flags are one error
line, and a short replay reports the cloud's answers and the limits in summary.json."""
from __future__ import annotations

import json

import pytest

from tests.kits.cli_run import run_cli as _run

BAD = [
    (["--capacity", "g3-128c-768g-8gpu"], "--capacity 'g3-128c-768g-8gpu': expected GROUP=N"),
    (["--capacity", "g3-128c-768g-8gpu=-2"], "N must be >= 0"),
    (["--capacity", "nope=3"], "--capacity nope: no worker group named 'nope'"),
    (["--capacity", "g3-128c-768g-8gpu=600:1,0:2"], "times must ascend"),
    (["--limit", "GPU"], "--limit 'GPU': expected RESOURCE=N"),
    (["--limit", "GPU=-1"], "--limit 'GPU=-1'"),
    (["--limit", "nope/GPU=3"], "--limit nope/GPU: no worker group named 'nope'"),
    (["--limit", "gpu=8"], "--limit gpu: no worker group offers a resource named 'gpu', so "
                           "it would cap nothing; did you mean 'GPU'?"),
    (["--limit", "TPU=8"], "--limit TPU: no worker group offers a resource named 'TPU'"),
    (["--limit", "cpu-32c-128g/GPU=1"], "worker group 'cpu-32c-128g' does not offer"),
]


@pytest.mark.parametrize("flags,fragment", BAD, ids=[" ".join(f) for f, _ in BAD])
def test_bad_capacity_and_limit_flags_are_one_error_line(capsys, tmp_path, flags, fragment):
    code, lines, out = _run(capsys, "replay", "--scheduler", "baseline", "--pods", "20",
                            "--out", str(tmp_path / "o"), *flags)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert fragment in lines[0], lines


def test_capacity_and_limits_reach_summary_json(capsys, tmp_path):
    out = tmp_path / "o"
    code, lines, _ = _run(capsys, "replay", "--scheduler", "engine,baseline,efficient",
                          "--no-check-ray", "--pods", "150", "--seed", "0",
                          "--capacity", "g3-128c-768g-8gpu=1", "--capacity",
                          "g2-96c-384g-8gpu=0:1,300:none", "--limit", "GPU=40",
                          "--limit", "cost_per_hour=200", "--out", str(out))
    assert code == 0, lines
    doc = json.loads((out / "summary.json").read_text())
    assert doc["config"]["capacity"] == {"g3-128c-768g-8gpu": 1,
                                         "g2-96c-384g-8gpu": "0:1,300:none"}
    assert doc["config"]["limits"] == {"GPU": 40.0, "cost_per_hour": 200.0}
    for name in ("engine", "baseline", "efficient"):
        m = doc["schedulers"][name]
        for k in ("never_placed", "stockouts", "launch_failures", "interruptions",
                  "peak_asked", "limit_blocked_ticks"):
            assert k in m, (name, k)
        assert m["peak_asked"]["GPU"] <= 40.0 and m["peak_asked"]["cost_per_hour"] <= 200.0
        assert m["limit_violations"] == {}
        assert m["capacity"]["g3-128c-768g-8gpu"]["capacity"] == 1
