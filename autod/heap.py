"""Give freed heap back to the OS (glibc only; a no-op elsewhere).

A cycle allocates and frees tens of MB in native code (onnxruntime, chromadb's Rust core, sqlite)
from several threads. glibc keeps what is freed in per-thread arenas, so a long-running daemon's
RSS creeps up although nothing leaks: measured over 1,500 memory-layer cycles, RSS grew 8.5 % and
`malloc_trim(0)` then brought it 16 % *below* the warm-up figure (docs/PERFORMANCE.md). So the
daemon caps the number of arenas at start-up and trims when the queue runs dry.

It also keeps freed memory from reaching a file. chromadb's HNSW index persists its whole item
buffer, unused slots included: a test found an LLM server's 401 body, with the API key it echoed, in
`data_level0.bin`. Two settings: the mmap threshold is pinned (glibc raises it each time a large
mmapped block is freed, onnxruntime frees many, so later large blocks would come from the heap), and
every freed block is overwritten (`M_PERTURB`): a large block can still be cut from a free chunk of
the heap before mmap is ever considered, so pinning alone leaves it to chance what such a block held.
"""

from __future__ import annotations

from typing import Any

from autod.native import libc

M_ARENA_MAX = -8  # mallopt parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
M_PERTURB = -6
PERTURB_BYTE = 0x5A  # freed blocks are filled with it, new ones with its complement
ARENA_MAX = 2
MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value; setting it stops the dynamic raise

def _glibc() -> Any | None:
    """libc when it is glibc (it has malloc_trim and mallopt), else None: musl has nothing to tune."""
    lib = libc()
    return lib if lib is not None and hasattr(lib, "malloc_trim") and hasattr(lib, "mallopt") else None


def limit_arenas(n: int = ARENA_MAX) -> bool:
    """Cap glibc's malloc arenas (as MALLOC_ARENA_MAX=n would); call before threads start."""
    lib = _glibc()
    return lib is not None and lib.mallopt(M_ARENA_MAX, n) == 1


def pin_mmap_threshold(n: int = MMAP_THRESHOLD) -> bool:
    """Serve every malloc of `n` bytes or more with fresh (zeroed) pages, for the process's life."""
    lib = _glibc()
    return lib is not None and lib.mallopt(M_MMAP_THRESHOLD, n) == 1


def scrub_freed(byte: int = PERTURB_BYTE) -> bool:
    """Overwrite every block glibc frees (as MALLOC_PERTURB_=byte would), for the process's life."""
    lib = _glibc()
    return lib is not None and lib.mallopt(M_PERTURB, byte) == 1


def trim() -> bool:
    """Return free heap pages to the OS; True if glibc released any. Blocking: run it in a thread."""
    lib = _glibc()
    return lib is not None and lib.malloc_trim(0) == 1
