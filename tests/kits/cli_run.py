"""The vecsched command run in process: (exit status, stderr lines, stdout)."""
from __future__ import annotations

from vecsched.adapters.cli.main import main


def run_cli(capsys, *argv) -> tuple[int, list, str]:
    """``vecsched ARGV`` in this process, with pytest's ``capsys`` capturing its output."""
    try:
        code = main(list(argv))
    except SystemExit as e:                   # argparse: --version, its own errors
        code = e.code
    out, err = capsys.readouterr()
    return code, err.strip().splitlines(), out
