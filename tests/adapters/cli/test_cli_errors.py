"""The command's error handling: every user error is one ``error:`` line on stderr and
exit status 2, checked before any work; a bug is one line with a hint and exit 1;
``VECSCHED_DEBUG=1`` shows the traceback; ``--version``."""
from __future__ import annotations

import importlib.metadata

import pytest

from vecsched.adapters.cli import errors
from vecsched.adapters.cli.main import main

from tests.kits.cli_run import run_cli as _run


# (argv, a fragment the one error line must hold)
BAD = [
    (["demo", "--trace", "nope"], "--trace nope: unknown bundled trace"),
    (["demo", "--nodes", "-1"], "argument --nodes: must be >= 1, got -1"),
    (["demo", "--nodes", "0"], "argument --nodes: must be >= 1"),
    (["demo", "--pending", "-5"], "argument --pending: must be >= 1"),
    (["demo", "--repeat", "0"], "argument --repeat: must be >= 1"),
    (["demo", "--seed", "-1"], "argument --seed: must be >= 0"),
    (["demo", "--nodes", "many"], "expected a whole number, got 'many'"),
    (["replay", "--scheduler", "bogus"], "--scheduler: unknown bogus"),
    (["replay", "--scheduler", ","], "--scheduler: unknown (empty)"),
    (["replay", "nope.parquet"], "trace nope.parquet: neither a bundled name"),
    (["replay", "--groups", "nope"], "--groups nope: neither a bundled name"),
    (["replay", "--pods", "0"], "--pods must be >= 1"),
    (["replay", "--start", "-3"], "--start must be >= 0"),
    (["replay", "--compress", "nan"], "--compress must be > 0, got nan"),
    (["replay", "--arrival-scale", "0"], "--arrival-scale must be > 0"),
    (["replay", "--gangs", "1.5"], "--gangs must be between 0 and 1"),
    (["replay", "--max-launches", "0"], "--max-launches must be >= 1"),
    (["replay", "--launch-failure-rate", "2"], "--launch-failure-rate must be between 0 and 1"),
    (["replay", "--idle-timeout", "-1"], "--idle-timeout must be >= 0"),
    (["replay", "--progress-every", "0"], "--progress-every must be > 0"),
    (["replay", "--scheduler", "ray", "--no-check-ray", "--out", "/proc/no/such"],
     "--out /proc/no/such: cannot write there"),
    (["ha-demo", "--ticks", "0"], "--ticks must be >= 1"),
    (["kuberay-demo", "--out", "/proc/no/such"], "--out /proc/no/such: cannot write there"),
    (["ha-demo", "--tick", "2"], "--tick (2.0) must be shorter than --ttl (1.0)"),
    (["ha-demo", "--trace", "nope"], "--trace nope: unknown bundled trace"),
    (["explain"], "the dump to explain (PATH) is required"),
    (["explain", "/no/such/dump.json"], "/no/such/dump.json: No such file or directory"),
    (["explain", "--limit", "-1", "x.json"], "argument --limit: must be >= 0"),
    (["bogus"], "invalid choice: 'bogus'"),
    ([], "the following arguments are required: COMMAND"),
    (["warmup", "--bogus"], "unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize("argv,fragment", BAD, ids=[" ".join(a) or "(none)" for a, _ in BAD])
def test_bad_input_is_one_error_line_and_exit_2(capsys, argv, fragment):
    code, lines, out = _run(capsys, *argv)
    assert code == 2, (lines, out)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert fragment in lines[0], lines
    assert out == ""                                   # nothing done, nothing printed


def test_out_that_is_a_file_is_refused_before_the_replay(capsys, tmp_path):
    existing = tmp_path / "summary.txt"
    existing.write_text("keep me")
    code, lines, out = _run(capsys, "replay", "--scheduler", "baseline", "--out", str(existing))
    assert code == 2 and lines == [f"error: --out {existing}: exists and is not a directory "
                                   f"(give a directory; it is made if it does not exist)"]
    assert existing.read_text() == "keep me" and out == ""


def test_version(capsys):
    code, _, out = _run(capsys, "--version")
    assert code == 0 and out.strip() == f"vecsched {importlib.metadata.version('vecsched')}"


class _Boom(Exception):
    pass


def test_a_bug_is_one_line_with_a_hint_and_exit_1(capsys, monkeypatch):
    monkeypatch.delenv(errors.DEBUG_ENV, raising=False)

    def bug():
        raise _Boom("list index out of range\nsecond line")
    assert errors.run_guarded(bug, "demo") == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == ("error: internal error in vecsched demo: _Boom: list index out of range "
                    "second line (set VECSCHED_DEBUG=1 to see the traceback)")


def test_debug_shows_the_traceback(capsys, monkeypatch):
    monkeypatch.setenv(errors.DEBUG_ENV, "1")

    def user_error():
        raise errors.UsageError("--nodes must be >= 1")
    assert errors.run_guarded(user_error, "demo") == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "user_error" in err
    assert err.strip().splitlines()[-1] == "error: --nodes must be >= 1"


@pytest.mark.parametrize("module,extra", [("rich", "cli"), ("matplotlib.pyplot", "cli"),
                                          ("ray.core", "ray"), ("ortools", "solver"),
                                          ("redis", "ha")])
def test_a_missing_module_names_its_extra(capsys, monkeypatch, module, extra):
    """The fallback behind the up-front check: an import that fails deep inside a
    command still names the extra to install."""
    monkeypatch.delenv(errors.DEBUG_ENV, raising=False)

    def missing():
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)
    assert errors.run_guarded(missing, "replay") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"pip install 'vecsched[{extra}]'" in line and line.startswith("error: ")


def test_an_unknown_missing_module_is_a_bug(capsys, monkeypatch):
    monkeypatch.delenv(errors.DEBUG_ENV, raising=False)

    def missing():
        raise ModuleNotFoundError("No module named 'vecsched.nope'", name="vecsched.nope")
    assert errors.run_guarded(missing, "replay") == 1


def test_the_typed_errors_are_user_errors(capsys):
    from vecsched.adapters.traces import TraceError
    from vecsched.engine.model.problem import ProblemError
    for e in (ProblemError("nodes[3].total['CPU']", "is negative"),
              TraceError("demand", "cpu_milli", "is negative", row=4),
              FileNotFoundError(2, "No such file or directory", "x.parquet")):
        assert errors.report(e, "replay", debug=False) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "error: nodes[3].total['CPU']: is negative"
    assert lines[1].startswith("error: demand.cpu_milli row 4")
    assert lines[2] == "error: x.parquet: No such file or directory"


@pytest.mark.parametrize("trace,fragment", [
    ("README.md", "Parquet magic bytes not found"),           # not Parquet at all
    ("data/openb_nodes.parquet", "demand.type: unknown column"),  # Parquet, wrong table
])
def test_malformed_trace_file_is_one_error_line(capsys, tmp_path, trace, fragment):
    from tests.kits.paths import REPO
    code, lines, out = _run(capsys, "replay", str(REPO / trace), "--scheduler", "baseline",
                            "--out", str(tmp_path / "out"))
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert fragment in lines[0]
