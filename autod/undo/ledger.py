"""What each kept cycle wrote into the working tree: `<state_dir>/undo/<cycle_id>/`.

`manifest.json` names each file with the sha256 of what autod wrote and of what was there before;
`<n>.orig` is a copy of the original (none for a file autod created). A record is written into a
temp dir, fsynced, then renamed into place, so it is whole or absent. `undone.json` marks one taken back.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autod import atomicfile
from autod.act import atomic
from autod.act.edits import FileChange
from autod.undo.remembered import remember

if TYPE_CHECKING:
    from autod.events import Event
    from autod.reflection import Reflection

DIR = "undo"
MANIFEST = "manifest.json"
UNDONE = "undone.json"
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass
class KeptFile:
    rel: str
    existed: bool
    mode: int | None
    orig: str | None  # the copy's name in the record dir
    orig_sha256: str | None
    new_sha256: str


@dataclass
class KeptCycle:
    cycle_id: str
    mode: str
    event: dict[str, Any]  # the event the cycle worked on (redacted as every Event is)
    plan_summary: str
    diff: str
    commit: str | None
    at: float
    files: list[KeptFile] = field(default_factory=list)
    undone_by: str | None = None
    directory: Path | None = None

    def original(self, f: KeptFile) -> bytes:
        """The saved original of `f`, checked against its hash."""
        assert self.directory is not None and f.orig is not None
        data = (self.directory / f.orig).read_bytes()
        if atomic.sha(data) != f.orig_sha256:
            raise ValueError(f"the saved original of {f.rel} is corrupt")
        return data


class KeptLedger:
    def __init__(self, state_dir: Path, keep_cycles: int, keep_days: float) -> None:
        self.root = Path(state_dir) / DIR
        self.keep_cycles = keep_cycles
        self.keep_days = keep_days

    def record(
        self,
        cycle_id: str,
        mode: str,
        event: dict[str, Any],
        plan_summary: str,
        diff: str,
        commit: str | None,
        changes: list[FileChange],
    ) -> Path:
        """Keep what `changes` wrote (blocking); returns the record dir."""
        if not _ID.match(cycle_id):
            raise ValueError(f"cycle id not usable as a directory name: {cycle_id!r}")
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.root / f".{cycle_id}.tmp-{secrets.token_hex(4)}"
        tmp.mkdir(mode=0o700)
        try:
            files = []
            for n, c in enumerate(changes):
                orig = None
                if c.old is not None:
                    orig = f"{n}.orig"
                    atomicfile.write_new_file(tmp / orig, c.old, 0o600)
                files.append(
                    KeptFile(
                        c.rel, c.old is not None, c.mode, orig, atomic.sha(c.old), atomic.sha(c.new) or ""
                    )
                )
            manifest = {
                "version": 1,
                "cycle_id": cycle_id,
                "mode": mode,
                "event": event,
                "plan_summary": plan_summary,
                "diff": diff[:20000],
                "commit": commit,
                "at": time.time(),
                "files": [f.__dict__ for f in files],
            }
            atomicfile.write_new_file(tmp / MANIFEST, json.dumps(manifest).encode(), 0o600)
            atomicfile.fsync_dir(tmp)
            final = self.root / cycle_id
            os.rename(tmp, final)
            atomicfile.fsync_dir(self.root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.prune()
        return final

    def load(self, cycle_id: str) -> KeptCycle | None:
        """The record of `cycle_id` (or a unique prefix of it), None when there is none."""
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", cycle_id) or not self.root.is_dir():
            return None
        names = [
            d.name for d in self.root.iterdir() if not d.name.startswith(".") and d.name.startswith(cycle_id)
        ]
        exact = [n for n in names if n == cycle_id]
        chosen = exact[0] if exact else (names[0] if len(names) == 1 else None)
        if chosen is None:
            return None
        directory = self.root / chosen
        try:
            m = json.loads((directory / MANIFEST).read_bytes())
            undone = json.loads((directory / UNDONE).read_bytes()) if (directory / UNDONE).exists() else None
            return KeptCycle(
                cycle_id=m["cycle_id"],
                mode=m["mode"],
                event=m["event"],
                plan_summary=m["plan_summary"],
                diff=m.get("diff", ""),
                commit=m.get("commit"),
                at=m["at"],
                files=[KeptFile(**f) for f in m["files"]],
                undone_by=(undone or {}).get("undo_id"),
                directory=directory,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def mark_undone(self, kept: KeptCycle, undo_id: str, reason: str) -> None:
        assert kept.directory is not None
        atomicfile.atomic_write(
            kept.directory / UNDONE,
            json.dumps({"undo_id": undo_id, "reason": reason, "at": time.time()}).encode(),
            0o600,
        )
        # outlives this record's pruning: no later cycle makes the change again without a person's yes
        remember(self.root.parent, kept.cycle_id, undo_id, kept.plan_summary, kept.diff, reason)

    def ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return [d.name for d in self.root.iterdir() if not d.name.startswith(".")]

    def prune(self, now: float | None = None) -> list[str]:
        """Forget records past `keep_cycles` (oldest first) or older than `keep_days`, and stray temp dirs."""
        now = time.time() if now is None else now
        if not self.root.is_dir():
            return []
        dated = []
        for d in self.root.iterdir():
            if d.name.startswith("."):
                if now - d.stat().st_mtime > 3600:  # a record a crash left half-written
                    shutil.rmtree(d, ignore_errors=True)
                continue
            with contextlib.suppress(OSError):
                dated.append((d.stat().st_mtime, d))
        dated.sort(reverse=True)
        gone = [
            d
            for i, (mtime, d) in enumerate(dated)
            if i >= self.keep_cycles or now - mtime > self.keep_days * 86400
        ]
        for d in gone:
            shutil.rmtree(d, ignore_errors=True)
        return [d.name for d in gone]


def kept_hook(ledger: KeptLedger) -> Callable[[Reflection, Event, str, list[FileChange]], Awaitable[None]]:
    """The cycle's after-keep hook: what it wrote is kept for `autod undo` (never fails the cycle)."""
    import asyncio

    import structlog

    log = structlog.get_logger("autod.undo")

    async def record(r: Reflection, event: Event, diff: str, changes: list[FileChange]) -> None:
        try:
            await asyncio.to_thread(
                ledger.record,
                r.cycle_id,
                r.mode,
                json.loads(event.model_dump_json()),
                r.plan_summary or "",
                diff,
                r.commit,
                list(changes),
            )
        except Exception as exc:  # the edits are kept either way; only `autod undo` will not know them
            log.warning("undo.not_recorded", reason=f"{type(exc).__name__}: {str(exc)[:200]}")

    return record
