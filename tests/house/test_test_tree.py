"""The test tree's shape (docs/design.md §7): it mirrors the packages, shared helpers
live in tests/kits/, no test file imports another, the engine's tests import neither
the adapters nor Ray, and neither the tests nor the benchmarks edit `sys.path` (the
repository root is importable: pytest puts it first, `python -m bench.X` runs from it,
asv gets it through `ASV_PYTHONPATH`).

Each rule is a function over a repository root, run on the real tree (nothing to
report) and on a synthetic tree in `tmp_path` that breaks it (reported)."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.kits.import_graph import Graph, imported_on_import, scan, within
from tests.kits.paths import REPO

# Folders of tests/ that mirror no package: the shared kits and the house rules.
NOT_MIRRORS = ("kits", "house")
# Package folders a test folder may mirror: tests/engine/... -> engine/..., etc.
MIRRORED = ("engine", "adapters")


def _test_dirs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "tests").rglob("*")
                  if p.is_dir() and "__pycache__" not in p.parts)


def unmirrored_folders(root: Path) -> list[str]:
    """Folders of tests/ (outside kits/ and house/) with no package folder of the same
    path: tests/engine/<pkg> for engine/<pkg>, tests/adapters/<pkg> for adapters/<pkg>,
    tests/adapters/sim/<pkg> for adapters/sim/<pkg>."""
    out = []
    for d in _test_dirs(root):
        rel = d.relative_to(root / "tests")
        if rel.parts[0] in NOT_MIRRORS:
            continue
        if rel.parts[0] not in MIRRORED or not (root / rel).is_dir():
            out.append(f"tests/{rel.as_posix()}")
    return out


def helpers_outside_kits(root: Path) -> list[str]:
    """Modules of tests/ outside kits/ that are neither a test file, a package's
    __init__ nor a conftest: a helper belongs in tests/kits/."""
    out = []
    for f in sorted((root / "tests").rglob("*.py")):
        rel = f.relative_to(root / "tests")
        if rel.parts[0] == "kits" or "__pycache__" in rel.parts:
            continue
        if not (f.name.startswith("test_") or f.name in ("__init__.py", "conftest.py")):
            out.append(f"tests/{rel.as_posix()}")
    return out


def _is_test_module(name: str) -> bool:
    return name.startswith("tests.") and name.rpartition(".")[2].startswith("test_")


def imports_between_tests(graph: Graph) -> list[str]:
    """Test modules importing another test module (share it through tests/kits/)."""
    return [str(e) for e in graph.edges
            if _is_test_module(e.source) and _is_test_module(e.target)]


def engine_tests_reaching_adapters_or_ray(graph: Graph) -> list[str]:
    """Engine test modules that import the adapters or Ray, themselves (anywhere, in a
    function too) or through a module they import (a kit, a benchmark generator) when it
    is imported."""
    def banned(t: str) -> bool:
        return within(t, "vecsched.adapters", "ray")
    out = []
    for m in sorted(graph.modules):
        if not within(m, "tests.engine"):
            continue
        for e in graph.out(m):
            if banned(e.target):
                out.append(str(e))
            elif graph.internal(e.target):
                pulled = sorted(t for t in imported_on_import(graph, e.target) if banned(t))
                if pulled:
                    out.append(f"{e} (which imports {pulled[0]})")
    return out


def sys_path_edits(root: Path) -> list[str]:
    """Statements under tests/ and bench/ that change `sys.path` (a call of one of its
    methods, or an assignment to it or an item of it), in code or in the source of a
    child process held in a string."""
    out = []
    for folder in ("tests", "bench"):
        for f in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(f.read_text(encoding="utf-8"))
            sources = [tree] + [ast.parse(n.value) for n in ast.walk(tree)
                                if isinstance(n, ast.Constant) and isinstance(n.value, str)
                                and "sys.path" in n.value and _parses(n.value)]
            for src in sources:
                for node in ast.walk(src):
                    if _edits_sys_path(node):
                        out.append(f"{f.relative_to(root).as_posix()}: {ast.unparse(node)}")
    return sorted(out)


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _edits_sys_path(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return ast.unparse(node.func.value) == "sys.path"
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(ast.unparse(t).startswith("sys.path") for t in targets)
    return False


# ---- the real tree --------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _repo() -> Graph:
    return scan(REPO)


def test_the_test_tree_mirrors_the_packages():
    assert (REPO / "tests" / "adapters" / "sim" / "kube").is_dir()      # nested mirrors seen
    assert unmirrored_folders(REPO) == []


def test_shared_helpers_live_in_kits():
    assert helpers_outside_kits(REPO) == []


def test_no_test_file_imports_another():
    graph = _repo()
    assert any(_is_test_module(e.source) and e.target.startswith("tests.kits.")
               for e in graph.edges)                                   # test imports are seen
    assert imports_between_tests(graph) == []


def test_engine_tests_import_neither_the_adapters_nor_ray():
    graph = _repo()
    assert "tests.engine.efficient.test_efficient" in graph.modules
    assert engine_tests_reaching_adapters_or_ray(graph) == []


def test_neither_tests_nor_benchmarks_edit_sys_path():
    assert sys_path_edits(REPO) == []


# ---- purpose-made breaks --------------------------------------------------------------
def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_test_folder_with_no_package_is_reported(tmp_path):
    _write(tmp_path, {"engine/raycompat/phases.py": "", "adapters/sim/kube/store.py": "",
                      "tests/engine/raycompat/test_phases.py": "",
                      "tests/adapters/sim/kube/test_store.py": "",
                      "tests/kits/twins.py": "", "tests/house/test_rules.py": "",
                      "tests/sim/replay/test_replay.py": "",
                      "tests/engine/kernel/test_fit.py": ""})
    assert unmirrored_folders(tmp_path) == ["tests/engine/kernel", "tests/sim",
                                            "tests/sim/replay"]


def test_a_helper_outside_kits_is_reported(tmp_path):
    _write(tmp_path, {"tests/__init__.py": "", "tests/conftest.py": "",
                      "tests/kits/raygen.py": "", "tests/adapters/cli/test_explain.py": "",
                      "tests/adapters/cli/malformed_dumps.py": ""})
    assert helpers_outside_kits(tmp_path) == ["tests/adapters/cli/malformed_dumps.py"]


def test_a_test_importing_a_test_is_reported(tmp_path):
    _write(tmp_path, {
        "tests/__init__.py": "", "tests/kits/__init__.py": "", "tests/kits/twins.py": "",
        "tests/engine/__init__.py": "",
        "tests/engine/test_place.py": "from tests.kits.twins import dot_fill\n",
        "tests/engine/test_choose.py": "from tests.engine.test_place import R\n",
    })
    assert imports_between_tests(scan(tmp_path)) == [
        "tests.engine.test_choose:1 imports tests.engine.test_place"]


def test_an_engine_test_reaching_ray_is_reported(tmp_path):
    _write(tmp_path, {
        "tests/__init__.py": "", "tests/kits/__init__.py": "",
        "tests/kits/raygen.py": "from ray.autoscaler.v2.scheduler import SchedulingRequest\n",
        "tests/kits/ganggen.py": "import numpy\n",
        "bench/benchmarks/common.py": "def f():\n    import ray\n",
        "tests/engine/test_a.py": "from tests.kits.ganggen import gang_tick\n"
                                  "from bench.benchmarks.common import f\n"
                                  "def test():\n    from tests.kits.raygen import make\n",
        "tests/engine/test_b.py": "def test():\n    from vecsched.adapters.ray.codec import decode\n",
        "tests/adapters/test_c.py": "import ray\n",
    })
    assert engine_tests_reaching_adapters_or_ray(scan(tmp_path)) == [
        "tests.engine.test_a:4 imports tests.kits.raygen (in a function) "
        "(which imports ray.autoscaler.v2.scheduler)",
        "tests.engine.test_b:2 imports vecsched.adapters.ray.codec (in a function)"]


def test_a_sys_path_edit_is_reported(tmp_path):
    sp = "sys." + "path"           # in pieces, so that this file holds no edit itself
    _write(tmp_path, {
        "bench/suite.py": f"import sys, os\n{sp}.insert(0, os.getcwd())\nprint({sp})\n",
        "tests/test_x.py": f'CHILD = """\nimport sys\n{sp}[0:0] = ["x"]\n"""\n'
                           f"import sys\n{sp} += ['y']\n",
    })
    assert sys_path_edits(tmp_path) == [
        "bench/suite.py: sys.path.insert(0, os.getcwd())",
        "tests/test_x.py: sys.path += ['y']",
        "tests/test_x.py: sys.path[0:0] = ['x']"]
