"""Journal: originals saved before writes, atomic writes with modes kept, rollback, keep, recover."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest

from autod.act import Boundary, Caps, FileChange, Journal, prepare, recover
from autod.errors import PlanRejected
from autod.plan import Edit, Plan

CAPS = Caps(max_edits=20, max_lines=500, max_file_bytes=100_000)


def plan(*edits: tuple[str, str, str]) -> Plan:
    return Plan(summary="test", edits=[Edit(path=p, search=s, replace=r) for p, s, r in edits])


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("A = 1\n")
    (ws / "src" / "b.py").write_text("B = 1\n")
    run = ws / "run.sh"
    run.write_text("#!/bin/sh\necho old\n")
    run.chmod(0o755)
    (ws / "win.txt").write_bytes(b"x\r\ny\r\n")
    return ws


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def changes_for(ws: Path, state: Path, *edits: tuple[str, str, str]) -> list[FileChange]:
    return prepare(plan(*edits), Boundary(ws, state, []), CAPS)


EDITS = (
    ("src/a.py", "A = 1", "A = 2"),
    ("run.sh", "echo old", "echo new"),
    ("docs/new/guide.md", "", "# Guide\n"),
    ("win.txt", "y\n", "z\n"),
)


def test_apply_writes_planned_bytes_and_keep_makes_them_final(ws: Path, state: Path) -> None:
    changes = changes_for(ws, state, *EDITS)
    journal = Journal.begin(state, "c1")
    assert journal.dir == state / "journal" / "c1"
    assert stat.S_IMODE(journal.dir.stat().st_mode) == 0o700
    journal.apply(changes)
    for c in changes:
        assert c.path.read_bytes() == c.new
    assert journal.changes == changes
    journal.keep()
    assert not journal.dir.exists()
    assert recover(state, ws) == []
    for c in changes:
        assert c.path.read_bytes() == c.new


def test_mode_is_kept_and_new_files_get_644_less_umask(ws: Path, state: Path) -> None:
    old_umask = os.umask(0o027)
    try:
        changes = changes_for(ws, state, *EDITS)
        Journal.begin(state, "c1").apply(changes)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((ws / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((ws / "docs/new/guide.md").stat().st_mode) == 0o644 & ~0o027


def test_crlf_survives_apply(ws: Path, state: Path) -> None:
    Journal.begin(state, "c1").apply(changes_for(ws, state, ("win.txt", "y\n", "z\n")))
    assert (ws / "win.txt").read_bytes() == b"x\r\nz\r\n"


def test_originals_and_manifest_are_saved_before_any_write(ws: Path, state: Path) -> None:
    journal = Journal.begin(state, "c1")
    seen: list[tuple[str, dict]] = []

    def on_write(path: Path, data: bytes | None) -> None:
        manifest = json.loads((journal.dir / "manifest.json").read_text())
        seen.append((path.name, manifest))
        for e in manifest["entries"]:  # every original is on disk before the first write
            saved = (journal.dir / e["orig"]).read_bytes()
            assert hashlib.sha256(saved).hexdigest() == e["orig_sha256"]

    changes = changes_for(ws, state, ("src/a.py", "A = 1", "A = 2"), ("src/b.py", "B = 1", "B = 2"))
    journal.apply(changes, on_write=on_write)
    assert [name for name, _ in seen] == ["a.py", "b.py"]
    entries = seen[0][1]["entries"]
    assert [e["rel"] for e in entries] == ["src/a.py", "src/b.py"]
    assert (journal.dir / entries[0]["orig"]).read_bytes() == b"A = 1\n"
    assert (journal.dir / entries[1]["orig"]).read_bytes() == b"B = 1\n"


def test_on_write_is_called_before_the_rename_for_every_write(ws: Path, state: Path) -> None:
    calls: list[tuple[Path, bytes | None, bytes | None]] = []

    def on_write(path: Path, data: bytes | None) -> None:
        calls.append((path, data, path.read_bytes() if path.exists() else None))

    changes = changes_for(ws, state, *EDITS)
    journal = Journal.begin(state, "c1")
    journal.apply(changes, on_write=on_write)
    assert [(p, d) for p, d, _ in calls] == [(c.path, c.new) for c in changes]
    assert [before for _, _, before in calls] == [c.old for c in changes]  # not yet renamed

    calls.clear()
    journal.rollback(on_write=on_write)
    assert sorted((str(p), d) for p, d, _ in calls) == sorted((str(c.path), c.old) for c in changes)


def test_rollback_restores_bytes_and_modes_and_deletes_created_files(ws: Path, state: Path) -> None:
    before = files(ws)
    journal = Journal.begin(state, "c1")
    changes = changes_for(ws, state, *EDITS)
    journal.apply(changes)
    assert files(ws) != before
    restored = journal.rollback()
    assert sorted(restored) == sorted(c.rel for c in changes)
    assert files(ws) == before
    assert not (ws / "docs").exists()  # the dirs made for the created file are gone too
    assert stat.S_IMODE((ws / "run.sh").stat().st_mode) == 0o755
    assert not journal.dir.exists()


def test_rollback_is_idempotent(ws: Path, state: Path) -> None:
    before = files(ws)
    journal = Journal.begin(state, "c1")
    journal.apply(changes_for(ws, state, *EDITS))
    journal.rollback()
    assert journal.rollback() == []
    assert files(ws) == before


def test_rollback_after_a_partial_rollback_finishes_it(ws: Path, state: Path) -> None:
    """Simulate a crash mid-rollback: one file restored by hand, journal still on disk."""
    before = files(ws)
    journal = Journal.begin(state, "c1")
    journal.apply(changes_for(ws, state, *EDITS))
    (ws / "src/a.py").write_bytes(before["src/a.py"])
    (ws / "docs/new/guide.md").unlink()
    assert recover(state, ws) == ["c1"]
    assert files(ws) == before
    assert not (ws / "docs").exists()


def test_rollback_leaves_a_file_someone_else_changed_since(ws: Path, state: Path) -> None:
    journal = Journal.begin(state, "c1")
    journal.apply(changes_for(ws, state, ("src/a.py", "A = 1", "A = 2"), ("src/b.py", "B = 1", "B = 2")))
    (ws / "src/b.py").write_text("B = 'human'\n")
    assert journal.rollback() == ["src/a.py"]
    assert (ws / "src/a.py").read_text() == "A = 1\n"
    assert (ws / "src/b.py").read_text() == "B = 'human'\n"


def test_file_changed_between_prepare_and_apply_stops_and_rolls_back(ws: Path, state: Path) -> None:
    changes = changes_for(ws, state, ("src/a.py", "A = 1", "A = 2"), ("src/b.py", "B = 1", "B = 2"))
    (ws / "src/b.py").write_text("B = 'edited meanwhile'\n")
    journal = Journal.begin(state, "c1")
    with pytest.raises(PlanRejected, match=r"src/b\.py: changed while the plan was applied"):
        journal.apply(changes)
    assert (ws / "src/a.py").read_text() == "A = 1\n"  # the written one is rolled back
    assert (ws / "src/b.py").read_text() == "B = 'edited meanwhile'\n"  # the human's edit survives
    assert not journal.dir.exists()


def test_file_created_by_someone_between_prepare_and_apply_is_not_overwritten(ws: Path, state: Path) -> None:
    changes = changes_for(ws, state, ("src/a.py", "A = 1", "A = 2"), ("new.txt", "", "autod\n"))
    (ws / "new.txt").write_text("human\n")
    with pytest.raises(PlanRejected, match=r"new\.txt: changed while"):
        Journal.begin(state, "c1").apply(changes)
    assert (ws / "new.txt").read_text() == "human\n"
    assert (ws / "src/a.py").read_text() == "A = 1\n"


def test_symlink_swapped_in_after_prepare_is_refused(ws: Path, state: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.py").write_text("B = 1\n")
    changes = changes_for(ws, state, ("src/a.py", "A = 1", "A = 2"), ("src/b.py", "B = 1", "B = 2"))
    (ws / "src/b.py").unlink()
    (ws / "src/b.py").symlink_to(outside / "b.py")
    with pytest.raises(PlanRejected, match="symlink"):
        Journal.begin(state, "c1").apply(changes)
    assert (outside / "b.py").read_text() == "B = 1\n"
    assert (ws / "src/a.py").read_text() == "A = 1\n"


def test_rollback_never_writes_through_a_parent_turned_symlink(ws: Path, state: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_text("A = 2\n")
    journal = Journal.begin(state, "c1")
    journal.apply(changes_for(ws, state, ("src/a.py", "A = 1", "A = 2")))
    # A check run (LLM-written test code) replaces src/ with a symlink to outside the workspace.
    (ws / "src").rename(tmp_path / "src-moved")
    (ws / "src").symlink_to(outside)
    assert journal.rollback() == []
    assert (outside / "a.py").read_text() == "A = 2\n"


def test_recover_rolls_back_an_unkept_journal(ws: Path, state: Path) -> None:
    before = files(ws)
    Journal.begin(state, "c1").apply(changes_for(ws, state, *EDITS))  # then "crash": no keep, no rollback
    seen: list[Path] = []
    assert recover(state, ws, on_write=lambda p, d: seen.append(p)) == ["c1"]
    assert files(ws) == before
    assert len(seen) == len(EDITS)
    assert list((state / "journal").iterdir()) == []


def test_recover_keeps_a_journal_marked_kept(ws: Path, state: Path) -> None:
    journal = Journal.begin(state, "c1")
    changes = changes_for(ws, state, *EDITS)
    journal.apply(changes)
    (journal.dir / "kept").write_text("kept\n")  # crash after the marker, before the dir was removed
    assert recover(state, ws) == ["c1"]
    for c in changes:
        assert c.path.read_bytes() == c.new
    assert not journal.dir.exists()


def test_recover_removes_a_journal_without_manifest(ws: Path, state: Path) -> None:
    before = files(ws)
    journal = Journal.begin(state, "c1")
    (journal.dir / "0.orig").write_bytes(b"partial copy")
    assert recover(state, ws) == ["c1"]
    assert files(ws) == before
    assert not journal.dir.exists()


def test_recover_removes_leftover_temp_files_of_journaled_paths(ws: Path, state: Path) -> None:
    before = files(ws)
    Journal.begin(state, "c1").apply(changes_for(ws, state, ("src/a.py", "A = 1", "A = 2")))
    (ws / "src" / ".a.py.autod-tmp-deadbeef0000").write_text("half")
    recover(state, ws)
    assert files(ws) == before


def test_recover_refuses_a_journal_of_another_workspace(ws: Path, state: Path, tmp_path: Path) -> None:
    Journal.begin(state, "c1").apply(changes_for(ws, state, ("src/a.py", "A = 1", "A = 2")))
    other = tmp_path / "other"
    other.mkdir()
    assert recover(state, other) == []
    assert (ws / "src/a.py").read_text() == "A = 2\n"
    assert (state / "journal" / "c1" / "manifest.json").exists()  # kept for the operator


def test_recover_with_no_journal_dir_is_a_no_op(ws: Path, state: Path) -> None:
    assert recover(state, ws) == []


def test_keep_after_rollback_and_rollback_after_keep_are_errors(ws: Path, state: Path) -> None:
    j1 = Journal.begin(state, "c1")
    j1.apply(changes_for(ws, state, ("src/a.py", "A = 1", "A = 2")))
    j1.keep()
    with pytest.raises(RuntimeError):
        j1.rollback()
    j2 = Journal.begin(state, "c2")
    j2.apply(changes_for(ws, state, ("src/a.py", "A = 2", "A = 3")))
    j2.rollback()
    with pytest.raises(RuntimeError):
        j2.keep()
    assert (ws / "src/a.py").read_text() == "A = 2\n"


def test_begin_refuses_unsafe_or_reused_cycle_ids(state: Path) -> None:
    for bad in ("../x", "a/b", ".hidden", ""):
        with pytest.raises(ValueError):
            Journal.begin(state, bad)
    Journal.begin(state, "c1")
    with pytest.raises(FileExistsError):
        Journal.begin(state, "c1")


def test_empty_change_list_writes_nothing(ws: Path, state: Path) -> None:
    before = files(ws)
    journal = Journal.begin(state, "c1")
    journal.apply([])
    assert journal.rollback() == []
    assert files(ws) == before


# -- no lost save: a save in the window between autod's check and its rename ----------------------


@pytest.fixture(params=["renameat2", "check-then-rename"])
def swap(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of replacing a file: the race-free exchange, and the fallback where it is unsupported."""
    from autod.act import atomic

    if request.param == "check-then-rename":
        monkeypatch.setattr(atomic, "_renameat2", lambda src, dst, flags: False)
    elif atomic._renameat2_fn() is None:
        pytest.skip("no renameat2 in this libc")
    return str(request.param)


