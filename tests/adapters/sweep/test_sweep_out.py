"""Two sweeps on one ``--out``: the directory is locked (a second sweep refuses with one
``error:`` line, exit 2, before Ray starts; a lock left by a dead sweep is taken
over), rows are merged by key and written atomically under unique temporary names
(concurrent writers lose nothing, readers never see a broken table), and the Pareto
front is drawn per price list."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vecsched.adapters.cli.main import main
from vecsched.adapters.sweep import SweepLock, SweepLocked, front, parse, price_lists, read_rows
from vecsched.adapters.sweep.lock import LOCK
from vecsched.adapters.sweep.results import RESULTS, write_rows

from tests.kits.paths import REPO

SMALL = REPO / "data" / "examples" / "sweep-small.toml"
GRID = """
[sweep]
tail_s = 60
[workloads.tail]
trace = "openb"
pods = 40
arrival_scale = 200
[grid]
scheduler = ["baseline"]
seed = [0, 1, 2]
"""
HOLD = textwrap.dedent("""
    import sys, time
    from vecsched.adapters.sweep import SweepLock
    lock = SweepLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    time.sleep(600)
""")


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))


def _wait_line(proc, want: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if want in line:
            return
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no {want!r} from the child: {proc.stderr.read()}")


# ---- the lock ------------------------------------------------------------------------
def test_a_held_lock_refuses_a_second_sweep_naming_the_holder(tmp_path):
    with SweepLock(tmp_path):
        with pytest.raises(SweepLocked) as e:
            SweepLock(tmp_path).acquire()
        assert f"pid {os.getpid()} on " in str(e.value)
        assert str(e.value).startswith(f"--out {tmp_path}: another sweep is writing there")
    assert not (tmp_path / LOCK).exists()              # released: removed
    with SweepLock(tmp_path):                          # and free again
        pass


def test_a_lock_held_by_a_live_process_then_left_by_a_dead_one(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_line(child, "locked")
        with pytest.raises(SweepLocked, match=f"pid {child.pid} on "):
            SweepLock(tmp_path).acquire()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert f'"pid": {child.pid}' in (tmp_path / LOCK).read_text()   # left behind, stale
    with SweepLock(tmp_path) as lock:                  # the dead pid's lock is taken over
        assert f'"pid": {os.getpid()}' in lock.path.read_text()


def test_a_stale_lock_file_written_by_hand_is_taken_over(tmp_path):
    (tmp_path / LOCK).write_text('{"pid": 999999999, "host": "elsewhere", "started": 0}')
    with SweepLock(tmp_path):
        pass


# ---- the table -----------------------------------------------------------------------
def _rows(keys, **extra):
    return [{"key": k, "scheduler": "baseline", "cost": 1.0, "pending_p95_s": 1.0, **extra}
            for k in keys]


def test_rows_are_merged_by_key_not_overwritten(tmp_path):
    write_rows(tmp_path, _rows(["a", "b"]), {})
    write_rows(tmp_path, _rows(["c"]), {})             # a writer that never read a and b
    write_rows(tmp_path, _rows(["b"], cost=2.0), {})
    rows = {r["key"]: r for r in read_rows(tmp_path)}
    assert sorted(rows) == ["a", "b", "c"] and rows["b"]["cost"] == 2.0
    assert [p.name for p in tmp_path.iterdir()] == [RESULTS]      # no temporary file left


WRITER = textwrap.dedent("""
    import sys
    from vecsched.adapters.sweep.results import write_rows
    out, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(n):
        write_rows(out, [{"key": f"{tag}-{i}", "scheduler": "baseline", "cost": float(i),
                          "pending_p95_s": 1.0}], {})
