"""git as a tool: a repository whose config plants hooks, fsmonitor, filters, diff drivers, an
external diff and a pager (directly or through an included file) gets none of them run by autod."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from autod.act.edits import FileChange
from autod.git import safe as gitsafe
from autod.git.ops import commit_changes
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


# -- which repository: autod's own decision, never one a check planted --------------------------


def _repo_with_secret_outside(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace repo, and a host directory holding a token (standing in for ~)."""
    host = tmp_path / "host"
    host.mkdir()
    (host / ".git-credentials").write_text("https://me:HOST-TOKEN-CANARY@example.com\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    return ws, host


def _planted_git_init(ws: Path, worktree: Path) -> None:
    """What a check did: `git init`, commit nothing, point core.worktree at the host directory."""
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    git(ws, "config", "core.worktree", str(worktree))


def test_a_planted_core_worktree_never_sends_autods_git_to_host_files(tmp_path: Path) -> None:
    ws, host = _repo_with_secret_outside(tmp_path)
    _planted_git_init(ws, host)
    with pytest.raises(gitsafe.GitRefused, match=r"core\.worktree names"):
        gitsafe.run(ws, "diff", "--no-color")
    assert asyncio.run(diff_text(ws, None)) == ""  # the prompt's diff: nothing, and no host file


def test_a_gitfile_pointing_at_another_repository_is_not_trusted(tmp_path: Path) -> None:
    ws, host = _repo_with_secret_outside(tmp_path)
    subprocess.run(["git", "init", "-q", str(host)], check=True)
    git(host, "add", "-A")
    git(host, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "dotfiles")
    (ws / ".git").write_text(f"gitdir: {host / '.git'}\n")
    with pytest.raises(gitsafe.GitRefused, match="not a worktree or submodule"):
        gitsafe.run(ws, "log", "-p")
    out = asyncio.run(recent_history(ws, [".git-credentials"], 5))
    assert "CANARY" not in out


@pytest.mark.parametrize("kind", ["symlink", "empty placeholder", "gitfile into the workspace"])
def test_a_dot_git_that_is_not_a_repository_of_this_workspace_is_refused(tmp_path: Path, kind: str) -> None:
    ws, host = _repo_with_secret_outside(tmp_path)
    if kind == "symlink":
        subprocess.run(["git", "init", "-q", str(host)], check=True)
        (ws / ".git").symlink_to(host / ".git")
    elif kind == "empty placeholder":
        (ws / ".git").mkdir()
    else:
        subprocess.run(["git", "init", "-q", "--separate-git-dir", str(ws / "inner"), str(ws)], check=True)
    with pytest.raises(gitsafe.GitRefused):
        gitsafe.repository(ws)


def test_a_linked_worktree_and_a_submodule_are_trusted(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    (main / "f.txt").write_text("f\n")
    git(main, "add", "-A")
    git(main, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "init")
    wt = tmp_path / "wt"
    git(main, "worktree", "add", "-q", str(wt))
    assert gitsafe.run(wt, "rev-parse", "HEAD").returncode == 0
    sup = tmp_path / "super"
    sup.mkdir()
    subprocess.run(["git", "init", "-q", str(sup)], check=True)
    subprocess.run(["git", "-C", str(sup), "-c", "protocol.file.allow=always", "submodule", "add", "-q",
                    str(main), "sub"], check=True, capture_output=True)
    assert gitsafe.run(sup / "sub", "rev-parse", "HEAD").returncode == 0


def test_a_planted_signature_check_runs_no_gpg_program(planted, tmp_path: Path) -> None:
    repo, canary = planted
    gpg = canary_script(tmp_path / "tools" / "gpg", canary)
    tree, head = git(repo, "rev-parse", "HEAD^{tree}").strip(), git(repo, "rev-parse", "HEAD").strip()
    signed = (
        f"tree {tree}\nparent {head}\nauthor t <t@x> 0 +0000\ncommitter t <t@x> 0 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\n\nsigned\n"
    )
    commit = subprocess.run(["git", "-C", str(repo), "hash-object", "-t", "commit", "-w", "--stdin"],
                            input=signed, text=True, capture_output=True, check=True).stdout.strip()
    git(repo, "update-ref", "HEAD", commit)
    git(repo, "config", "log.showSignature", "true")
    git(repo, "config", "gpg.program", str(gpg))
    canary.unlink(missing_ok=True)
    subprocess.run(["git", "-C", str(repo), "log", "-1"], capture_output=True)  # plain git runs it ...
    assert canary.exists()
    canary.unlink()
    gitsafe.run(repo, "log", "-1")  # ... autod's does not
    assert not canary.exists()
