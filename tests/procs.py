"""Live processes by command line, for tests that prove nothing a check started outlives it."""

from __future__ import annotations

import os
import time
from pathlib import Path


def alive_with(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds `marker` (pids inside bwrap differ)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state != "Z":
            out.append(int(entry))
    return out


def wait_gone(marker: str, seconds: float = 5.0) -> bool:
    """True once no live process holds `marker` (an observation window, not a speed assertion)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive_with(marker):
            return True
        time.sleep(0.05)
    return False
