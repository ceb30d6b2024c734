"""kill -9 at many instants of apply / keep / rollback, then recover(): every file as it was, or as planned.

A child process applies a plan over a workspace of 20 files. It is SIGKILLed either from
inside, by its own on_write callback at a seeded write (a deterministic instant: just before
the k-th rename, with the temp file on disk), or from outside a seeded delay after a seeded
progress line (`GO`, `W <k>` printed by on_write, `APPLIED`): any instant of copying
originals, writing the manifest, fsyncs, renames, keep or rollback, whatever the disk's
speed. The callback sleeps a little per write so those kills spread between renames; no
test hook lives in the production code.
"""

from __future__ import annotations

import json
import random
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest

from autod.act import Boundary, Caps, prepare, recover
from autod.plan import Plan

pytestmark = pytest.mark.slow
T = TypeVar("T")

N_FILES = 20
PAUSE_S = 0.002  # per write, in the child's on_write: room for outside kills between renames
HANG_GUARD_S = 30
WORKERS = 4  # runs are independent (own dirs); a few at once keep the module well under 30 s

CHILD = r"""
import json, os, signal, sys, time
from pathlib import Path
from types import SimpleNamespace as NS
from autod.act import Caps, Boundary, Journal, prepare

ws, state, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
kill_at, pause = int(sys.argv[4]), float(sys.argv[5])
# prepare() only reads plan.edits[i].path/symbol/search/replace; skipping pydantic keeps the child's start
# fast.
raw = json.loads(Path(sys.argv[6]).read_text())
plan = NS(edits=[NS(**{"symbol": None, **e}) for e in raw["edits"]])
changes = prepare(plan, Boundary(ws, state, []), Caps(100, 100_000, 1_000_000))
writes = 0

def on_write(path, data):
    global writes
    writes += 1
    print("W", writes, flush=True)
    if writes == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(pause)

print("READY", flush=True)
sys.stdin.readline()
journal = Journal.begin(state, "cycle-1")
journal.apply(changes, on_write=on_write)
print("APPLIED", flush=True)
if mode == "keep":
    journal.keep()
    print("KEPT", flush=True)
elif mode == "rollback":
    journal.rollback(on_write=on_write)
    print("ROLLED_BACK", flush=True)
"""


def snapshot(root: Path) -> dict[str, tuple[str, bytes | None]]:
    """Every entry under root: permission bits and bytes (None for directories)."""
    out: dict[str, tuple[str, bytes | None]] = {}
    for p in sorted(root.rglob("*")):
        mode = oct(stat.S_IMODE(p.lstat().st_mode))
        out[str(p.relative_to(root))] = (mode, None if p.is_dir() else p.read_bytes())
    return out


def make_workspace(root: Path, seed: int) -> tuple[Path, Path, Path]:
    rng = random.Random(seed)
    ws, state = root / "ws", root / "state"
    for i in range(N_FILES):
        p = ws / f"pkg{i % 4}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def f{i}_{j}():\n    return {rng.randint(0, 10**6)}\n" for j in range(30))
        p.write_bytes(body.encode() if i % 5 else body.replace("\n", "\r\n").encode())
        if i % 7 == 0:
            p.chmod(0o755)
    edits = []
    for i in range(0, N_FILES, 1):
        if i % 6 == 5:
            continue  # some files stay untouched
        path = f"pkg{i % 4}/mod{i}.py"
        for j in (3, 7):
            edits.append({"path": path, "search": f"def f{i}_{j}():", "replace": f"def g{i}_{j}():"})
    edits.append({"path": "newpkg/deep/created.py", "search": "", "replace": "CREATED = True\n"})
    edits.append({"path": "pkg0/created.py", "search": "", "replace": "ALSO = True\n"})
    plan_file = root / "plan.json"
    plan_file.write_text(json.dumps({"summary": "crash test", "edits": edits, "verify": [], "report": None}))
    return ws, state, plan_file


