"""`autod undo`: what a kept cycle wrote is taken back only while the files still hold it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autod.act.edits import FileChange
from autod.act.journal import Journal, recover
from autod.undo.ledger import KeptLedger
from autod.undo.revert import UndoRefused, commit_revert, revert

EVENT = {"id": "e1", "kind": "check_failed", "summary": "check tests failed", "fingerprint": "fp1"}


def change(ws: Path, rel: str, new: bytes) -> FileChange:
    path = ws / rel
    old = path.read_bytes() if path.exists() else None
    return FileChange(rel, path, old, new, 0o644 if old is not None else None, 1, 1)


def kept_cycle(ws: Path, state: Path, changes: list[FileChange], commit: str | None = None) -> KeptLedger:
    """Write the changes as a kept cycle does, and record them as its after-keep hook does."""
    journal = Journal.begin(state, "cyc000000001")
    journal.apply(changes)
    journal.keep()
    ledger = KeptLedger(state, keep_cycles=10, keep_days=30)
    ledger.record("cyc000000001", "auto-debug", EVENT, "add must add", "", commit, changes)
    return ledger


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text("return a - b\n")
    (root / "src" / "util.py").write_text("X = 1\n")
    return root


def test_undo_restores_each_original_and_removes_a_file_autod_created(ws, tmp_path):
    state = tmp_path / "state"
    ledger = kept_cycle(
        ws, state, [change(ws, "src/calc.py", b"return a + b\n"), change(ws, "src/new.py", b"Y = 2\n")]
    )
    kept = ledger.load("cyc0000")  # a unique prefix names it
    assert kept is not None and [f.rel for f in kept.files] == ["src/calc.py", "src/new.py"]
    done = revert(state, ws, kept, "undo00000001")
    assert (ws / "src" / "calc.py").read_text() == "return a - b\n"
    assert not (ws / "src" / "new.py").exists()
    assert done.restored == ["src/calc.py"] and done.removed == ["src/new.py"]
    assert not (state / "journal" / "undo00000001").exists()  # the undo's journal is kept and gone


def test_undo_after_a_later_human_edit_is_refused_naming_each_file_and_writes_nothing(ws, tmp_path):
    state = tmp_path / "state"
    ledger = kept_cycle(
        ws,
        state,
        [
            change(ws, "src/calc.py", b"return a + b\n"),
            change(ws, "src/util.py", b"X = 2\n"),
            change(ws, "src/new.py", b"Y = 2\n"),
        ],
    )
    (ws / "src" / "calc.py").write_text("return a + b  # reviewed\n")  # the operator's later edit
    (ws / "src" / "new.py").unlink()
    with pytest.raises(UndoRefused) as err:
        revert(state, ws, ledger.load("cyc000000001"), "undo00000001")  # type: ignore[arg-type]
    assert "src/calc.py (changed since autod wrote it)" in err.value.reason
    assert "src/new.py (deleted since)" in err.value.reason
    assert err.value.files == ["src/calc.py", "src/new.py"]
    assert (ws / "src" / "util.py").read_text() == "X = 2\n"  # all or nothing: not undone either
    assert (ws / "src" / "calc.py").read_text() == "return a + b  # reviewed\n"


def test_a_crash_mid_undo_leaves_each_file_as_autod_wrote_it_after_restart(ws, tmp_path, monkeypatch):
    state = tmp_path / "state"
    ledger = kept_cycle(ws, state, [change(ws, "src/calc.py", b"return a + b\n")])

    def crash(self: Journal) -> None:
        raise SystemExit("killed")  # the process dies after writing, before the journal is kept

    monkeypatch.setattr(Journal, "keep", crash)
    with pytest.raises(SystemExit):
        revert(state, ws, ledger.load("cyc000000001"), "undo00000001")  # type: ignore[arg-type]
    assert recover(state, ws) == ["undo00000001"]  # start-up rolls the half-done undo back
    assert (ws / "src" / "calc.py").read_text() == "return a + b\n"


def test_with_git_commit_the_undo_is_a_revert_commit(ws, tmp_path):
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ws), "-c", "user.name=h", "-c", "user.email=h@x", *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "init")
    state = tmp_path / "state"
    c = change(ws, "src/calc.py", b"return a + b\n")
    journal = Journal.begin(state, "cyc000000001")
    journal.apply([c])
    journal.keep()
    git("commit", "-qam", "add must add")  # as git.commit does for a kept cycle
    sha = git("rev-parse", "HEAD")
    ledger = KeptLedger(state, keep_cycles=10, keep_days=30)
    ledger.record("cyc000000001", "auto-debug", EVENT, "add must add", "", sha, [c])
    kept = ledger.load("cyc000000001")
    assert kept is not None
    done = revert(state, ws, kept, "undo00000001")
    result = commit_revert(ws, kept, done, "undo00000001", "wrong operator")
    assert result["committed"] == git("rev-parse", "HEAD")
    message = git("log", "-1", "--format=%B")
    assert message.startswith('Revert "add must add"') and f"This reverts commit {sha}" in message
    assert "Autod-Undo: cyc000000001" in message and "Reason: wrong operator" in message
    assert git("status", "--porcelain") == ""


def test_the_ledger_keeps_only_the_newest_cycles(ws, tmp_path):
    ledger = KeptLedger(tmp_path / "state", keep_cycles=2, keep_days=30)
    for i in range(3):
        ledger.record(
            f"cyc{i:09d}", "auto-debug", EVENT, "s", "", None, [change(ws, "src/util.py", b"X = 9\n")]
        )
    assert sorted(ledger.ids()) == ["cyc000000001", "cyc000000002"]
