"""What the command is doing during a long wait: a spinner on a terminal, one line on
stderr otherwise (so that a pipe or a log still shows each step)."""
from __future__ import annotations

import sys
from contextlib import contextmanager


@contextmanager
def step(console, text: str):
    """Show ``text`` while the block runs: rich's status on a terminal, else a line
    ``... text`` on stderr when the block starts."""
    if console.is_terminal:
        with console.status(text, spinner="dots"):
            yield
    else:
        print(f"... {text}", file=sys.stderr, flush=True)
        yield
