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


@pytest.mark.slow
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


LEAK_PROBE = r"""
import ctypes, sys
from autod import heap
if sys.argv[1] == "pinned":
    assert heap.pin_mmap_threshold() and heap.scrub_freed()
libc = heap._glibc()
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc(4 << 20))  # a freed mmapped block: glibc raises its threshold to 4 MiB
SIZE = 167_600                   # chromadb's HNSW buffer for 100 items of 384 floats
p = libc.malloc(SIZE)
ctypes.memset(p, ord("K"), SIZE)  # a secret in a block that is then freed
libc.free(p)
q = libc.malloc(SIZE)             # what an index buffer starts with
print(ctypes.string_at(q, SIZE).count(b"K"))
"""


@pytest.mark.slow
def test_a_large_block_never_starts_with_what_a_freed_one_held():
    """Found in test_secrets: chromadb persisted an LLM reply with the echoed API key from freed
    heap into data_level0.bin. Pinned and scrubbed, no block starts with what a freed one held (the
    threshold alone left it to the heap's layout: a free chunk large enough is used before mmap)."""
    import subprocess
    import sys

    def leaked(how: str) -> int:
        cmd = [sys.executable, "-c", LEAK_PROBE, how]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return int(out.stdout)

    assert leaked("default") > 100_000  # glibc's dynamic threshold: the freed block comes back as is
    assert leaked("pinned") == 0
