"""autod.heap on glibc: freed-but-kept heap pages go back to the OS on trim."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from autod import heap

glibc = heap._glibc()
pytestmark = pytest.mark.skipif(not glibc, reason="glibc only; elsewhere autod.heap is a no-op")


def rss_kb() -> int:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_trim_returns_heap_that_free_kept_because_one_live_chunk_pins_the_top():
    glibc.malloc.restype = ctypes.c_void_p
    glibc.free.argtypes = [ctypes.c_void_p]
    chunks = [glibc.malloc(1024) for _ in range(150_000)]  # ~150 MB below the mmap threshold
    for p in chunks:
        ctypes.memset(p, 1, 1024)  # touch: resident
    pin = glibc.malloc(1024)  # the last chunk keeps the heap top where it is, so free() cannot trim
    for p in chunks:
        glibc.free(p)
    kept = rss_kb()
    assert heap.trim() is True
    assert kept - rss_kb() > 100_000, f"RSS {kept} kB -> {rss_kb()} kB"
    glibc.free(pin)

def test_arena_cap_is_accepted():
    assert heap.limit_arenas(2) is True
