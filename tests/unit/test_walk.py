"""The walk without recursion (autod.walk) yields what `os.walk` yields, in the same order, with the
caller's pruning, over generated trees; walks a directory chain far deeper than Python's recursion
limit, where `os.walk` on this Python raises RecursionError; and removes it, where `shutil.rmtree`
raises it, never following a link out of the tree."""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

import pytest

from autod.walk import remove_tree, walk


def _tree(root: Path, rng: random.Random) -> None:
    dirs = [root]
    for i in range(rng.randrange(20, 80)):
        parent = rng.choice(dirs)
        kind = rng.random()
        if kind < 0.4:
            d = parent / f"d{i}"
            d.mkdir()
            dirs.append(d)
        elif kind < 0.9:
            (parent / f"f{i}.py").write_text("x = 1\n")
        else:
            target = rng.choice(dirs)
            (parent / f"l{i}").symlink_to(target, target_is_directory=True)
    for i, parent in enumerate(dirs[::3]):  # unreadable directories at every level, passed over
        unreadable = parent / f"locked{i}"
        unreadable.mkdir()
        (unreadable / "inside.py").write_text("")
        # unreadable: chmod does not stop root, so scandir refuses it (patched below)


def _refuse_locked(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.scandir (os.walk's too) refuses the `locked*` directories, as it would without permission."""
    real = os.scandir

    def scandir(path="."):
        if os.path.basename(os.fspath(path)).startswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_the_walk_is_os_walk_with_its_pruning_over_generated_trees(tmp_path: Path, monkeypatch) -> None:
    _refuse_locked(monkeypatch)
    for seed in range(12):
        root = tmp_path / f"t{seed}"
        root.mkdir()
        _tree(root, random.Random(seed))
        drop = random.Random(seed + 100)

        def pruned(it, drop=drop):  # prune alike: the same random choice per directory
            for here, dirs, files in it:
                dirs.sort()
                files.sort()
                keep = [d for d in dirs if drop.random() < 0.8]
                dirs[:] = keep
                yield here, list(dirs), list(files)

        drop.seed(seed + 100)
        want = list(pruned(os.walk(root)))
        drop.seed(seed + 100)
        got = list(pruned(walk(root)))
        assert got == want, seed


def test_a_chain_deeper_than_the_recursion_limit_is_walked(tmp_path: Path) -> None:
    depth = sys.getrecursionlimit() + 200
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("a", dir_fd=fd)
        nfd = os.open("a", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)
    (tmp_path / "z").mkdir()  # walked after the chain, whose far end no path can name (PATH_MAX)
    (tmp_path / "z" / "after.py").write_text("")
    try:
        seen = []
        for here, dirs, _files in walk(tmp_path):
            dirs.sort()  # "a" (the chain) first
            seen.append(here)
        assert len(seen) >= 100 and seen[-1] == str(tmp_path / "z")  # no RecursionError, nothing dropped
        with pytest.raises(RecursionError):
            shutil.rmtree(tmp_path / "a")
    finally:
        remove_tree(tmp_path / "a")
    assert not (tmp_path / "a").exists()
    remove_tree(tmp_path / "z")


def test_removing_a_tree_follows_no_link_and_removes_what_it_can(tmp_path: Path, monkeypatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    for seed in range(8):
        root = tmp_path / f"t{seed}"
        root.mkdir()
        _tree(root, random.Random(seed))
        (root / "out").symlink_to(outside, target_is_directory=True)
        (root / "f").symlink_to(outside / "keep.txt")
        with monkeypatch.context() as m:
            _refuse_locked(m)
            remove_tree(root)  # what it cannot list is left, the rest removed
        left = [p for p in root.rglob("*") if not p.is_dir()]
        assert root.exists() and all("locked" in p.as_posix() for p in left), seed
        assert any(p.name.startswith("locked") for p in root.rglob("*")), seed
        remove_tree(root)
        assert not root.exists(), seed
        assert (outside / "keep.txt").read_text() == "mine"
    link = tmp_path / "link"
    link.symlink_to(outside, target_is_directory=True)
    remove_tree(link)  # a link given is removed, never what it names
    assert not link.exists() and (outside / "keep.txt").exists()
    remove_tree(tmp_path / "missing")  # nothing there: nothing to do


def test_a_name_that_is_not_utf8_is_left_out_and_every_name_listed_after_it_is_kept(tmp_path: Path) -> None:
    """Names interleaved in the directory's own order: whatever comes after a name left out is walked."""
    root = os.fsencode(tmp_path)
    good = {f"ok{i}.py" for i in range(30)}
    for name in good:
        (tmp_path / name).write_text("x\n")
    (tmp_path / "sub").mkdir()
    for i in range(8):
        with open(os.path.join(root, b"bad%d\xff.py" % i), "w") as f:
            f.write("x\n")
        os.mkdir(os.path.join(root, b"dir%d\xfe" % i))
    (_top, dirs, files), *rest = list(walk(tmp_path))
    assert set(files) == good and dirs == ["sub"]
    assert [r[0] for r in rest] == [str(tmp_path / "sub")]
