"""The repository's import graph, read from the source without importing anything.

`scan(root)` parses every `.py` file under the folders of `FOLDERS` (engine/ is
installed as `vecsched.engine`, adapters/ as `vecsched.adapters`; tests/ and bench/
keep their own names) and records one `Edge` per imported name. An edge is
`deferred` when its import statement sits inside a function body (it runs when the
function is called, not when the module is imported); imports under
`if TYPE_CHECKING:` are left out (they never run). `importlib.import_module("x")`
and `__import__("x")` with a literal name count as imports of `x`.

`tests/house/test_layering.py` states the house rules over this graph (which package
may import which, where Ray may be imported, no cycles, kernels only from their
owners); each rule is a function here returning the offending edges, so a test can
run it over a small synthetic tree that breaks the rule on purpose.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

# Repository folder -> the dotted name its modules are imported under.
FOLDERS = {"engine": "vecsched.engine", "adapters": "vecsched.adapters",
           "tests": "tests", "bench": "bench"}


@dataclass(frozen=True)
class Edge:
    source: str       # the importing module, dotted ("vecsched.adapters.ray.codec")
    target: str       # the imported module: a scanned module, or an outside name as written
    line: int
    deferred: bool    # inside a function body: runs when called, not on import

    def __str__(self) -> str:
        how = " (in a function)" if self.deferred else ""
        return f"{self.source}:{self.line} imports {self.target}{how}"


@dataclass
class Graph:
    modules: dict[str, Path]                 # dotted name -> file
    edges: list[Edge] = field(default_factory=list)

    def internal(self, name: str) -> bool:
        return name in self.modules

    def out(self, source: str, *, deferred: bool = True) -> list[Edge]:
        """The edges leaving `source`; only those that run on import when `deferred` is False."""
        return [e for e in self.edges if e.source == source and (deferred or not e.deferred)]


def within(name: str, *prefixes: str) -> bool:
    """Whether the dotted `name` is one of `prefixes` or inside one of them."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


# ---- reading the source ---------------------------------------------------------------
def scan(root: Path, folders: dict[str, str] = FOLDERS) -> Graph:
    """The import graph of every module under `root`'s folders named in `folders`."""
    modules: dict[str, Path] = {}
    for folder, dotted in folders.items():
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("").parts
            if any(p.startswith(".") or p == "__pycache__" for p in rel):
                continue
            if rel[-1] == "__init__":
                rel = rel[:-1]
            modules[".".join((dotted,) + rel)] = path
    graph = Graph(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, deferred in _import_nodes(tree):
            for target in _targets(node, package, modules):
                if target != name:
                    graph.edges.append(Edge(name, target, node.lineno, deferred))
    return graph


def _import_nodes(tree: ast.AST) -> Iterable[tuple[ast.AST, bool]]:
    """(node, deferred) for every import statement and literal import call, skipping
    `if TYPE_CHECKING:` bodies."""
    def visit(node: ast.AST, deferred: bool):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                yield from visit(child, deferred)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _literal_import_call(node):
            yield node, deferred
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inner)
    yield from visit(tree, False)


def _literal_import_call(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)):
        return False
    func = ast.unparse(node.func)
    return func in ("importlib.import_module", "import_module", "__import__")


def _targets(node: ast.AST, package: str, modules: dict[str, Path]) -> list[str]:
    """The modules a statement imports: a scanned module where the name resolves to one
    (`from pkg import mod` imports `pkg.mod`), else the name as written."""
    if isinstance(node, ast.Call):
        return [_known(node.args[0].value, modules)]
    if isinstance(node, ast.Import):
        return [_known(alias.name, modules) for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[:len(parts) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    out = []
    for alias in node.names:
        full = f"{base}.{alias.name}" if base else alias.name
        out.append(full if full in modules else _known(base, modules))
    return list(dict.fromkeys(out))


def _known(name: str, modules: dict[str, Path]) -> str:
    """The longest scanned module `name` is inside, or `name` itself if none."""
    probe = name
    while probe:
        if probe in modules:
            return probe
        probe = probe.rpartition(".")[0]
    return name


# ---- the rules ------------------------------------------------------------------------
def forbidden(graph: Graph, source: Callable[[str], bool], target: Callable[[str], bool],
              *, deferred: bool = True) -> list[Edge]:
    """Edges from a module `source` accepts to a module `target` accepts (only edges
    that run on import when `deferred` is False)."""
    return [e for e in graph.edges if source(e.source) and target(e.target)
            and (deferred or not e.deferred)]


def imported_on_import(graph: Graph, start: str) -> set[str]:
    """Every module (scanned or outside) importing `start` runs, following only the
    edges that run on import (not those inside functions)."""
    seen, todo = {start}, [start]
    while todo:
        for e in graph.out(todo.pop(), deferred=False):
            if e.target not in seen:
                seen.add(e.target)
                if graph.internal(e.target):
                    todo.append(e.target)
    seen.discard(start)
    return seen


def cycles(graph: Graph, scope: Callable[[str], bool] = lambda m: True) -> list[list[str]]:
    """The import cycles among the scanned modules `scope` accepts, each as the sorted
    list of its modules. Every edge counts, deferred ones too (a deferred import that
    breaks a cycle at run time is still a cycle in the design); a package importing its
    own submodules and a module importing a package it is inside are not cycles."""
    adj: dict[str, set[str]] = {m: set() for m in graph.modules if scope(m)}
    for e in graph.edges:
        s, t = e.source, e.target
        if s not in adj or t not in adj:
            continue
        is_package = graph.modules[s].name == "__init__.py"
        if (is_package and t.startswith(s + ".")) or s.startswith(t + "."):
            continue
        adj[s].add(t)
    return _strongly_connected(adj)


def _strongly_connected(adj: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one node, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, iter(sorted(adj[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adj[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out
