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
