"""The benchmarks, as a package run from the repository root.

Every script here runs as a module from the root of a checkout, so that it can import
the shared generators (`bench.benchmarks.common`, `tests.kits`) without editing
`sys.path`: `python -m bench.compare_ray`, `python -m bench.suite --quick`. asv
imports `bench/benchmarks/` with the root on its path (`ASV_PYTHONPATH`, set by
`bench/smoke.sh`; bench/README.md shows the commands).
"""
