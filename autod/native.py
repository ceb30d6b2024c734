"""The process's own C library, loaded once: for thread names (autod.threads) and heap tuning (autod.heap)."""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any


@functools.cache
def libc() -> Any | None:
    """The C library already linked into this process (no search, no subprocess); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
