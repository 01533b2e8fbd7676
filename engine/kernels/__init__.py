"""numba kernels: small, private, pure. Each has a slow readable twin (tests/twins.py,
or engine/packer.py's Python packer for the packing loops); the tests compare them.

Helpers that allocate nothing are compiled with ``_jit.njit_leaf`` (no reference
counting: the atomics on every array argument were half of the gang kernel's
time); the kernels that allocate (``_pack_gangs``, ``_run_loop``, the fit index)
own the scratch those helpers write into.
"""
