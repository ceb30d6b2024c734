"""What a check run changed: a file rewritten in place with its size and times put back is changed,
and a tree flooded past what autod looks at is a change of its sources, never "nothing changed"."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from autod.checks import changes


def tree(root: Path, files: int = 3) -> Path:
    (root / "src").mkdir(parents=True)
    for i in range(files):
        (root / "src" / f"m{i}.py").write_text(f"def f{i}(a, b):\n    return a + b\n")
    return root


def test_a_file_rewritten_in_place_with_its_size_and_times_put_back_is_changed(tmp_path):
    root = tree(tmp_path)
    target = root / "src" / "m1.py"
    st = target.stat()
    before = changes.snapshot(root)
    with open(target, "r+b") as f:  # the same size, the same inode: `+` for `-`
        data = f.read()
        f.seek(0)
        f.write(data.replace(b"a + b", b"a - b"))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = changes.snapshot(root)
    assert target.stat().st_size == st.st_size and target.stat().st_mtime_ns == st.st_mtime_ns
    assert changes.changed_files(before, after) == ["src/m1.py"]


def test_a_tree_that_grew_past_what_autod_looks_at_is_a_change_of_its_sources(tmp_path, monkeypatch):
    monkeypatch.setattr(changes, "MAX_SNAPSHOT_ENTRIES", 10)
    root = tree(tmp_path)
    before = changes.snapshot(root)
    assert before is not None
    for i in range(20):
        (root / "src" / f"junk{i}.txt").write_text("x")
    after = changes.snapshot(root)
    assert after is None
    assert changes.changed_files(before, after) == [changes.UNTOLD]
    assert changes.changed_files(after, before) == [changes.UNTOLD]  # or shrank below it
    assert changes.changed_files(None, None) == []  # too large both times: not looked at
    sources, outputs = asyncio.run(changes.sources_and_outputs("tests", root, [changes.UNTOLD]))
    assert sources == [changes.UNTOLD] and outputs == []


@pytest.mark.parametrize("how", ["mode", "content", "replaced"])
def test_every_other_change_of_a_file_is_seen(tmp_path, how):
    root = tree(tmp_path)
    target = root / "src" / "m0.py"
    before = changes.snapshot(root)
    if how == "mode":
        target.chmod(0o600)
    elif how == "content":
        target.write_text("def f0(a, b):\n    return a - b\n")
    else:
        (root / "src" / "new.py").write_text(target.read_text())
        os.replace(root / "src" / "new.py", target)
    assert changes.changed_files(before, changes.snapshot(root)) == ["src/m0.py"]
