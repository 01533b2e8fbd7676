"""Peak resident memory of a block of code, for the scale rows of
bench/compare_ray.py and bench/efficient_scaling.py.

Linux keeps each process's peak resident set (``VmHWM`` in /proc/self/status)
and resets it to the current size when ``5`` is written to
/proc/self/clear_refs; the growth of one call is then its peak minus the size
before it. Where that file cannot be written, the growth falls back to the
rise of ``ru_maxrss`` (0 when the call stays under an earlier peak) and
``exact`` says so.
"""
from __future__ import annotations

import resource


def _status(field: str) -> int:
    """A ``kB`` field of /proc/self/status, in bytes (-1 when absent)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakRss:
    """``with PeakRss() as m: ...``; then ``m.growth`` (bytes the peak resident
    set rose above the size at entry), ``m.peak`` (that peak) and ``m.exact``."""

    def __enter__(self) -> "PeakRss":
        self.exact = _reset_peak() and _status("VmHWM") >= 0
        self.before = _status("VmRSS")
        self._maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return self

    def __exit__(self, *exc) -> None:
        if self.exact:
            self.peak = _status("VmHWM")
            self.growth = max(0, self.peak - self.before)
        else:
            self.peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            self.growth = max(0, self.peak - self._maxrss)


def mib(n: int) -> float:
    return n / 2 ** 20
