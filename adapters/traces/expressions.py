"""The small expression language of a mapping file (``map_file.py``): how one output
field is computed from a CSV row's columns, evaluated over whole columns at once.

An expression is a Python-syntax expression over the CSV's column names, e.g.
``cpu_milli / 1000`` or ``gpu_milli / 1000 if num_gpu == 1 else num_gpu``. Allowed:
numbers and quoted strings; ``+ - * / // % **``; comparisons; ``and`` / ``or`` /
``not``; ``A if COND else B``; and the functions ``isnull(x)``, ``coalesce(a, b, ...)``,
``min(a, b)``, ``max(a, b)``, ``floor(x)``, ``ceil(x)``. Nothing else parses (no
attribute access, no other calls), so a mapping file cannot run code.

A column is text until an operation needs a number; then every non-empty cell must
parse as one, and the first that does not raises ``ExpressionError`` naming the
column and the row. An empty cell is a null: NaN through arithmetic, false in a
comparison, ``isnull`` true.
"""
from __future__ import annotations

import ast
import math
from typing import Mapping, Optional

import numpy as np

FUNCTIONS = ("isnull", "coalesce", "min", "max", "floor", "ceil")
_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
           ast.Div: np.divide, ast.FloorDiv: np.floor_divide, ast.Mod: np.mod,
           ast.Pow: np.power}
_CMPS = {ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
         ast.Gt: np.greater, ast.GtE: np.greater_equal}


class ExpressionError(ValueError):
    """An expression that does not parse, names an unknown column, or meets a cell that
    is not a number. ``column`` and ``row`` (0-based data row) say where, when known."""

    def __init__(self, message: str, column: Optional[str] = None, row: Optional[int] = None):
        self.column, self.row = column, row
        super().__init__(message)


class Column:
    """One CSV column as text (None for an empty cell), converted to numbers on demand."""

    def __init__(self, name: str, cells: np.ndarray):
        self.name, self.cells = name, cells
        self._numbers: Optional[np.ndarray] = None

    def numbers(self) -> np.ndarray:
        """float64 values, NaN for empty cells; ``ExpressionError`` at the first cell
        that is not a number."""
        if self._numbers is None:
            out = np.full(self.cells.size, np.nan)
            for i, v in enumerate(self.cells):
                if v is None:
                    continue
                try:
                    out[i] = float(v)
                except ValueError:
                    raise ExpressionError(f"{v!r} is not a number", self.name, i) from None
                if not math.isfinite(out[i]):
                    raise ExpressionError(f"{v!r} is not a finite number", self.name, i)
            self._numbers = out
        return self._numbers

    def null(self) -> np.ndarray:
        return np.array([v is None for v in self.cells], dtype=bool)


def compile_expression(text: str, columns) -> ast.Expression:
    """Parse ``text`` and check it uses only the allowed syntax and known columns."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"expected an expression (a string), got {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"{text!r} does not parse: {e.msg}") from None
    known = set(columns)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in FUNCTIONS and node.id not in known:
            raise ExpressionError(f"{text!r} names column {node.id!r}, which the CSV does "
                                  f"not have (its columns: {', '.join(columns)})", node.id)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS \
                    or node.keywords:
                raise ExpressionError(f"{text!r}: only the functions "
                                      f"{', '.join(FUNCTIONS)} may be called")
        elif not isinstance(node, _ALLOWED):
            raise ExpressionError(f"{text!r}: {type(node).__name__} is not allowed in a "
                                  f"mapping expression")
    return tree


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
            ast.Name, ast.Constant, ast.Load, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or,
            *_BINOPS, *_CMPS)


def plain_column(text: str) -> Optional[str]:
    """The column name when ``text`` is just one column, else None."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None
    return tree.body.id if isinstance(tree.body, ast.Name) else None


