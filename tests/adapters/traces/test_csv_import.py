"""vecsched.adapters.traces.csv_import and its mapping file: a CSV to the demand and
worker-group schema, with errors that name the column and the row."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vecsched.adapters import traces as T
from vecsched.adapters.traces.csv_import import CsvImportError, import_csv
from vecsched.adapters.traces.map_file import MappingError

from tests.kits.paths import REPO

OPENB_MAP = REPO / "data" / "examples" / "openb.map.toml"
_RAW_CANDIDATES = [os.environ.get("VECSCHED_RAW_TRACES"), REPO.parent / "shared" / "traces" / "raw",
                   REPO.parents[1] / "shared" / "traces" / "raw"]
RAW = next((Path(p) for p in _RAW_CANDIDATES if p and Path(p).is_dir()), None)
OPENB = RAW / "alibaba-gpu-v2023-openb" if RAW else None

MAP = """
[units]
time = "{time}"
memory = "MiB"
cpu = "millicores"
[demand]
arrival = "t0"
departure = "t1"
{extra}
cpu = "cpu_m"
memory = "mem"
gpu = "g / 1000 if n == 1 else n"
name = "name"
"""

CSV = ("name,t0,t1,cpu_m,mem,n,g\n"
       "a,0,10,500,1024,1,500\n"
       "b,5,8,2000,2048,2,1000\n"
       "c,7,107,250,0,0,0\n")


def write(tmp: Path, csv: str = CSV, time: str = "s", extra: str = "",
          mapping: str | None = None) -> tuple[Path, Path]:
    c, m = tmp / "t.csv", tmp / "t.map.toml"
    c.write_text(csv)
    m.write_text(mapping if mapping is not None else MAP.format(time=time, extra=extra))
    return c, m


def test_a_small_csv_maps_to_the_schema_in_its_units(tmp_path):
    c, m = write(tmp_path)
    r = import_csv(c, m, tmp_path / "out")
    t = T.read_demand(tmp_path / "out" / "demand.parquet")
    assert r.rows == 3 and t.num_rows == 3
    assert t.column("arrival_s").to_pylist() == [0, 5, 7]
    assert t.column("duration_s").to_pylist() == [10.0, 3.0, 100.0]
    assert t.column("cpu").to_pylist() == [0.5, 2.0, 0.25]
    assert t.column("memory").to_pylist() == [2.0 ** 30, 2.0 ** 31, 0.0]
    assert t.column("gpu").to_pylist() == [0.5, 2.0, 0.0]
    assert t.column("name").to_pylist() == ["a", "b", "c"]


def test_milliseconds_and_a_duration_column(tmp_path):
    mapping = MAP.format(time="ms", extra="").replace('departure = "t1"', 'duration = "t1"')
    c, m = write(tmp_path, mapping=mapping)
    t = import_csv(c, m, tmp_path).table
    assert t.column("arrival_s").to_pylist() == [0.0, 0.005, 0.007]
    assert t.column("duration_s").to_pylist() == [0.01, 0.008, 0.107]


def test_iso_timestamps_are_made_relative_to_the_first_arrival(tmp_path):
    csv = ("name,t0,t1,cpu_m,mem,n,g\n"
           "a,2024-03-01T10:00:00,2024-03-01T10:05:00,1000,1,0,0\n"
           "b,2024-03-01T09:59:00Z,2024-03-01T10:00:30Z,1000,1,0,0\n")
    c, m = write(tmp_path, csv, time="iso8601")
    t = import_csv(c, m, tmp_path).table                 # written in arrival order
    assert t.column("name").to_pylist() == ["b", "a"]
    assert t.column("arrival_s").to_pylist() == [0, 60]
    assert t.column("duration_s").to_pylist() == [90.0, 300.0]


@pytest.mark.parametrize("csv, column, row, words", [
    (CSV.replace("2000,2048", "2k,2048"), "cpu_m", 1, "'2k' is not a number"),
    (CSV.replace("c,7,107", "c,7,"), "t1", 2, "is empty"),
    (CSV.replace("b,5,8", "b,5,4"), "departure", 1, "the run lasts -1 s"),
    (CSV.replace("a,0,10,500", "a,0,10,-500"), "cpu_m", 0, "must be >= 0"),
    (CSV.replace("b,5,8,2000,2048,2,1000", "b,5,8,2000,2048,1,1500"), "demand.gpu", 1,
     "a fraction of a GPU must be <= 1"),
])
def test_bad_cells_name_the_column_and_row(tmp_path, csv, column, row, words):
    c, m = write(tmp_path, csv)
    with pytest.raises(CsvImportError) as e:
        import_csv(c, m, tmp_path)
    assert e.value.column == column and e.value.row == row, str(e.value)
    assert words in str(e.value) and f"line {row + 2}" in str(e.value)
    assert not (tmp_path / "demand.parquet").exists()


def test_a_row_with_too_many_fields_is_named(tmp_path):
    c, m = write(tmp_path, CSV + "d,1,2,3,4,5,6,7\n")
    with pytest.raises(CsvImportError, match=r"row 3 \(line 5\) has 8 fields, the header 7"):
        import_csv(c, m, tmp_path)


def test_min_duration_raises_short_runs_and_says_so(tmp_path):
    c, m = write(tmp_path, CSV.replace("b,5,8", "b,5,5"), extra="min_duration_s = 1")
    r = import_csv(c, m, tmp_path)
    assert r.table.column("duration_s").to_pylist()[1] == 1.0
    assert any("1 runs shorter than 1 s" in n for n in r.notes)


def test_started_column_with_empty_cells_runs_from_arrival(tmp_path):
    csv = "name,t0,t1,s,cpu_m,mem,n,g\na,0,10,4,1000,1,0,0\nb,5,8,,1000,1,0,0\n"
    c, m = write(tmp_path, csv, extra='started = "s"')
    assert import_csv(c, m, tmp_path).table.column("duration_s").to_pylist() == [6.0, 3.0]


@pytest.mark.parametrize("edit, where", [
    (lambda s: s.replace('cpu = "cpu_m"', 'cpus = "cpu_m"'), "demand.cpus"),
    (lambda s: s.replace('memory = "MiB"', 'memory = "MiBs"'), "units.memory"),
    (lambda s: s.replace('departure = "t1"', ''), "demand.departure"),
    (lambda s: s + "\n[other]\n", "[other]"),
    (lambda s: s.replace('name = "name"', 'name = [1]'), "demand.name"),
])
def test_mapping_file_errors_name_the_key(tmp_path, edit, where):
    c, m = write(tmp_path, mapping=edit(MAP.format(time="s", extra="")))
    with pytest.raises(MappingError) as e:
        import_csv(c, m, tmp_path)
    assert where in str(e.value)


@pytest.mark.parametrize("expr, words", [
    ("cpu_x / 1000", "names column 'cpu_x'"),
    ("__import__('os')", "only the functions"),
    ("cpu_m.real", "Attribute is not allowed"),
    ("cpu_m +", "does not parse"),
])
def test_expressions_outside_the_language_are_refused(tmp_path, expr, words):
    c, m = write(tmp_path, mapping=MAP.format(time="s", extra="").replace(
        'cpu = "cpu_m"', f'cpu = "{expr}"'))
    # A column the CSV lacks is the CSV's error; the others are the mapping file's.
    kind = CsvImportError if "names column" in words else MappingError
    with pytest.raises(kind, match=words.replace("(", r"\(").replace(")", r"\)")) as e:
        import_csv(c, m, tmp_path)
    assert kind is CsvImportError or str(e.value).startswith("t.map.toml demand.cpu: ")


def test_expression_functions(tmp_path):
    csv = "name,t0,t1,a,b\nx,0,1,,3\ny,1,2,5,\n"
    mapping = ('[demand]\narrival = "t0"\ndeparture = "t1"\ncpu = "coalesce(a, b)"\n'
               'memory = "max(coalesce(a, 0), 2) * 1"\ngpu = "1 if isnull(b) else 0"\n')
    c, m = write(tmp_path, csv, mapping=mapping)
    t = import_csv(c, m, tmp_path).table
    assert t.column("cpu").to_pylist() == [3.0, 5.0]
    assert t.column("memory").to_pylist() == [2.0, 5.0]
    assert t.column("gpu").to_pylist() == [0.0, 1.0]
    assert t.column("name").to_pylist() == ["row-0", "row-1"]


def test_groups_by_type_column_and_aggregated_node_lists(tmp_path):
    c = tmp_path / "g.csv"
    c.write_text("t,cpu,mem,gpu,model,n,usd\nsmall,8,32,0,,4,0.4\nbig,96,384,8,G2,2,\n")
    m = tmp_path / "g.toml"
    m.write_text('[units]\nmemory = "GiB"\n[groups]\ntype = "t"\ncpu = "cpu"\nmemory = "mem"\n'
                 'gpu = "gpu"\ngpu_model = "model"\nmax_workers = "n"\nprice = "usd"\n')
    t = import_csv(c, m, tmp_path, kind="groups").table
    assert t.column("type").to_pylist() == ["small", "big"]
    assert t.column("max_workers").to_pylist() == [4, 2]
    assert t.column("price").to_pylist() == [0.4, None]
    assert T.worker_group_specs(t)[1].resources["accelerator_type:G2"] == 1.0
    m.write_text('[units]\nmemory = "GiB"\n[groups]\naggregate = true\ncpu = "cpu"\n'
                 'memory = "mem"\ngpu = "gpu"\ngpu_model = "model"\n')
    c.write_text("cpu,mem,gpu,model\n8,32,0,\n96,384,8,G2\n8,32,0,\n")
    t = import_csv(c, m, tmp_path, kind="groups").table
    assert t.column("type").to_pylist() == ["cpu-8c-32g", "g2-96c-384g-8gpu"]
    assert t.column("max_workers").to_pylist() == [2, 1]


def test_a_gpu_model_on_a_node_without_gpus_names_the_column(tmp_path):
    c = tmp_path / "g.csv"
    c.write_text("cpu,mem,gpu,model\n8,32,0,T4\n")
    m = tmp_path / "g.toml"
    m.write_text('[groups]\naggregate = true\ncpu = "cpu"\nmemory = "mem"\ngpu = "gpu"\n'
                 'gpu_model = "model"\n')
    with pytest.raises(CsvImportError, match=r"column model row 0 .*has no GPU"):
        import_csv(c, m, tmp_path, kind="groups")


@pytest.mark.skipif(OPENB is None, reason="the raw openb CSVs are not next to the checkout")
def test_openb_default_csv_imports_to_the_bundled_table():
    """The shipped mapping reproduces the bundled openb demand, column for column."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        r = import_csv(OPENB / "openb_pod_list_default.csv", OPENB_MAP, d)
        got = T.read_demand(r.path)
    want = T.read_demand(T.bundled("openb"))
    for col in want.column_names:
        assert got.column(col).equals(want.column(col)), col


