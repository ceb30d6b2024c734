"""git.commit: a kept cycle is committed with its summary and trailer, only the files autod found clean."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autod.act.edits import FileChange
from autod.git.ops import commit_changes


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    subprocess.run(["git", "init", "-q", str(r)], check=True)
    git(r, "config", "user.name", "Someone")
    git(r, "config", "user.email", "someone@example.com")
    for name in ("a.py", "b.py", "c.py"):
        (r / name).write_text(f"# {name}\nx = 1\n")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "init")
    return r


def autod_edit(repo: Path, rel: str, new: str) -> FileChange:
    """What the actor does: remember the file as found, write the new content."""
    path = repo / rel
    old = path.read_bytes() if path.exists() else None
    path.write_text(new)
    return FileChange(rel, path, old, new.encode(), 0o644, 1, 1)


def test_a_kept_cycle_is_committed_with_the_summary_and_the_cycle_trailer(repo):
    changes = [autod_edit(repo, "a.py", "# a.py\nx = 2\n"), autod_edit(repo, "b.py", "# b.py\nx = 2\n")]
    (repo / "c.py").write_text("# c.py\nx = 'someone else, not autod'\n")  # not autod's: never committed
    result = commit_changes(repo, changes, "set x to 2\nmore detail", "cyc123")
    assert result["committed"] == git(repo, "rev-parse", "HEAD").strip() and result["skipped"] == []
    assert git(repo, "log", "-1", "--format=%s").strip() == "set x to 2"
    assert git(repo, "log", "-1", "--format=%(trailers:key=Autod-Cycle,valueonly)").strip() == "cyc123"
    assert sorted(git(repo, "show", "--name-only", "--format=", "HEAD").split()) == ["a.py", "b.py"]
    assert git(repo, "status", "--porcelain").strip() == "M c.py"


def test_a_file_someone_else_had_changed_stays_uncommitted_with_autods_edit_in_the_tree(repo):
    (repo / "b.py").write_text("# b.py\nx = 1\ny = 'work in progress'\n")
    changes = [autod_edit(repo, "a.py", "# a.py\nx = 2\n"), autod_edit(repo, "b.py", "# b.py\nx = 3\n")]
    result = commit_changes(repo, changes, "set x", "cyc1")
    assert result["skipped"] == ["b.py"]
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["a.py"]
    assert (repo / "b.py").read_text() == "# b.py\nx = 3\n"
    assert git(repo, "show", "HEAD:b.py") == "# b.py\nx = 1\n"


def test_a_staged_change_by_someone_else_is_not_committed_over(repo):
    (repo / "a.py").write_text("# a.py\nx = 'staged'\n")
    git(repo, "add", "a.py")
    (repo / "a.py").write_text("# a.py\nx = 1\n")  # working tree back to HEAD, index still differs
    change = autod_edit(repo, "a.py", "# a.py\nx = 2\n")
    result = commit_changes(repo, [change], "set x", "cyc1")
    assert result["committed"] is None and result["skipped"] == ["a.py"]
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(repo, "show", ":a.py") == "# a.py\nx = 'staged'\n"  # the index is untouched


def test_untracked_files_and_new_files_are_not_committed(repo):
    (repo / "u.py").write_text("u = 1\n")
    changes = [autod_edit(repo, "u.py", "u = 2\n"), autod_edit(repo, "n.py", "n = 1\n")]
    result = commit_changes(repo, changes, "edit", "cyc1")
    assert result["committed"] is None and result["skipped"] == ["u.py", "n.py"]
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"


def test_a_checkout_whose_files_differ_from_their_blobs_is_left_uncommitted(repo):
    # Comparing through the clean filters would run the repository's filter code (gitsafe): without
    # them a CRLF checkout looks changed, so autod leaves it for the operator to commit.
    (repo / ".gitattributes").write_text("*.txt text eol=crlf\n")
    (repo / "t.txt").write_bytes(b"one\ntwo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "crlf")
    (repo / "t.txt").unlink()
    git(repo, "checkout", "--", "t.txt")
    assert (repo / "t.txt").read_bytes() == b"one\r\ntwo\r\n"  # differs from the blob, yet clean
    change = autod_edit(repo, "t.txt", "one\r\nTWO\r\n")
    result = commit_changes(repo, [change], "shout", "cyc1")
    assert result["committed"] is None and result["skipped"] == ["t.txt"]
    assert (repo / "t.txt").read_bytes() == b"one\r\nTWO\r\n"  # autod's edit stays in the tree


def test_no_identity_configured_commits_as_autod(repo, monkeypatch):
    git(repo, "config", "--unset", "user.email")
    git(repo, "config", "--unset", "user.name")
    monkeypatch.setenv("HOME", str(repo.parent))  # no global identity either
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    result = commit_changes(repo, [autod_edit(repo, "a.py", "x = 5\n")], "five", "cyc1")
    assert result["committed"]
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "autod <autod@localhost>"


def test_a_failed_commit_leaves_the_index_as_it_was(repo):
    git(repo, "config", "user.name", "")  # an empty name with an email: git refuses to commit
    result = commit_changes(repo, [autod_edit(repo, "a.py", "x = 5\n")], "five", "cyc1")
    assert result["committed"] is None and "git commit failed" in str(result["reason"])
    assert git(repo, "diff", "--cached", "--name-only").strip() == ""
    assert git(repo, "status", "--porcelain").strip() == "M a.py"


def test_outside_a_git_repository_nothing_is_committed(tmp_path):
    (tmp_path / "f.py").write_text("x = 1\n")
    result = commit_changes(tmp_path, [autod_edit(tmp_path, "f.py", "x = 2\n")], "s", "c")
    assert result == {"committed": None, "skipped": [], "reason": "not a git repository"}
