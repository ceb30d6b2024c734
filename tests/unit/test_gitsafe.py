"""git as a tool: a repository whose config plants hooks, fsmonitor, filters, diff drivers, an
external diff and a pager (directly or through an included file) gets none of them run by autod."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from autod import gitsafe
from autod.act.edits import FileChange
from autod.gitops import commit_changes
from autod.localize.history import diff_text, recent_history


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def canary_script(path: Path, canary: Path, body: str = "") -> Path:
    path.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {canary}\n{body}")
    path.chmod(0o755)
    return path


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A repo with every code-running git setting planted; returns (repo, canary file)."""
    repo, canary = tmp_path / "repo", tmp_path / "canary.log"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "config", "user.name", "Someone")
    git(repo, "config", "user.email", "someone@example.com")
    (repo / "a.py").write_text("x = 1\n")
    (repo / "b.txt").write_text("b\n")
    (repo / ".gitattributes").write_text("*.py filter=canary diff=canary\n*.txt filter=included\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    tools = tmp_path / "tools"
    tools.mkdir()
    hook = repo / ".git" / "hooks"
    for name in ("post-commit", "pre-commit", "commit-msg", "post-index-change", "reference-transaction"):
        canary_script(hook / name, canary)
    fsmonitor = canary_script(tools / "fsmonitor", canary, "exit 1\n")
    clean = canary_script(tools / "clean", canary, "cat\n")
    textconv = canary_script(tools / "textconv", canary, 'cat "$1"\n')
    extdiff = canary_script(tools / "extdiff", canary)
    pager = canary_script(tools / "pager", canary, "cat\n")
    included = tmp_path / "included.cfg"
    included.write_text(f'[filter "included"]\n\tclean = {clean}\n\tsmudge = {clean}\n\trequired = true\n')
    for key, value in {
        "core.fsmonitor": str(fsmonitor),
        "filter.canary.clean": str(clean),
        "filter.canary.smudge": str(clean),
        "filter.canary.required": "true",
        "diff.canary.textconv": str(textconv),
        "diff.external": str(extdiff),
        "core.pager": str(pager),
        "include.path": str(included),
    }.items():
        git(repo, "config", key, value)
    # make the worktree files stat-dirty so git must look at their content (filters, fsmonitor)
    (repo / "a.py").write_text("x = 2\n")
    (repo / "b.txt").write_text("b2\n")
    canary.unlink(missing_ok=True)
    return repo, canary


def test_a_commit_runs_no_planted_hook_fsmonitor_or_filter(planted):
    repo, canary = planted
    old = b"x = 1\n"
    change = FileChange("a.py", repo / "a.py", old, b"x = 2\n", 0o644, 1, 1)
    result = commit_changes(repo, [change], "set x to 2", "cyc1")
    assert result["committed"], result
    assert not canary.exists(), canary.read_text()
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["a.py"]


def test_the_prompts_diff_runs_no_textconv_external_diff_filter_or_pager(planted):
    repo, canary = planted
    diff = asyncio.run(diff_text(repo, None))
    assert "-x = 1" in diff and "+x = 2" in diff
    assert not canary.exists(), canary.read_text()
    asyncio.run(recent_history(repo, ["a.py", "b.txt"], 5))  # localization's `git log -p` too
    assert not canary.exists(), canary.read_text()


def test_every_subcommand_autod_uses_is_neutralised(planted):
    repo, canary = planted
    for args in (("log", "-p", "-1"), ("rev-parse", "HEAD"), ("hash-object", "--stdin", "--no-filters"),
                 ("diff", "--cached", "--quiet", "HEAD", "--", "a.py"), ("add", "--", "b.txt"),
                 ("reset", "-q", "--", "b.txt")):
        gitsafe.run(repo, *args, input=b"x\n" if "--stdin" in args else None)
    r = gitsafe.run(repo, "check-ignore", "--stdin", "-z", input=b"a.py\0")
    assert r.returncode in (0, 1)
    assert not canary.exists(), canary.read_text()


def test_an_inherited_git_dir_does_not_send_git_elsewhere(planted, tmp_path, monkeypatch):
    repo, _ = planted
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    head = gitsafe.run(repo, "rev-parse", "HEAD").stdout.decode().strip()
    monkeypatch.delenv("GIT_DIR")
    assert head == git(repo, "rev-parse", "HEAD").strip()


def test_driver_names_are_read_with_dots_and_case_and_a_name_with_an_equals_sign_is_refused():
    listing = b"filter.My.Drv.clean\nx\0diff.Tc.textconv\ny\0merge.m.driver\nz\0core.bare\nfalse\0"
    out = gitsafe.driver_overrides(listing)
    assert "filter.My.Drv.clean=" in out and "filter.My.Drv.required=false" in out
    assert "diff.Tc.textconv=" in out and "merge.m.driver=" in out
    with pytest.raises(gitsafe.GitRefused):
        gitsafe.driver_overrides(b"filter.a=b.clean\nevil\0")
