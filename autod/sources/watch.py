"""`type: watch`: one files_changed event per settled batch of changes under the watched paths.

Ignored: watchfiles' defaults (.git, __pycache__, editors' temp files, ...), the state dir,
cfg.ignore globs, .gitignored paths, files that hold exactly what autod itself wrote, and names that
are not UTF-8 (`autod.fsnames`: left out of the batch, said once; the rest of the batch stays).
watchfiles itself fails a whole batch that holds such a name ("Unable to decode path"), losing the
other changes in it: they are found again by their times (`_changed_since`) and a new watcher is armed.

.gitignore is asked of `git check-ignore --stdin -z` (one call per settled batch, in a
thread): git's own answer covers nested .gitignore files, negations, .git/info/exclude and
the global excludes file, which a small matcher would get subtly wrong.
"""

from __future__ import annotations

import asyncio
import errno
import fnmatch
import os
import re
import subprocess
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import structlog
import watchfiles
from watchfiles import Change, DefaultFilter

from autod import fsnames
from autod.config.settings import WatchSource as WatchConfig
from autod.events import Event, EventKind, fingerprint
from autod.git import safe as gitsafe
from autod.ownwrites import OwnWrites
from autod.walk import walk

log = structlog.get_logger(__name__)

MAX_PATHS = 500
SUMMARY_NAMES = 5
MAX_DROPPED_SHOWN = 20
POLL_DELAY_MS = 300
ROOT_POLL_S = 0.25
MAX_STEP_MS = 1000
IDLE_TIMEOUT_MS = 5000
STORM_YIELD_MS = 10_000  # a change storm longer than this still yields a batch now and then
GIT_TIMEOUT_S = 10.0
UNDECODABLE = "Unable to decode path"  # watchfiles' error for a name that is not UTF-8
_RUST_ESCAPE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])|\\(.)")
TIMES_SLACK_S = 1.0  # a file's times may trail the clock autod reads by a tick

AwatchFn = Callable[..., AsyncGenerator[set[tuple[Change, str]], None]]


class WatchFilter(DefaultFilter):
    """watchfiles' defaults, plus the state dir, `.autod`, autod's temp files and the configured globs."""

    def __init__(self, workspace: Path, state_dir: Path, globs: Iterable[str]) -> None:
        # Not state_dir.name: a state dir /var/lib/autod must not hide a package directory named autod/.
        super().__init__(ignore_dirs=(*DefaultFilter.ignore_dirs, ".autod"))
        self._workspace = workspace
        self._state_dir = str(state_dir)
        self._globs = list(globs)

    def __call__(self, change: Change, path: str) -> bool:
        if not super().__call__(change, path):
            return False
        if path == self._state_dir or path.startswith(self._state_dir + os.sep):
            return False
        if ".autod-tmp-" in os.path.basename(path):  # autod's atomic writes: temp file, then rename
            return False
        if self._globs:
            rel = _relative(self._workspace, path)
            name = os.path.basename(path)
            return not any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(name, g) for g in self._globs)
        return True


def _relative(workspace: Path, path: str) -> str:
    try:
        return Path(path).relative_to(workspace).as_posix()
    except ValueError:
        return Path(path).as_posix()


def _undecodable(exc: BaseException) -> str | None:
    """The name in watchfiles' error for a file name that is not UTF-8 (alone or in an exception
    group, as its task group raises it); None for any other error."""
    if isinstance(exc, BaseExceptionGroup):
        return next((n for e in exc.exceptions if (n := _undecodable(e)) is not None), None)
    text = str(exc)
    if not (isinstance(exc, RuntimeError) and text.startswith(UNDECODABLE)):
        return None
    quoted = text[len(UNDECODABLE):].strip().removesuffix("to string").strip().strip('"')
    # Rust's Debug form, `\xFF` for a byte that is not UTF-8, back to Python's form of the name
    return _RUST_ESCAPE.sub(lambda m: chr(0xDC00 + int(m[1], 16)) if m[1] else m[2], quoted)


def _is_watch_limit(exc: OSError) -> bool:
    return exc.errno == errno.ENOSPC or "watch limit" in str(exc).lower()


