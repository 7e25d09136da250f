"""aggregator/memory.py: a worker keeps the memory a step frees, so the next step does not
fault it in again (counted as minor page faults of a child process, not timed)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np
    from ldptel.aggregator.memory import keep_freed_memory
    applied = keep_freed_memory() if sys.argv[1] == "keep" else False
    np.ones(1 << 20).sum()  # numpy's first call outside the count
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for size in range(1 << 20, 21 << 20, 1 << 20):  # buffers of growing steps, freed
        len(b"x" * size)  # written through: every page touched
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(json.dumps({"applied": applied, "faults": faults}))
    """
)


def faults(mode: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    )
    result: dict[str, int] = json.loads(done.stdout)
    return result


def test_freed_blocks_are_reused_instead_of_faulted_in_again() -> None:
    kept, default = faults("keep"), faults("default")
    if not kept["applied"]:
        pytest.skip("malloc is not glibc's: the settings do not apply")
    # By default a block larger than any freed before is mmap'd afresh and unmapped when
    # freed: the 20 blocks of 1..20 MiB fault in 210 MiB. Kept, the heap grows to the
    # largest block once: at most 20 MiB of faults.
    mib = (1 << 20) // 4096  # pages
    assert default["faults"] > 100 * mib, default
    assert kept["faults"] < 25 * mib, kept
