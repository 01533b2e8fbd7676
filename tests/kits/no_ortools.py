"""Python code in a child process where OR-Tools does not import, as on a broken
install: prefix the code with ``BLOCK`` (an import hook first on ``sys.meta_path`` that
refuses ``ortools``) and run it with ``run_child``, which runs it from the repository
root, so the child imports ``tests.kits`` too."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.kits.paths import REPO

BLOCK = """
import importlib.abc, sys
class _NoOrtools(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "ortools" or name.startswith("ortools."):
            raise ImportError("ortools blocked for this test")
        return None
sys.meta_path.insert(0, _NoOrtools())
"""


def run_child(code: str) -> subprocess.CompletedProcess:
    """`code` (dedented) in a fresh interpreter, output captured as text."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, cwd=REPO)
