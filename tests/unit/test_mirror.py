"""The workspace mirror candidates are verified on: in step with the tree, never writing it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autod.isolation.mirror import Mirror, TooLarge


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def contents(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not any(rel == s or rel.startswith(s + "/") for s in skip):
            out[rel] = p.read_text()
    return out


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tree(tmp_path / "ws", {"src/a.py": "A = 1\n", "src/b.py": "B = 2\n", "README.md": "hi\n"})


def test_first_sync_copies_every_source_file(ws: Path, tmp_path: Path) -> None:
    m = Mirror(ws, tmp_path / "mirror")
    stats = m.sync()
    assert contents(tmp_path / "mirror") == contents(ws)
    assert stats.copied == 3 and stats.files == 3


def test_a_second_sync_copies_only_what_changed(ws: Path, tmp_path: Path) -> None:
    m = Mirror(ws, tmp_path / "mirror")
    m.sync()
    (ws / "src" / "a.py").write_text("A = 10\n")
    (ws / "src" / "c.py").write_text("C = 3\n")
    (ws / "README.md").unlink()
    stats = m.sync()
    assert contents(tmp_path / "mirror") == contents(ws)
    assert stats.copied == 2 and stats.removed == 1


def test_a_candidate_written_to_the_mirror_never_reaches_the_tree_and_the_next_sync_undoes_it(
    ws: Path, tmp_path: Path
) -> None:
    m = Mirror(ws, tmp_path / "mirror")
    m.sync()
    before = contents(ws)
    m.write({"src/a.py": b"A = 'candidate'\n", "src/new.py": b"N = 1\n"})
    assert (tmp_path / "mirror" / "src" / "a.py").read_text() == "A = 'candidate'\n"
    assert contents(ws) == before
    m.sync()
    assert contents(tmp_path / "mirror") == before


def test_a_copy_rewritten_with_its_old_mtime_is_still_recopied(ws: Path, tmp_path: Path) -> None:
    # A check runs project code in the mirror: it may rewrite a copy and put its mtime back.
    m = Mirror(ws, tmp_path / "mirror")
    m.sync()
    copy = tmp_path / "mirror" / "src" / "b.py"
    st = copy.stat()
    copy.write_text("B = 9\n")
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
    m.sync()
    assert copy.read_text() == "B = 2\n"


def test_files_a_check_left_in_the_mirror_are_removed_but_its_caches_kept(ws: Path, tmp_path: Path) -> None:
    m = Mirror(ws, tmp_path / "mirror")
    m.sync()
    tree(tmp_path / "mirror", {"htmlcov/index.html": "x", "src/__pycache__/a.pyc": "x", "stray.py": "x"})
    m.sync()
    assert not (tmp_path / "mirror" / "htmlcov").exists()
    assert not (tmp_path / "mirror" / "stray.py").exists()
    assert (tmp_path / "mirror" / "src" / "__pycache__" / "a.pyc").exists()


def test_git_and_venvs_are_bound_back_not_copied(ws: Path, tmp_path: Path) -> None:
    tree(ws, {".git/HEAD": "ref", ".venv/pyvenv.cfg": "home", "env2/pyvenv.cfg": "x",
              "web/node_modules/x.js": "1"})
    m = Mirror(ws, tmp_path / "mirror")
    stats = m.sync()
    assert stats.bind_back == [".git", ".venv", "env2", "web/node_modules"]
    assert not (tmp_path / "mirror" / ".git").exists()
    assert not (tmp_path / "mirror" / ".venv").exists()


def test_the_state_dir_and_skipped_files_are_never_copied(ws: Path, tmp_path: Path) -> None:
    tree(ws, {".autod/state.db": "s", "key.txt": "secret"})
    m = Mirror(ws, ws / ".autod" / "mirror", skip=[ws / ".autod", ws / "key.txt"])
    m.sync()
    copied = contents(ws / ".autod" / "mirror")
    assert "key.txt" not in copied and not any(k.startswith(".autod") for k in copied)


def test_symlinks_are_copied_as_links_never_followed(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host file")
    (ws / "link").symlink_to(outside)
    m = Mirror(ws, tmp_path / "mirror")
    m.sync()
    assert os.readlink(tmp_path / "mirror" / "link") == str(outside)


def test_a_workspace_over_the_limits_is_not_mirrored(ws: Path, tmp_path: Path) -> None:
    with pytest.raises(TooLarge, match="max_files"):
        Mirror(ws, tmp_path / "m1", max_files=2).sync()
    with pytest.raises(TooLarge, match="max_mb"):
        Mirror(ws, tmp_path / "m2", max_bytes=5).sync()


def test_a_new_mirror_object_trusts_nothing_left_on_disk(ws: Path, tmp_path: Path) -> None:
    Mirror(ws, tmp_path / "mirror").sync()
    (tmp_path / "mirror" / "src" / "a.py").write_text("poisoned\n")
    Mirror(ws, tmp_path / "mirror").sync()  # a restarted daemon
    assert (tmp_path / "mirror" / "src" / "a.py").read_text() == "A = 1\n"


def test_write_refuses_a_path_outside_the_mirror(ws: Path, tmp_path: Path) -> None:
    m = Mirror(ws, tmp_path / "mirror")
    m.sync()
    with pytest.raises(ValueError):
        m.write({"../escape.py": b"x"})
    assert not (tmp_path / "escape.py").exists()


@pytest.mark.parametrize("length", [200, 241, 242, 250, 255])
def test_names_up_to_the_longest_a_file_system_allows_are_mirrored(ws: Path, tmp_path: Path, length: int
                                                                   ) -> None:
    """The copy is written under a temporary name of its own length: a file name of 242 bytes or more
    made it pass NAME_MAX, and every sync (so every cycle) ended with an OSError."""
    name = "x" * (length - 3) + ".py"
    (ws / "src" / name).write_text("print('long')\n")
    link = "l" * (length - 3) + ".py"
    (ws / "src" / link).symlink_to(name)
    m = Mirror(ws, tmp_path / "mirror")
    m.sync()
    assert (tmp_path / "mirror" / "src" / name).read_text() == "print('long')\n"
    assert os.readlink(tmp_path / "mirror" / "src" / link) == name
    (ws / "src" / name).write_text("print('changed')\n")
    m.sync()
    assert (tmp_path / "mirror" / "src" / name).read_text() == "print('changed')\n"
    assert not [p for p in (tmp_path / "mirror" / "src").iterdir() if p.name.startswith(".autod-mirror")]
