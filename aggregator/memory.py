"""Keep the memory an aggregation step frees for the next step (glibc's malloc settings).

A step reads up to READ_BUDGET (32 MiB) of stream entries, then merges and counts them in
chunks of a few MiB; by default glibc returns blocks of >= 128 KiB to the kernel when they are
freed (mmap'd blocks, and a heap top above its trim threshold), so every step faults the same
amount of memory in again: measured at OUE d = 1,024, ~20,000 minor page faults per 200,000
reports, 32-56% of the worker's CPU in the kernel, and on this VM wall time up to 4x the CPU
time of the counting (benchmarks/README.md, "Where aggregation waits"). With blocks up to 32 MiB
taken from the heap and up to 256 MiB of freed heap kept, a worker's resident memory stays at
its peak step (bounded by READ_BUDGET and the chunk temporaries) instead of being returned.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

LOG = logging.getLogger("ldptel.aggregator")

#: mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Blocks below this come from the heap (glibc's largest accepted value on 64-bit: 32 MiB).
MMAP_THRESHOLD = 32 << 20
#: Freed memory at the heap's top is returned to the kernel only above this.
TRIM_THRESHOLD = 256 << 20

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Apply the settings once per process; False where malloc is not glibc's (no-op)."""
    global _applied
    if _applied is None:
        _applied = _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and _mallopt(
            M_TRIM_THRESHOLD, TRIM_THRESHOLD
        )
        if not _applied:
            LOG.debug("ldptel: malloc settings not applied (not glibc)")
    return _applied


def _mallopt(parameter: int, value: int) -> bool:
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(parameter, value))