class Child:
    """The child process, driven line by line: READY, then GO from us, then its progress lines."""

    def __init__(self, root: Path, ws: Path, state: Path, plan_file: Path, mode: str, kill_at: int = 0):
        script = root / "child.py"
        script.write_text(CHILD)
        argv = [str(script), str(ws), str(state), mode, str(kill_at), str(PAUSE_S), str(plan_file)]
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        assert self.wait_for("READY"), self.proc.communicate(timeout=HANG_GUARD_S)[1]

    def wait_for(self, line: str) -> bool:
        """Read progress lines until `line`; False if the child ended first."""
        assert self.proc.stdout is not None
        while True:
            got = self.proc.stdout.readline()
            if not got:
                return False
            self.lines.append(got.strip())
            if got.strip() == line:
                return True

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()

    def kill_after(self, delay_s: float, anchor: str | None = None) -> None:
        """SIGKILL delay_s after the child printed `anchor` (after GO if None)."""
        if anchor is not None:
            assert self.wait_for(anchor), f"child ended before {anchor!r}"
        time.sleep(delay_s)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.finish()

    def finish(self) -> None:
        """Wait for the child's end and take the rest of its lines. Read through the text reader, not
        communicate(): that reads the pipe itself, and the lines readline() had already taken into the
        reader's buffer (all of a fast child's last ones) would be lost."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        try:
            self.proc.wait(timeout=HANG_GUARD_S)  # a few hundred bytes of output: no pipe fills
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.lines += self.proc.stdout.read().splitlines()
        err = self.proc.stderr.read()
        # Killed, or ran to the end: never a Python error.
        assert self.proc.returncode in (0, -signal.SIGKILL), err


def journals_left(state: Path) -> list[Path]:
    """Journal dirs still on disk; none when the kill came before Journal.begin made the journal root
    (a run aimed at the start, on a loaded machine, can be killed before the child reads GO)."""
    root = state / "journal"
    return list(root.iterdir()) if root.exists() else []


def count_changes(ws: Path, state: Path, plan_file: Path) -> int:
    """How many files the plan writes (one write each on apply, one each on rollback)."""
    return len(prepare(load_plan(plan_file), Boundary(ws, state, []), Caps(100, 100_000, 1_000_000)))


def files_written(before: dict, after: dict) -> list[str]:
    """Files whose bytes differ from before, or that are new (temp files and directories aside)."""
    return [
        rel
        for rel, (_, data) in after.items()
        if data is not None and ".autod-tmp-" not in rel and before.get(rel, ("", None))[1] != data
    ]


def leftovers(ws: Path) -> list[Path]:
    return [p for p in ws.rglob("*") if ".autod-tmp-" in p.name]


def load_plan(plan_file: Path) -> Plan:
    return Plan.model_validate_json(plan_file.read_text())


def run_all(runs: int, one_run: Callable[[int], T]) -> list[T]:
    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one_run, range(runs)))  # list(): re-raises the first failed run


def fresh(tmp_path: Path, run: int, seed: int) -> tuple[Path, Path, Path, Path]:
    root = tmp_path / f"run{run}"
    root.mkdir()
    return (root, *make_workspace(root, seed))


def test_kill_just_before_each_rename_recovers_the_originals(tmp_path: Path) -> None:
    rng = random.Random(1234)
    seeds = [rng.randint(0, 10**6) for _ in range(8)]

    def one_run(run: int) -> None:
        root, ws, state, plan_file = fresh(tmp_path, run, seeds[run])
        before = snapshot(ws)
        n_writes = count_changes(ws, state, plan_file)
        k = 1 if run == 0 else n_writes if run == 1 else random.Random(seeds[run]).randint(1, n_writes)
        child = Child(root, ws, state, plan_file, "apply", kill_at=k)
        child.go()
        child.finish()
        assert child.proc.returncode == -signal.SIGKILL
        # Before recovery: exactly k-1 files renamed into place, the k-th only a temp file.
        assert len(files_written(before, snapshot(ws))) == k - 1
        assert len(leftovers(ws)) == 1
        assert recover(state, ws) == ["cycle-1"]
        assert snapshot(ws) == before, f"run {run}, killed before write {k}"
        assert journals_left(state) == []

    run_all(len(seeds), one_run)


def test_kill_at_random_instants_of_apply_recovers_the_originals(tmp_path: Path) -> None:
    rng = random.Random(99)
    # One run in three is aimed at the start (journal dir, copies of originals, manifest), the
    # others a little after a seeded write's on_write (before, during or after its rename).
    aims = [
        (None, rng.uniform(0, 0.03)) if run % 3 == 0 else (rng.random(), rng.uniform(0, 3 * PAUSE_S))
        for run in range(12)
    ]

    def one_run(run: int) -> None:
        root, ws, state, plan_file = fresh(tmp_path, run, seed=100 + run)
        before = snapshot(ws)
        at, delay = aims[run]
        k = None if at is None else 1 + int(at * count_changes(ws, state, plan_file))
        child = Child(root, ws, state, plan_file, "apply")
        child.go()
        child.kill_after(delay, anchor=None if k is None else f"W {k}")
        if k is not None:
            assert len(files_written(before, snapshot(ws))) >= k - 1  # the kill really was mid-apply
        recover(state, ws)
        assert snapshot(ws) == before, f"run {run}: aim {aims[run]}"
        assert not leftovers(ws)
        assert journals_left(state) == []

    run_all(len(aims), one_run)


def test_kill_around_keep_leaves_all_original_or_all_planned(tmp_path: Path) -> None:
    rng = random.Random(7)
    seed = 500

    def one_run(run: int) -> tuple[dict, dict]:
        root, ws, state, plan_file = fresh(tmp_path, run, seed)
        before = snapshot(ws)
        changes = prepare(load_plan(plan_file), Boundary(ws, state, []), Caps(100, 10**5, 10**6))
        child = Child(root, ws, state, plan_file, "keep")
        child.go()
        if run == 0:
            child.finish()
        else:
            child.kill_after(aims[run][1], anchor=aims[run][0])
        recover(state, ws)
        assert journals_left(state) == []
        if run == 0:
            assert "KEPT" in child.lines
            assert all(change.path.read_bytes() == change.new for change in changes)
        return before, snapshot(ws)

    # Run 0 is never killed: its tree is the planned one. The others are killed around the last
    # write and keep() itself, and must end all original or all planned, never a mix.
    n = count_changes(*fresh(tmp_path, 99, seed)[1:])
    aims = [("", 0.0)] + [
        (f"W {n}", rng.uniform(0, 4 * PAUSE_S)) if run % 2 else ("APPLIED", rng.uniform(0, 0.01))
        for run in range(1, 8)
    ]
    _, planned = one_run(0)
    for run, (before, after) in enumerate(run_all(len(aims), lambda r: one_run(r) if r else ({}, planned))):
        assert before != planned
        assert after in (before, planned), f"run {run}: a mix of original and planned files"


def test_kill_during_rollback_is_finished_by_recover(tmp_path: Path) -> None:
    rng = random.Random(42)
    picks = [(rng.random(), rng.uniform(0, 3 * PAUSE_S)) for _ in range(8)]

    def one_run(run: int) -> None:
        root, ws, state, plan_file = fresh(tmp_path, run, seed=900 + run)
        before = snapshot(ws)
        n = count_changes(ws, state, plan_file)
        j = n + 1 + int(picks[run][0] * n)  # on_write counts the apply's writes, then the rollback's
        if run % 2 == 0:
            child = Child(root, ws, state, plan_file, "rollback", kill_at=j)
            child.go()
            child.finish()
            assert child.proc.returncode == -signal.SIGKILL
        else:
            child = Child(root, ws, state, plan_file, "rollback")
            child.go()
            child.kill_after(picks[run][1], anchor=f"W {j}")
        assert "APPLIED" in child.lines
        # the rollback really was cut short, unless a timed kill on a loaded machine came after its last
        # write (then the run still checks that recovery leaves a finished rollback alone)
        if j < 2 * n and f"W {2 * n}" not in child.lines:
            assert snapshot(ws) != before
        recover(state, ws)
        assert snapshot(ws) == before, f"run {run}"
        assert not leftovers(ws)
        assert journals_left(state) == []

    run_all(len(picks), one_run)