class WatchSource:
    """Yields files_changed events once the tree has been quiet for cfg.settle_ms."""

    def __init__(
        self,
        cfg: WatchConfig,
        workspace: Path,
        state_dir: Path,
        own_writes: OwnWrites,
        *,
        awatch: AwatchFn = watchfiles.awatch,
    ) -> None:
        self.cfg = cfg
        self.workspace = workspace.resolve()
        self.roots = [(self.workspace / p).resolve() for p in cfg.paths]
        self.name = f"watch:{cfg.name or ','.join(cfg.paths)}"
        self._own = own_writes
        self._awatch = awatch
        self._filter = WatchFilter(self.workspace, state_dir.resolve(), cfg.ignore)
        self._force_polling = cfg.force_polling
        self._git = cfg.use_gitignore and (self.workspace / ".git").exists()
        self.armed = asyncio.Event()

    async def events(self) -> AsyncIterator[Event]:
        known = [r for r in self.roots if r.exists()]
        while True:
            present = [r for r in self.roots if r.exists()]
            if not present:
                known = []
                self.armed.set()  # no root yet: one that appears is reported whole
                await asyncio.sleep(ROOT_POLL_S)
                continue
            reappeared = [r for r in present if r not in known]
            known = present
            if reappeared:  # inotify went silent when it was deleted: report the tree as it is now
                self.armed.clear()  # until the new watcher is up: a consumer of this event may wait for it
                walked = await asyncio.to_thread(self._walk_all, reappeared)
                tree = {str(p) for p in walked}
                ev = await self._batch_event(tree or {str(r) for r in reappeared})
                if ev is not None:
                    yield ev
            try:
                async for ev in self._watch(present):
                    yield ev
            except OSError as exc:
                if _is_watch_limit(exc) and not self._force_polling:
                    log.warning("watch.limit_reached_polling", source=self.name, poll_delay_ms=POLL_DELAY_MS)
                    self._force_polling = True
                    continue
                if any(not r.exists() for r in present):
                    continue  # a root vanished while arming: wait for it above
                raise

    async def _watch(self, roots: list[Path]) -> AsyncIterator[Event]:
        """One armed watcher; returns when the set of existing roots changes."""
        settle_s = self.cfg.settle_ms / 1000
        # watchfiles' Rust loop wakes every `step` ms and yields after `step` ms without changes:
        # a step as long as the settle time (capped) makes that yield the settle itself, and an
        # idle watcher wakes Python only every IDLE_TIMEOUT_MS (to notice roots coming and going).
        step_ms = min(self.cfg.settle_ms, MAX_STEP_MS)
        rest_ms = self.cfg.settle_ms - step_ms
        stop = asyncio.Event()
        self.armed.clear()
        changes = self._awatch(
            *roots,
            watch_filter=self._filter,
            debounce=max(STORM_YIELD_MS, self.cfg.settle_ms * 4),
            step=step_ms,
            stop_event=stop,
            rust_timeout=rest_ms if rest_ms > 0 else IDLE_TIMEOUT_MS,
            yield_on_timeout=True,
            force_polling=self._force_polling,
            poll_delay_ms=POLL_DELAY_MS,
        )
        pending: set[str] = set()
        last = time.monotonic()
        taken = time.time()  # when the watcher last handed its changes over (by the clock files' times use)
        batches = aiter(changes)
        # awatch creates its watcher (the inotify watches, or the poller's first look at the tree) in
        # the first step of its first __anext__, before it waits for changes in a thread; changes are
        # kept from then on. So: run that step, and once it is past, the source is armed.
        # (test_watch.py::test_awatch_creates_its_watcher_in_its_first_step says so if that changes.)
        first: asyncio.Future[set[tuple[Change, str]] | None] | None = asyncio.ensure_future(
            anext(batches, None)
        )
        try:
            await asyncio.sleep(0)  # the task above takes its first step before this returns (FIFO)
            if first is not None and not first.done():  # done: it failed to start (a watch limit)
                self.armed.set()
            while True:
                try:
                    if first is not None:
                        batch, first = await first, None
                    else:
                        batch = await anext(batches, None)
                except (RuntimeError, BaseExceptionGroup) as exc:
                    name = _undecodable(exc)
                    if name is None:
                        raise
                    first = None
                    # the watcher lost every change it held with that name: found again, then a new one
                    fsnames.left_out(name, self.name)
                    pending.update(await asyncio.to_thread(self._changed_since, roots, taken - TIMES_SLACK_S))
                    ev = await self._batch_event(pending) if pending else None
                    if ev is not None:
                        yield ev
                    return
                taken = time.time()
                if batch is None:
                    return
                if batch:
                    pending.update(path for _, path in batch)
                    # watchfiles yields a batch after `step` ms without changes: count that quiet
                    last = time.monotonic() - step_ms / 1000
                if pending and time.monotonic() - last >= settle_s:
                    ev = await self._batch_event(pending)
                    pending = set()
                    if ev is not None:
                        yield ev
                vanished = any(not r.exists() for r in roots)
                if vanished or any(r.exists() for r in self.roots if r not in roots):
                    if pending:
                        ev = await self._batch_event(pending)
                        if ev is not None:
                            yield ev
                    return
        finally:
            stop.set()
            if first is not None and not first.done():
                first.cancel()
                await asyncio.gather(first, return_exceptions=True)
            await changes.aclose()

    def _walk_all(self, roots: list[Path]) -> list[Path]:
        """Blocking: every unfiltered file under the roots (runs in a thread)."""
        out: list[Path] = []
        for root in roots:
            out.extend(self._walk(root))
        return out

    def _changed_since(self, roots: list[Path], since: float) -> set[str]:
        """Blocking: the files under the roots written or changed at `since` or later."""
        out = set()
        for p in self._walk_all(roots):
            try:
                st = p.lstat()
            except OSError:
                continue
            if max(st.st_mtime, st.st_ctime) >= since:
                out.add(str(p))
        return out

    def _walk(self, root: Path) -> list[Path]:
        out: list[Path] = []
        for dirpath, dirnames, filenames in walk(root):
            dirnames[:] = [d for d in dirnames if self._filter(Change.added, os.path.join(dirpath, d))]
            out.extend(Path(dirpath, f) for f in filenames)
        return out

    async def _batch_event(self, paths: set[str]) -> Event | None:
        kept = await asyncio.to_thread(self._keep, set(fsnames.utf8_only(paths, self.name)))
        if not kept:  # a batch of autod's own writes, or of ignored files: said, so it can be waited on
            dropped = sorted(_relative(self.workspace, p) for p in paths)
            log.debug("watch.batch_dropped", source=self.name, paths=dropped[:MAX_DROPPED_SHOWN],
                      count=len(dropped))
            return None
        rels = sorted(_relative(self.workspace, p) for p in kept)
        names = ", ".join(rels[:SUMMARY_NAMES]) + (", …" if len(rels) > SUMMARY_NAMES else "")
        payload: dict[str, Any] = {"paths": rels[:MAX_PATHS]}
        if len(rels) > MAX_PATHS:
            payload["more"] = len(rels) - MAX_PATHS
        return Event(
            source=self.name,
            kind=EventKind.FILES_CHANGED,
            summary=f"{len(rels)} files changed: {names}",
            payload=payload,
            fingerprint=fingerprint("files_changed", *rels),
        )

    def _keep(self, paths: set[str]) -> list[str]:
        """Blocking: drop autod's own writes and .gitignored paths (runs in a thread)."""
        kept = [p for p in paths if self._filter(Change.modified, p) and not self._own.is_own(Path(p))]
        if self._git and kept:
            ignored = self._git_ignored(kept)
            kept = [p for p in kept if p not in ignored]
        return kept

    def _git_ignored(self, paths: list[str]) -> set[str]:
        rel = {_relative(self.workspace, p): p for p in paths}
        try:
            proc = gitsafe.run(
                self.workspace,
                "check-ignore",
                "--stdin",
                "-z",
                input="\0".join(rel).encode("utf-8", "surrogateescape") + b"\0",  # the names' own bytes
                timeout=GIT_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("watch.gitignore_check_failed", source=self.name, error=type(exc).__name__)
            return set()
        if proc.returncode not in (0, 1):  # 1: nothing ignored; 128: not a repo / fatal
            return set()
        return {rel[r] for r in proc.stdout.decode(errors="replace").split("\0") if r in rel}
