"""Messages of ``vecsched trace import`` on the inputs a user or an adversary gives it:
each names the file and the row, column or mapping key, and none is an internal error
(a byte-order mark, a byte that is not UTF-8, a function named without a call, an
expression too long or too deep to parse, an infinite constant)."""
from __future__ import annotations

from pathlib import Path

import pytest

from vecsched.adapters import traces as T
from vecsched.adapters.cli.main import main
from vecsched.adapters.traces.csv_import import CsvImportError, import_csv
from vecsched.adapters.traces.map_file import MappingError

MAP = """
[demand]
arrival = "t0"
departure = "t1"
cpu = "{cpu}"
name = "name"
{extra}
"""
CSV = b"name,t0,t1,c\na,0,10,1\nb,1,10,2\n"


def _files(tmp: Path, csv: bytes = CSV, cpu: str = "c", extra: str = "") -> tuple[Path, Path]:
    c, m = tmp / "pods.csv", tmp / "pods.map.toml"
    c.write_bytes(csv)
    m.write_text(MAP.format(cpu=cpu, extra=extra))
    return c, m


def _one_error_line(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert "internal error" not in err[0] and "out of memory" not in err[0]
    return err[0]


def test_a_byte_order_mark_is_dropped_in_the_csv_and_the_mapping(tmp_path):
    c, m = _files(tmp_path, b"\xef\xbb\xbf" + CSV)
    m.write_bytes(b"\xef\xbb\xbf" + m.read_bytes())
    t = import_csv(c, m, tmp_path / "out").table
    assert t.column("name").to_pylist() == ["a", "b"]


def test_a_byte_that_is_not_utf8_is_named_with_its_row_and_column(tmp_path):
    c, m = _files(tmp_path, CSV.replace(b"b,1,10", b"b\xff,1,10"))
    with pytest.raises(CsvImportError) as e:
        import_csv(c, m, tmp_path / "out")
    assert (e.value.column, e.value.row) == ("name", 1)
    assert str(e.value).startswith("pods.csv: column name row 1 (line 3): byte 0xff is not "
                                   "UTF-8")
    c.write_bytes(CSV.replace(b"t1,c", b"t1,c\xe9"))
    with pytest.raises(CsvImportError, match=r"header \(line 1\): byte 0xe9 at offset 12"):
        import_csv(c, m, tmp_path / "out")


@pytest.mark.parametrize("cpu, words", [
    ("isnull", "isnull is a function; call it, e.g. isnull(column)"),
    ("min", "min is a function"),
    ("+".join(["c"] * 100_000), "is 199,999 characters long; a mapping expression may have "
                                "at most 10,000"),
    ("+".join(["c"] * 150), "nests 150 levels deep"),
    ("-" * 3000 + "c", "nests too deeply to parse"),
    ("(" * 300 + "c" + ")" * 300, "does not parse"),
])
def test_expressions_a_parser_cannot_take_are_mapping_errors(tmp_path, cpu, words):
    c, m = _files(tmp_path, cpu=cpu)
    with pytest.raises(MappingError) as e:
        import_csv(c, m, tmp_path / "out")
    assert str(e.value).startswith("pods.map.toml demand.cpu: ") and words in str(e.value)
    assert len(str(e.value)) < 400                    # the expression is cut, not echoed


def test_a_hundred_thousand_term_sum_is_one_error_line_not_an_internal_error(tmp_path, capsys):
    c, m = _files(tmp_path, cpu="+".join(["c"] * 100_000))
    line = _one_error_line(["trace", "import", str(c), "--map", str(m), "--out",
                            str(tmp_path / "out")], capsys)
    assert "demand.cpu" in line and "characters long" in line


def test_a_column_named_like_a_function_is_still_a_column(tmp_path):
    c, m = _files(tmp_path, b"name,t0,t1,min\na,0,10,3\n", cpu="min")
    assert import_csv(c, m, tmp_path / "out").table.column("cpu").to_pylist() == [3.0]


@pytest.mark.parametrize("extra, key", [
    ("min_duration_s = inf", "demand.min_duration_s"),
    ("min_duration_s = nan", "demand.min_duration_s"),
    ("memory = inf", "demand.memory"),
])
def test_infinite_constants_are_blamed_on_their_key(tmp_path, capsys, extra, key):
    c, m = _files(tmp_path, extra=extra)
    line = _one_error_line(["trace", "import", str(c), "--map", str(m), "--out",
                            str(tmp_path / "out")], capsys)
    assert line.startswith(f"error: pods.map.toml {key}: must be a finite number"), line


def test_out_naming_an_existing_file_says_what_to_do(tmp_path, capsys):
    c, m = _files(tmp_path)
    line = _one_error_line(["trace", "import", str(c), "--map", str(m), "--out", str(c)],
                           capsys)
    assert f"--out {c}: is a file; --out names the directory" in line
    assert "give another path" in line and c.read_bytes() == CSV      # untouched


def test_an_earlier_import_is_replaced_only_with_force(tmp_path, capsys):
    c, m = _files(tmp_path)
    out = tmp_path / "out"
    argv = ["trace", "import", str(c), "--map", str(m), "--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    line = _one_error_line(argv, capsys)
    assert f"{out / 'demand.parquet'} exists" in line and "--force replaces it" in line
    assert main(argv + ["--force"]) == 0


def test_out_may_name_the_parquet_file(tmp_path, capsys):
    c, m = _files(tmp_path)
    assert main(["trace", "import", str(c), "--map", str(m), "--out",
                 str(tmp_path / "pods.parquet")]) == 0
    assert f"wrote {tmp_path / 'pods.parquet'} (2 rows)" in capsys.readouterr().out
    assert T.read_demand(tmp_path / "pods.parquet").num_rows == 2