def evaluate(tree: ast.Expression, cols: Mapping[str, Column], n: int) -> np.ndarray:
    """The expression over ``n`` rows as float64 (NaN: null)."""
    with np.errstate(all="ignore"):
        out = _num(_eval(tree.body, cols, n), n)
    return np.broadcast_to(out, (n,)).astype(np.float64)


def _num(v, n):
    if isinstance(v, Column):
        return v.numbers()
    if isinstance(v, str):
        raise ExpressionError(f"the string {v!r} is used as a number")
    if isinstance(v, np.ndarray) and v.dtype == bool:
        return v.astype(np.float64)
    return np.asarray(v, dtype=np.float64) if not isinstance(v, np.ndarray) else v


def _truth(v, n):
    if isinstance(v, np.ndarray) and v.dtype == bool:
        return v
    x = _num(v, n)
    return np.nan_to_num(x, nan=0.0) != 0


def _compare(op, a, b, n):
    if isinstance(a, str) or isinstance(b, str):
        ta = a.cells if isinstance(a, Column) else np.full(n, a, dtype=object)
        tb = b.cells if isinstance(b, Column) else np.full(n, b, dtype=object)
        eq = np.array([x is not None and x == y for x, y in zip(ta, tb)], dtype=bool)
        if op is ast.Eq:
            return eq
        if op is ast.NotEq:
            return ~eq & np.array([x is not None for x in ta]) & np.array(
                [y is not None for y in tb])
        raise ExpressionError("strings compare only with == and !=")
    x, y = _num(a, n), _num(b, n)
    return np.broadcast_to(_CMPS[op](x, y) & ~np.isnan(x) & ~np.isnan(y), (n,))


def _eval(node, cols, n):
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float, str)):
            raise ExpressionError(f"constant {node.value!r} is not a number or a string")
        return node.value
    if isinstance(node, ast.Name):
        return cols[node.id]
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_num(_eval(node.left, cols, n), n),
                                      _num(_eval(node.right, cols, n), n))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, cols, n)
        if isinstance(node.op, ast.Not):
            return ~np.broadcast_to(_truth(v, n), (n,))
        return -_num(v, n) if isinstance(node.op, ast.USub) else _num(v, n)
    if isinstance(node, ast.Compare):
        out = np.ones(n, dtype=bool)
        left = _eval(node.left, cols, n)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, cols, n)
            out &= _compare(type(op), left, right, n)
            left = right
        return out
    if isinstance(node, ast.BoolOp):
        vals = [np.broadcast_to(_truth(_eval(v, cols, n), n), (n,)) for v in node.values]
        red = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        return red.reduce(vals)
    if isinstance(node, ast.IfExp):
        cond = np.broadcast_to(_truth(_eval(node.test, cols, n), n), (n,))
        return np.where(cond, _num(_eval(node.body, cols, n), n),
                        _num(_eval(node.orelse, cols, n), n))
    if isinstance(node, ast.Call):
        return _call(node.func.id, [_eval(a, cols, n) for a in node.args], n)
    raise ExpressionError(f"{type(node).__name__} is not allowed")   # compile_expression stops it


def _call(name: str, args: list, n: int):
    if name == "isnull":
        if len(args) != 1:
            raise ExpressionError("isnull takes one argument")
        a = args[0]
        return a.null() if isinstance(a, Column) else np.isnan(_num(a, n)) | np.zeros(n, bool)
    if name == "coalesce":
        if not args:
            raise ExpressionError("coalesce takes at least one argument")
        out = np.broadcast_to(_num(args[0], n), (n,)).copy()
        for a in args[1:]:
            hole = np.isnan(out)
            out[hole] = np.broadcast_to(_num(a, n), (n,))[hole]
        return out
    if name in ("min", "max"):
        if len(args) != 2:
            raise ExpressionError(f"{name} takes two arguments")
        f = np.minimum if name == "min" else np.maximum
        return f(_num(args[0], n), _num(args[1], n))
    if len(args) != 1:
        raise ExpressionError(f"{name} takes one argument")
    return (np.floor if name == "floor" else np.ceil)(_num(args[0], n))
