"""The small expression language of a mapping file (``map_file.py``): how one output
field is computed from a CSV row's columns, evaluated over whole columns at once.

An expression is a Python-syntax expression over the CSV's column names, e.g.
``cpu_milli / 1000`` or ``gpu_milli / 1000 if num_gpu == 1 else num_gpu``. Allowed:
numbers and quoted strings; ``+ - * / // % **``; comparisons; ``and`` / ``or`` /
``not``; ``A if COND else B``; the null literal ``null``; and the functions
``isnull(x)``, ``coalesce(a, b, ...)``, ``min(a, b)``, ``max(a, b)``, ``floor(x)``,
``ceil(x)``. Nothing else parses (no attribute access, no other calls), so a mapping
file cannot run code. An expression is at most ``MAX_LENGTH`` characters and nests at
most ``MAX_DEPTH`` levels (a sum of k terms is k levels): a longer or deeper one is an
``ExpressionError`` saying so, not a parser crash.

A column is text until an operation needs a number; then every non-empty cell must
parse as one, and the first that does not raises ``ExpressionError`` naming the
column and the row. An empty cell is a null: NaN through arithmetic, false in a
comparison, ``isnull`` true. ``null`` is that value written out (``null if cap < 0
else cap``: "-1 means no cap"); a CSV column named ``null`` would hide it.

A text field (``evaluate_text``) takes the same syntax with text values: columns,
quoted strings, ``+`` to join them (``app_name + "." + role``), ``A if COND else B``
(``COND`` as above, over numbers or text), ``coalesce`` and ``null``. A null part
makes the whole text null.
"""
from __future__ import annotations

import ast
import math
from typing import Mapping, Optional

import numpy as np

FUNCTIONS = ("isnull", "coalesce", "min", "max", "floor", "ceil")
NULL = "null"
MAX_LENGTH = 10_000     # characters of one expression
MAX_DEPTH = 100         # nesting levels of one expression (a k-term sum is k levels)
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


def short(text: str, limit: int = 80) -> str:
    """``text`` quoted, cut to about ``limit`` characters (for messages)."""
    text = str(text)
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + f"... ({len(text):,} characters)"


def _depth(tree: ast.AST) -> int:
    """How deep ``tree`` nests (iteratively: a deep tree must not overflow the stack)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _parse(text: str) -> ast.Expression:
    """``text`` parsed, within the length and depth limits."""
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"{short(text)} is {len(text):,} characters long; a mapping "
                              f"expression may have at most {MAX_LENGTH:,}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"{short(text)} does not parse: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"{short(text)} nests too deeply to parse (a mapping "
                              f"expression may nest at most {MAX_DEPTH} levels)") from None
    depth = _depth(tree)
    if depth > MAX_DEPTH + 2:             # Expression and the body's own level
        raise ExpressionError(f"{short(text)} nests {depth - 2} levels deep (a sum of k "
                              f"terms is k levels); a mapping expression may nest at most "
                              f"{MAX_DEPTH}: compute it in fewer steps")
    return tree


def compile_expression(text: str, columns) -> ast.Expression:
    """Parse ``text`` and check it uses only the allowed syntax and known columns."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"expected an expression (a string), got {text!r}")
    tree = _parse(text)
    known = set(columns)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known and id(node) not in called:
            if node.id in FUNCTIONS:
                raise ExpressionError(f"{short(text)}: {node.id} is a function; call it, "
                                      f"e.g. {node.id}(column)")
            if node.id != NULL:
                raise ExpressionError(f"{short(text)} names column {node.id!r}, which the "
                                      f"CSV does not have (its columns: {', '.join(columns)})",
                                      node.id)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS \
                    or node.keywords:
                raise ExpressionError(f"{short(text)}: only the functions "
                                      f"{', '.join(FUNCTIONS)} may be called")
        elif not isinstance(node, _ALLOWED):
            raise ExpressionError(f"{short(text)}: {type(node).__name__} is not allowed in a "
                                  f"mapping expression")
    return tree


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
            ast.Name, ast.Constant, ast.Load, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or,
            *_BINOPS, *_CMPS)


def plain_column(text: str) -> Optional[str]:
    """The column name when ``text`` is just one column, else None."""
    if len(text) > MAX_LENGTH:
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
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
        return cols[node.id] if node.id in cols else np.nan      # the null literal
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


# ---- text fields ---------------------------------------------------------------------
_TEXT_HELP = ("a text field is made of column names, quoted strings, + (joins text), "
              "A if COND else B, coalesce(...) and null")


def evaluate_text(tree: ast.Expression, cols: Mapping[str, Column], n: int) -> np.ndarray:
    """A text expression over ``n`` rows: an object array of str (None: null; an empty
    result is null too, as an empty cell is)."""
    with np.errstate(all="ignore"):
        out = _text(tree.body, cols, n)
    return np.array([v if v else None for v in out], dtype=object)


def _text(node, cols, n) -> np.ndarray:
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, str):
            raise ExpressionError(f"the constant {node.value!r} is not text (quote it: "
                                  f"\"{node.value}\"); {_TEXT_HELP}")
        return np.full(n, node.value, dtype=object)
    if isinstance(node, ast.Name):
        if node.id in cols:
            return cols[node.id].cells
        return np.full(n, None, dtype=object)                  # the null literal
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _text(node.left, cols, n), _text(node.right, cols, n)
        return np.array([None if x is None or y is None else x + y for x, y in zip(a, b)],
                        dtype=object)
    if isinstance(node, ast.IfExp):
        cond = np.broadcast_to(_truth(_eval(node.test, cols, n), n), (n,))
        return np.where(cond, _text(node.body, cols, n), _text(node.orelse, cols, n))
    if isinstance(node, ast.Call) and node.func.id == "coalesce" and node.args:
        out = _text(node.args[0], cols, n).copy()
        for a in node.args[1:]:
            hole = np.array([v is None for v in out], dtype=bool)
            out[hole] = _text(a, cols, n)[hole]
        return out
    what = node.func.id + "()" if isinstance(node, ast.Call) else type(node).__name__
    raise ExpressionError(f"{what} does not give text: {_TEXT_HELP}")
