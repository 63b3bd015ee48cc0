"""glibc's allocator, told to keep the memory a training step frees for the next step.

A CPU training step allocates and frees the same large tensors (activations, logits and their
gradients, a few MiB to tens of MiB each) every step. By default glibc hands much of that back
to the kernel at once (memory above 128 KiB at the top of the heap, and every block glibc
mapped on its own), so the next step faults it back in page by page. Here every block comes
from the heap and the heap never shrinks: on the 2-core machine the demo is timed on, the
demo's target trained in 78.7 s instead of 83.3 s with 10x fewer page faults and the same
weights (``benchmarks/allocator.py`` measures steps of its shape: 1.14x). Keeping freed memory
changes no computed value, only where the bytes come from; the process holds on to its peak
memory until it exits.

``DFSU_MALLOC=default`` leaves the allocator as it is. A model larger than
``LARGE_MODEL_BYTES`` on disk turns this off when it is read (``give_back_large``): there the
blocks are hundreds of MiB, what a stage frees (a checked model, the copy's fresh weights) must
go back to the kernel, and a heap that never shrinks ran a 1B model out of 24 GiB.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4

TRIM_THRESHOLD = 2**31 - 1  # the largest (an int): never give the top of the heap back
TOP_PAD = 256 << 20  # grow the heap 256 MiB at a time
MMAP_THRESHOLD = 32 << 20  # glibc's largest; with M_MMAP_MAX 0 no block is mapped alone


def keep_freed_memory() -> bool:
    """Tune glibc's malloc for training loops (see the module's docstring); True when it
    took effect, False elsewhere (not Linux, another C library, ``DFSU_MALLOC=default``)."""
    libc = _glibc()
    if libc is None:
        return False
    settings = (
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (M_MMAP_MAX, 0),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        (M_TOP_PAD, TOP_PAD),
    )
    return _mallopt(libc, settings)


def _glibc() -> Any:
    """The process's C library when it is glibc on Linux and the allocator is not left at its
    defaults (``DFSU_MALLOC=default``); else None. Only glibc has gnu_get_libc_version
    (musl's mallopt does nothing)."""
    if not sys.platform.startswith("linux") or os.environ.get("DFSU_MALLOC") == "default":
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    wanted = ("gnu_get_libc_version", "mallopt", "malloc_trim")
    return libc if all(hasattr(libc, name) for name in wanted) else None


def _mallopt(libc: Any, settings: tuple[tuple[int, int], ...]) -> bool:
    """Every (parameter, value) set with mallopt; True when each took effect."""
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in settings)


LARGE_MODEL_BYTES = 1 << 30  # a checkpoint over 1 GiB of weights: large blocks go back
GIVE_BACK_FROM = 1 << 20  # then every block of 1 MiB or more is mapped alone, unmapped on free
GLIBC_TRIM = 128 << 10  # glibc's default trim threshold


def give_back_large() -> bool:
    """Large blocks mapped alone and returned to the kernel when freed, and the heap's free
    pages returned now (glibc; True when it took effect): for models whose weights alone are
    gigabytes, where keeping freed memory costs more memory than it saves time."""
    libc = _glibc()
    if libc is None:
        return False
    settings = (
        (M_MMAP_MAX, 1 << 16),
        (M_MMAP_THRESHOLD, GIVE_BACK_FROM),
        (M_TRIM_THRESHOLD, GLIBC_TRIM),
        (M_TOP_PAD, GLIBC_TRIM),
    )
    done = _mallopt(libc, settings)
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    libc.malloc_trim(0)
    return done
