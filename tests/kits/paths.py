"""Where the repository is, for tests that read its files or run its scripts."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
