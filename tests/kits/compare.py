"""The decision comparison the differential tests use: the package's own
(adapters/ray/compare.py, also behind shadow mode)."""
from vecsched.adapters.ray.compare import decisions, ray_quirk, reply_diff as diff  # noqa: F401
