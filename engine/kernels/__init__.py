"""numba kernels: small, private, pure. Each has a slow readable twin in tests/twins.py."""
