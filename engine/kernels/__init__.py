"""numba kernels: small, private, pure. Each has a slow readable twin (tests/kits/twins.py,
tests/kits/twins_place.py for the efficient mode's placement, or
engine/raycompat/packer.py's Python packer for the packing loops); the tests compare them.
Only their owners import them: the ``eff*`` kernels engine/efficient, the others
engine/raycompat (and engine/warmup.py, which compiles the entry kernels): docs/design.md
§2, checked by tests/house/test_layering.py.

State crosses kernel boundaries as named records (records.py: named tuples of
arrays, one compiled specialisation per record layout). All numba options are
_jit.py's: ``njit`` kernels are called from Python; ``njit_inner`` helpers only
from kernels (no Python entry point is compiled for them, and none of numba's
reference counting: the atomics on every array argument were half of the gang
kernel's time); ``hot=True`` helpers are always inlined. steps.py gives the slow
twin and the tests Python entry points to single steps. The kernels that
allocate (``_pack_gangs``, ``_run_loop``, the fit index, the class table) own
the scratch their helpers write into.
"""
