"""Reading a CSV trace for ``vecsched trace import`` (``csv_import.py``): every cell as
text, by column, with errors that name the file, the column and the row.

The header is read on its own, as bytes: a UTF-8 byte-order mark before the first column
name is dropped, and a byte that is not UTF-8 is named with its position. The rows are
read by pyarrow (all columns as text, empty cells as nulls); when it refuses the file,
the first cell holding a byte that is not UTF-8, or the first row whose field count
differs from the header's, is named by its column and row.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from .expressions import Column


class CsvImportError(ValueError):
    """A CSV that cannot be imported with its mapping: ``csv`` the file, ``column`` the
    CSV column or mapping field at fault, ``row`` the 0-based data row (file line
    ``row + 2``: the header is line 1)."""

    def __init__(self, csv_name: str, message: str, column: Optional[str] = None,
                 row: Optional[int] = None):
        self.csv, self.column, self.row = csv_name, column, row
        where = csv_name
        if column is not None:
            where += f": column {column}"
        if row is not None:
            where += f" row {row} (line {row + 2})"
        super().__init__(f"{where}: {message}")


def _header(path: Path) -> list[str]:
    """The header's column names (a UTF-8 byte-order mark before the first is dropped)."""
    with path.open("rb") as f:
        first = f.readline()
    if not first.strip():
        raise CsvImportError(path.name, "is empty (no header line)")
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CsvImportError(path.name, f"header (line 1): byte 0x{first[e.start]:02x} at "
                             f"offset {e.start} is not UTF-8 ({_REENCODE})") from None
    try:
        head = next(csv.reader([text]))
    except (csv.Error, StopIteration) as e:
        raise CsvImportError(path.name, f"header line is not CSV: {e}") from None
    head = [h.strip() for h in head]
    for i, h in enumerate(head):
        if not h:
            raise CsvImportError(path.name, f"header field {i + 1} is empty")
        if head.index(h) != i:
            raise CsvImportError(path.name, f"header names column {h!r} twice")
    return head


_REENCODE = "the CSV must be UTF-8 text: re-encode it, e.g. iconv -f latin1 -t utf-8"


def _not_utf8(path: Path, head: list) -> Optional[CsvImportError]:
    """The first cell holding a byte that is not UTF-8, as an error naming its column
    and row (None when every byte is UTF-8)."""
    with path.open(newline="", encoding="utf-8-sig", errors="surrogateescape") as f:
        for k, rec in enumerate(csv.reader(f)):
            for j, cell in enumerate(rec):
                bad = next((ch for ch in cell if "\udc80" <= ch <= "\udcff"), None)
                if bad is not None:
                    col = head[j] if j < len(head) and k else None
                    where = "in the header" if not k else ""
                    return CsvImportError(path.name, f"byte 0x{ord(bad) - 0xdc00:02x} is not "
                                          f"UTF-8 {where}({_REENCODE})".replace("  ", " "),
                                          col, k - 1 if k else None)
    return None


def _bad_line(path: Path, width: int) -> str:
    """Where a CSV stops having ``width`` fields (for pyarrow's parse errors)."""
    with path.open(newline="", encoding="utf-8-sig", errors="replace") as f:
        for k, rec in enumerate(csv.reader(f)):
            if k and len(rec) != width:
                return f"row {k - 1} (line {k + 1}) has {len(rec)} fields, the header {width}"
    return "it does not parse"


def read_cells(path) -> tuple[dict[str, Column], int]:
    """Every column of the CSV at ``path`` as text (``Column``) and the row count."""
    path = Path(path)
    if not path.is_file():
        raise CsvImportError(str(path), "no such file")
    head = _header(path)
    opts = pacsv.ConvertOptions(column_types={h: pa.string() for h in head},
                                strings_can_be_null=True, null_values=[""])
    read = pacsv.ReadOptions(column_names=head, skip_rows=1)
    try:
        table = pacsv.read_csv(str(path), read_options=read, convert_options=opts)
    except (pa.ArrowInvalid, UnicodeDecodeError) as e:
        bad = _not_utf8(path, head)
        if bad is not None:
            raise bad from None
        raise CsvImportError(path.name, f"is not a well-formed CSV: "
                             f"{_bad_line(path, len(head))} ({str(e).splitlines()[0]})") from None
    cols = {}
    for h in head:
        cells = np.array(table.column(h).to_pylist(), dtype=object)
        cells = np.array([None if v is None or not v.strip() else v.strip() for v in cells],
                         dtype=object)
        cols[h] = Column(h, cells)
    return cols, table.num_rows


