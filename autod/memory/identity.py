"""Who wrote a memory item: the daemon's instance id (stable per state dir) and its workspace.

Several daemons may share one Chroma server. Every item carries ``instance`` and ``workspace`` so
retention touches only the writer's own items, recall can tell its own observations from other
daemons' lessons, and an operator can see who wrote what. The id is made once and kept in
``<state_dir>/instance-id`` (0600): a restart, a reload or a new version keeps it; a new state dir
is a new daemon.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from autod import atomicfile

ID_FILE = "instance-id"
_VALID = re.compile(r"^[0-9a-f]{16}$")
NO_INSTANCE = "0" * 16


@dataclass(frozen=True)
class Identity:
    instance: str
    workspace: str

    def stamp(self) -> dict[str, str]:
        """The metadata every item this daemon writes carries."""
        return {"instance": self.instance, "workspace": self.workspace}

    def share(self, period_s: int) -> int:
        """A stable offset in [0, period_s) for this instance: spreads a fleet's scheduled work."""
        if period_s <= 0:
            return 0
        return int.from_bytes(hashlib.sha256(self.instance.encode()).digest()[:8], "big") % period_s


def instance_id(state_dir: Path, *, create: bool = True) -> str:
    """The daemon's id, created on first use (16 hex digits); a damaged file is replaced.

    With create=False (a read-only look) a state dir without one gets NO_INSTANCE, which owns nothing.
    """
    path = Path(state_dir) / ID_FILE
    with contextlib.suppress(OSError):
        text = path.read_text().strip()
        if _VALID.match(text):
            return text
    if not create:
        return NO_INSTANCE
    new = uuid.uuid4().hex[:16]
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = atomicfile.write_temp(path, f"{new}\n".encode(), 0o600)
    try:
        os.link(tmp, path)  # never replaces an id another process (a CLI command) made meanwhile
    except FileExistsError:
        text = path.read_text().strip()
        if not _VALID.match(text):  # a damaged file: ours replaces it
            os.replace(tmp, path)
            atomicfile.fsync_dir(path.parent)
            return new
        new = text
    else:
        atomicfile.fsync_dir(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return new


def identity(state_dir: Path, workspace: Path | str, *, create: bool = True) -> Identity:
    return Identity(instance=instance_id(state_dir, create=create), workspace=str(workspace))