""")


@pytest.mark.slow
def test_concurrent_writers_lose_nothing_and_readers_never_see_a_broken_table(tmp_path):
    n = 15
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag, str(n)],
                              env=_env(), stderr=subprocess.PIPE, text=True) for tag in "xy"]
    reads = 0
    while any(p.poll() is None for p in procs):
        if (tmp_path / RESULTS).exists():
            read_rows(tmp_path)                        # raises on a partial file
            reads += 1
        time.sleep(0.005)
    errors = [p.stderr.read() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    keys = [r["key"] for r in read_rows(tmp_path)]
    assert sorted(keys) == sorted(f"{t}-{i}" for t in "xy" for i in range(n)) and reads > 0
    assert not [p for p in tmp_path.iterdir() if p.name != RESULTS]


# ---- the command ---------------------------------------------------------------------
def _ray_started() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def test_sweep_out_a_file_fails_before_ray(tmp_path, capsys):
    f = tmp_path / "results.txt"
    f.write_text("keep me")
    assert main(["sweep", str(SMALL), "--out", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --out {f}: exists and is not a "
                                               f"directory"), err
    assert f.read_text() == "keep me" and not _ray_started()


def test_a_second_sweep_on_a_locked_out_is_one_error_line_before_ray(tmp_path, capsys):
    grid = tmp_path / "g.toml"
    grid.write_text(GRID)
    out = tmp_path / "out"
    with SweepLock(out):
        assert main(["sweep", str(grid), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --out {out}: another sweep is "
                                               f"writing there (pid {os.getpid()} on "), err
    assert captured.out == "" and not _ray_started() and not (out / RESULTS).exists()


def test_the_front_is_drawn_per_price_list(tmp_path):
    rows = [{"key": k, "workload": "w", "scheduler": s, "catalogue": cat, "seed": 0,
             "idle_timeout_s": 60, "cost": c, "gpu_hours": g, "pending_p95_s": p}
            for k, s, cat, c, g, p in (("a", "engine", "list", 100.0, 9.0, 50.0),
                                       ("b", "efficient", "list", 80.0, 8.0, 60.0),
                                       ("c", "engine", "x2", 190.0, 9.0, 50.0),
                                       ("d", "efficient", "x2", 150.0, 8.0, 60.0))]
    lists = price_lists(rows, "cost")
    assert sorted(lists) == ["list", "x2"]
    assert [r["key"] for r in front(lists["x2"], "cost")] == ["d", "c"]   # not dominated by a
    assert list(price_lists(rows, "gpu_hours")) == [""]                 # prices do not matter
    from vecsched.adapters.cli.sweep import report
    from vecsched.adapters.sweep import SweepOutcome
    lines: list[str] = []
    report(SweepOutcome(rows=rows), parse({"workloads": {"w": {"trace": "openb", "pods": 10}}}),
           tmp_path, echo=lines.append)
    assert "non-dominated cells at list prices (cost against pending p95), 2 of 2:" in lines
    assert "non-dominated cells at x2 prices (cost against pending p95), 2 of 2:" in lines
    assert (tmp_path / "pareto.png").is_file()


@pytest.mark.cluster
@pytest.mark.slow
def test_two_sweeps_started_together_on_one_out(tmp_path):
    """Two ``vecsched sweep GRID --out DIR`` started at once: one runs every cell, the
    other exits 2 with one error line; DIR/results.parquet holds each cell once; a
    third run finds them all and runs nothing."""
    pytest.importorskip("ray")
    grid = tmp_path / "g.toml"
    grid.write_text(GRID)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "vecsched.adapters.cli.main", "sweep", str(grid), "--out",
            str(out), "--num-cpus", "1"]
    procs = [subprocess.Popen(argv, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    done = [(p.wait(timeout=900), *p.communicate()) for p in procs]
    codes = sorted(d[0] for d in done)
    assert codes == [0, 2], done
    loser = next(d for d in done if d[0] == 2)
    err = loser[2].strip().splitlines()
    assert len(err) == 1 and "another sweep is writing there" in err[0], loser
    assert "running on Ray" not in loser[1]                      # refused before Ray
    keys = [r["key"] for r in read_rows(out)]
    assert sorted(keys) == sorted(c.key for c in parse(
        __import__("tomllib").loads(GRID), "g").cells) and len(keys) == 3
    again = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == "cells run 0, skipped 3"
    assert not [p for p in Path(out).iterdir() if p.name.startswith(".")]
