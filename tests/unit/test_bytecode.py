"""Bytecode a check run wrote is removed when it ends (autod.checks.bytecode): generated trees, files
added, rewritten in place with their size and mtime put back, replaced, or left alone."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from autod.checks import bytecode


def tree(root: Path, rng: random.Random) -> list[Path]:
    files = []
    for i in range(rng.randint(3, 12)):
        parts = [rng.choice(["pkg", "tests", "sub", "__pycache__"]) for _ in range(rng.randint(0, 3))]
        d = root.joinpath(*parts)
        d.mkdir(parents=True, exist_ok=True)
        f = d / f"m{i}.{rng.choice(['pyc', 'pyc', 'py', 'txt', 'pyo'])}"
        f.write_bytes(os.urandom(rng.randint(0, 64)))
        files.append(f)
    return files


def test_only_the_bytecode_a_run_added_or_changed_is_removed(tmp_path):
    rng = random.Random(4)
    for n in range(60):
        root = tmp_path / f"t{n}"
        root.mkdir()
        files = tree(root, rng)
        before = bytecode.present(root)
        assert before is not None
        assert set(before) == {str(f) for f in files if f.suffix in (".pyc", ".pyo")}
        touched: set[Path] = set()
        for f in rng.sample(files, rng.randint(0, len(files))):
            how = rng.choice(["in place, size and mtime put back", "replaced", "left"])
            if how == "left":
                continue
            st = f.stat()
            if how == "replaced":
                new = f.with_name(f.name + ".new")
                new.write_bytes(f.read_bytes())
                os.replace(new, f)
            else:
                time.sleep(0.001)
                with open(f, "r+b") as fh:
                    fh.write(bytes(len(fh.read())))
                os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
            touched.add(f)
        added = root / "tests" / "__pycache__" / "planted.cpython-311.pyc"
        added.parent.mkdir(parents=True, exist_ok=True)
        added.write_bytes(b"x")
        removed = bytecode.remove_written(root, before, "tests")
        want = {f for f in touched if f.suffix in (".pyc", ".pyo")} | {added}
        assert {root / r for r in removed} == want
        for f in files:
            assert f.exists() == (f not in want)


def test_links_venvs_and_git_are_never_followed_or_touched(tmp_path):
    outside = tmp_path / "outside.pyc"
    outside.write_bytes(b"keep")
    root = tmp_path / "ws"
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / ".git" / "objects").mkdir(parents=True)
    (root / "pkg").mkdir()
    before = bytecode.present(root)
    (root / ".venv" / "lib" / "a.pyc").write_bytes(b"1")
    (root / ".git" / "objects" / "b.pyc").write_bytes(b"2")
    (root / "pkg" / "link.pyc").symlink_to(outside)
    (root / "pkg" / "dir.pyc").symlink_to(tmp_path, target_is_directory=True)
    assert bytecode.remove_written(root, before, "tests") == []
    assert outside.read_bytes() == b"keep" and (root / ".venv" / "lib" / "a.pyc").exists()
    assert (root / ".git" / "objects" / "b.pyc").exists() and (root / "pkg" / "link.pyc").is_symlink()


def test_a_tree_too_large_to_walk_is_left_alone(tmp_path, monkeypatch):
    (tmp_path / "a.pyc").write_bytes(b"")
    monkeypatch.setattr(bytecode, "MAX_ENTRIES", 0)
    assert bytecode.present(tmp_path) is None
    assert bytecode.remove_written(tmp_path, None, "tests") == []
    assert (tmp_path / "a.pyc").exists()


def test_the_walk_s_cap_counts_every_entry_and_no_more(tmp_path):
    for i in range(3):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "a.pyc").write_bytes(b"")
    entries = 3 + 3  # three directories, a file in each
    for cap, walked in ((entries, True), (entries - 1, False)):
        bytecode.MAX_ENTRIES, old = cap, bytecode.MAX_ENTRIES
        try:
            assert (bytecode.present(tmp_path) is not None) is walked, cap
        finally:
            bytecode.MAX_ENTRIES = old


def test_a_directory_or_file_that_cannot_be_read_is_passed_over_not_the_end_of_the_walk(tmp_path,
                                                                                         monkeypatch):
    """Whatever fails (a directory that cannot be listed, a file that cannot be stat'ed or removed,
    a virtual environment met first), the rest of the tree is still walked, and what was written there
    still removed; and the log says what was removed, only when something was."""
    import structlog

    root = tmp_path / "ws"
    names = ["z-venv", *(f"d{i}" for i in range(5))]  # listed in name order: the venv is walked first
    for n in names:
        (root / n).mkdir(parents=True)
    (root / names[0] / "pyvenv.cfg").write_text("")
    before = bytecode.present(root)
    for n in names:
        (root / n / "new.pyc").write_bytes(b"x")
    real_scandir, real_unlink = os.scandir, os.unlink
    bad = {str(root / "d4"), str(root / "d0" / "new.pyc")}  # walked second; removed first

    class Listing:
        def __init__(self, path):
            if str(path) in bad:
                raise PermissionError(path)
            self._it = real_scandir(path)

        def __enter__(self):
            return sorted(self._it, key=lambda e: e.name)

        def __exit__(self, *exc):
            self._it.close()

    def scandir(path):
        return Listing(path)

    def unlink(path):
        if str(path) in bad:
            raise PermissionError(path)
        return real_unlink(path)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "unlink", unlink)
    with structlog.testing.capture_logs() as logs:
        removed = bytecode.remove_written(root, before, "tests")
    assert sorted(removed) == ["d1/new.pyc", "d2/new.pyc", "d3/new.pyc"]
    assert all((root / n / "new.pyc").exists() for n in ("z-venv", "d0", "d4"))
    assert [e["count"] for e in logs if e["event"] == "check.bytecode_removed"] == [3]
    with structlog.testing.capture_logs() as logs:
        assert bytecode.remove_written(root, bytecode.present(root), "tests") == []
    assert not [e for e in logs if e["event"] == "check.bytecode_removed"]


def test_a_file_that_cannot_be_stat_ed_is_passed_over(tmp_path, monkeypatch):
    for n in ("a", "b", "c"):
        (tmp_path / f"{n}.pyc").write_bytes(b"")
    real = os.DirEntry.stat if hasattr(os, "DirEntry") else None
    assert real is not None
    seen = bytecode.present(tmp_path)
    assert seen is not None and len(seen) == 3

    class Entry:
        def __init__(self, e):
            self._e, self.name, self.path = e, e.name, e.path

        def stat(self, follow_symlinks=True):
            if self.name == "a.pyc":
                raise PermissionError(self.path)
            return self._e.stat(follow_symlinks=follow_symlinks)

    real_scandir = os.scandir

    class Listing:
        def __init__(self, path):
            self._it = real_scandir(path)

        def __enter__(self):
            return sorted((Entry(e) for e in self._it), key=lambda e: e.name)

        def __exit__(self, *exc):
            self._it.close()

    monkeypatch.setattr(os, "scandir", Listing)
    got = bytecode.present(tmp_path)
    assert got is not None and sorted(os.path.basename(p) for p in got) == ["b.pyc", "c.pyc"]


def test_skipped_directories_are_told_by_identity_and_no_path_is_resolved(tmp_path, monkeypatch):
    """The walks around every check run (bytecode, changed files) skip the directories they are told to,
    however those are spelled (through a link too), and never resolve a path on the way: realpath costs
    a look at every component, and on a chain of directories a check made a thousand deep the walks took
    minutes. A chain deeper than Python's recursion limit is walked to its end."""
    from autod.checks import changes

    root = tmp_path / "ws"
    (root / "state" / "__pycache__").mkdir(parents=True)
    (root / "state" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"x")
    (root / "src" / "__pycache__").mkdir(parents=True)
    (root / "src" / "__pycache__" / "y.cpython-311.pyc").write_bytes(b"y")
    deep = root / "src"
    for _ in range(300):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "z.cpython-311.pyc").write_bytes(b"z")
    alias = tmp_path / "alias"
    alias.symlink_to(root / "state", target_is_directory=True)

    def refuse(*a, **k):
        raise AssertionError("a path was resolved during the walk")

    monkeypatch.setattr(os.path, "realpath", refuse)
    for skip in ([root / "state"], [alias], [tmp_path / "missing", root / "state"]):
        found = bytecode.present(root, skip)
        assert found is not None
        names = {Path(p).name for p in found}
        assert names == {"y.cpython-311.pyc", "z.cpython-311.pyc"}, (skip, names)
        snap = changes.snapshot(root, skip)
        assert snap is not None and not any(k.startswith("state/") for k in snap), skip