@pytest.mark.skipif(OPENB is None, reason="the raw openb CSVs are not next to the checkout")
def test_openb_node_list_aggregates_to_the_bundled_shapes():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        got = import_csv(OPENB / "openb_node_list_all_node.csv", OPENB_MAP, d,
                         kind="groups").table
    want = T.read_worker_groups(T.bundled("openb_nodes"))

    def shapes(t):
        return sorted(zip(t.column("cpu").to_pylist(), t.column("memory").to_pylist(),
                          t.column("gpu").to_pylist(),
                          [m or "" for m in t.column("gpu_model").to_pylist()],
                          t.column("max_workers").to_pylist()))
    assert shapes(got) == shapes(want)


def test_cli_bad_csv_is_one_error_line_and_exit_2(tmp_path):
    c, m = write(tmp_path, CSV.replace("2000,2048", "2k,2048"))
    out = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "trace", "import",
                          str(c), "--map", str(m), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: t.csv: column cpu_m row 1 (line 3)")
    ok = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "trace", "import",
                         str(write(tmp_path)[0]), "--map", str(m), "--out", str(tmp_path / "o")],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "o" / "demand.parquet").is_file()
    assert np.isfinite(T.read_demand(tmp_path / "o" / "demand.parquet")
                       .column("cpu").to_numpy()).all()