@pytest.fixture
def renameat2() -> ModuleType:
    """autod.act.atomic, where the kernel and libc have renameat2: asserted on Linux 3.15+, not assumed."""
    from autod.act import atomic

    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux's")
    release = os.uname().release
    found = re.match(r"(\d+)\.(\d+)", release)
    assert found is not None and (int(found[1]), int(found[2])) >= (3, 15), f"Linux {release} predates 3.15"
    assert atomic._renameat2_fn() is not None, "this libc has no renameat2 (glibc 2.28+ has)"
    return atomic


def test_where_the_kernel_has_renameat2_the_exchange_is_used_not_the_fallback(
    ws: Path, renameat2: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback is correct too (the swap fixture runs both), so only this notices if autod stops
    using the race-free exchange on a kernel that has it, and quietly reopens the check-then-rename window."""
    atomic = renameat2
    used: list[tuple[int, bool]] = []
    real = atomic._renameat2

    def spy(src: Path, dst: Path, flags: int) -> bool:
        ok = real(src, dst, flags)
        used.append((flags, ok))
        return ok

    def fallback(*args: object) -> None:
        raise AssertionError("fell back to a plain rename while renameat2 works")

    monkeypatch.setattr(atomic, "_renameat2", spy)
    monkeypatch.setattr(atomic.os, "replace", fallback)
    monkeypatch.setattr(atomic.os, "link", fallback)
    atomic.swap_in(ws / "src/a.py", b"A = 2\n", 0o644, expected=atomic.sha(b"A = 1\n"), on_write=None)
    atomic.swap_in(ws / "src/c.py", b"C = 1\n", 0o644, expected=None, on_write=None)
    assert used == [(atomic._RENAME_EXCHANGE, True), (atomic._RENAME_NOREPLACE, True)]
    assert (ws / "src/a.py").read_bytes() == b"A = 2\n"
    assert (ws / "src/c.py").read_bytes() == b"C = 1\n"
    assert not [p for p in (ws / "src").iterdir() if ".autod-tmp-" in p.name]


def test_renameat2_says_unavailable_only_when_it_is_and_raises_real_errors(
    ws: Path, renameat2: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    atomic = renameat2
    a, b = ws / "src/a.py", ws / "src/b.py"
    # a flag this kernel refuses (EINVAL, as a filesystem without the exchange answers): fall back
    assert atomic._renameat2(a, b, atomic._RENAME_EXCHANGE | atomic._RENAME_NOREPLACE) is False
    assert (a.read_text(), b.read_text()) == ("A = 1\n", "B = 1\n")
    # any other failure is an error, with the errno, its text and the target's path
    with pytest.raises(FileNotFoundError) as raised:
        atomic._renameat2(ws / "src/gone.py", b, atomic._RENAME_EXCHANGE)
    assert (raised.value.errno, raised.value.strerror) == (errno.ENOENT, os.strerror(errno.ENOENT))
    assert raised.value.filename == str(b)
    monkeypatch.setattr(atomic, "_renameat2_fn", lambda: None)  # a libc without it
    assert atomic._renameat2(a, b, atomic._RENAME_EXCHANGE) is False
    assert (a.read_text(), b.read_text()) == ("A = 1\n", "B = 1\n")


def test_placing_a_new_file_never_replaces_one_that_appeared_meanwhile(ws: Path, swap: str) -> None:
    from autod.act import atomic

    mine = ws / "src/.c.py.tmp"
    mine.write_text("C = 1\n")
    assert atomic.place_new(mine, ws / "src/a.py") is False  # EEXIST from renameat2, or from link()
    assert ((ws / "src/a.py").read_text(), mine.read_text()) == ("A = 1\n", "C = 1\n")
    assert atomic.place_new(mine, ws / "src/c.py") is True
    assert (ws / "src/c.py").read_text() == "C = 1\n" and not mine.exists()


def saves_once(target: Path, text: str):
    """An on_write hook that, the first time autod is about to rename over `target`, saves it."""
    done: list[bool] = []

    def on_write(path: Path, data: bytes | None) -> None:
        if path == target and not done:
            done.append(True)
            target.write_text(text)  # the operator's editor, in the window between check and rename

    return on_write


def test_a_save_between_the_check_and_the_rename_is_kept_and_the_plan_refused(
    ws: Path, state: Path, swap: str
) -> None:
    changes = changes_for(ws, state, ("src/a.py", "A = 1", "A = 2"), ("src/b.py", "B = 1", "B = 2"))
    journal = Journal.begin(state, "c1")
    with pytest.raises(PlanRejected, match=r"src/b\.py: changed while the plan .*their version is kept"):
        journal.apply(changes, on_write=saves_once(ws / "src/b.py", "B = 'saved by the operator'\n"))
    assert (ws / "src/b.py").read_text() == "B = 'saved by the operator'\n"
    assert (ws / "src/a.py").read_text() == "A = 1\n"  # the plan's other edit is rolled back
    assert not [p for p in (ws / "src").iterdir() if ".autod-tmp-" in p.name]


def test_rollback_never_overwrites_a_save_made_while_it_restores(ws: Path, state: Path, swap: str) -> None:
    import structlog

    journal = Journal.begin(state, "c1")
    journal.apply(changes_for(ws, state, *EDITS))
    hook = saves_once(ws / "src/a.py", "A = 'saved during the rollback'\n")
    created = ws / "docs/new/guide.md"

    def on_write(path: Path, data: bytes | None) -> None:
        hook(path, data)
        if path == created:
            created.write_text("# Guide, edited by the operator\n")

    with structlog.testing.capture_logs() as logged:
        journal.rollback(on_write=on_write)
    assert (ws / "src/a.py").read_text() == "A = 'saved during the rollback'\n"
    assert created.read_text() == "# Guide, edited by the operator\n"
    assert journal.outcome is not None
    assert sorted(journal.outcome.left) == ["docs/new/guide.md", "src/a.py"]
    assert sorted(journal.outcome.restored) == ["run.sh", "win.txt"]
    assert (ws / "run.sh").read_text() == "#!/bin/sh\necho old\n"
    skipped = sorted(e["path"] for e in logged if e["event"] == "act.rollback_skipped")
    assert skipped == ["docs/new/guide.md", "src/a.py"]
