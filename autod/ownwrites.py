"""Remember autod's own writes so the watcher never reacts to them."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from autod.safety.saferead import read_untrusted

MAX_OWN_BYTES = 256 * 2**20  # a file autod wrote; a bigger one (or a FIFO) is not what it wrote


class OwnWrites:
    """Path -> sha256 of the bytes autod last wrote there (or None for a deletion)."""

    def __init__(self, ttl_s: float = 600.0) -> None:
        self._seen: dict[Path, tuple[str | None, float]] = {}
        self._lock = threading.Lock()
        self._ttl = ttl_s
        # wall-clock time of autod's latest write to the workspace (an edit or a rollback): a check
        # result from before it describes files that have changed since (autod.runtime.freshness,
        # autod.runtime.once)
        self.last_at = 0.0

    def record(self, path: Path, data: bytes | None) -> None:
        digest = hashlib.sha256(data).hexdigest() if data is not None else None
        with self._lock:
            self._seen[path.resolve()] = (digest, time.monotonic())
            self.last_at = time.time()

    def is_own(self, path: Path) -> bool:
        """True if the file now holds exactly what autod wrote (or is gone as autod left it)."""
        path = path.resolve()
        with self._lock:
            entry = self._seen.get(path)
            if entry is None:
                return False
            digest, at = entry
            if time.monotonic() - at > self._ttl:
                del self._seen[path]
                return False
        try:
            current = hashlib.sha256(read_untrusted(path, cap=MAX_OWN_BYTES)).hexdigest()
        except FileNotFoundError:
            current = None
        except OSError:
            return False
        return current == digest
