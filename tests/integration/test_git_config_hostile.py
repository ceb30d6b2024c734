"""A committed `.gitconfig` the repository includes names a secret file for every key that reads one:
through `autod run`, no delivery path (a commit in the working tree and its undo, a branch pushed, a
patch in the outbox) carries a byte of it, nor a header it plants."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from daemon import FIX_PLAN, Autod, base_config, git, run_cli, write_config

pytestmark = pytest.mark.slow


def hostile_include(repo: Path, secret_file: Path, marker: str) -> str:
    """Commit the hostile `.gitconfig`, include it; the commit's id (what came before is the project's)."""
    keys = {
        "format": {"signatureFile": secret_file, "headers": f"X-Planted: {marker}",
                   "from": f"Planted <{marker}@example.com>", "subjectPrefix": marker, "notes": "true"},
        "commit": {"template": secret_file},
        "core": {"excludesFile": secret_file, "attributesFile": secret_file},
        "mailmap": {"file": secret_file},
        "diff": {"orderFile": secret_file},
        "http": {"cookieFile": secret_file},
    }
    text = "".join(
        f"[{sec}]\n" + "".join(f"\t{k} = {v}\n" for k, v in items.items()) for sec, items in keys.items()
    )
    (repo / ".gitconfig").write_text(text)
    git(repo, "add", ".gitconfig")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "project git config")
    git(repo, "config", "include.path", "../.gitconfig")  # the project convention: include it
    return git(repo, "rev-parse", "HEAD").strip()


def everything_delivered(repo: Path, state: Path, remote: Path | None, since: str) -> str:
    """Every commit autod made (raw, with its diff) on every ref here and on the remote, every outbox
    file, the log."""
    def raw(git_dir: Path) -> str:
        argv = ["git", "--git-dir", str(git_dir), "log", "--all", "--format=raw", "-p", "--not", since]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    out = [raw(repo / ".git")]
    if remote is not None:
        out.append(raw(remote))
    out += [p.read_text(errors="replace") for p in state.rglob("outbox/*") if p.is_file()]
    out.append((state / "logs" / "autod.jsonl").read_text(errors="replace"))
    return "\n".join(out)


@pytest.mark.parametrize("path", ["worktree-commit-and-undo", "branch-pushed", "patch"])
def test_no_file_the_repository_config_names_reaches_a_delivery(
    tmp_path: Path, calc_repo: Path, scripted_llm, path: str
) -> None:
    marker = f"planted{uuid.uuid4().hex[:10]}"
    secret_file = tmp_path / "creds" / "llm_api_key"
    secret_file.parent.mkdir()
    secret = f"sk-{uuid.uuid4().hex}"
    secret_file.write_text(f"{secret}\n")
    since = hostile_include(calc_repo, secret_file, marker)
    remote: Path | None = None
    overrides: dict[str, Any] = {"state_dir": str(tmp_path / "state")}
    if path == "worktree-commit-and-undo":
        overrides["git"] = {"commit": True}
    elif path == "branch-pushed":
        remote = tmp_path / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        git(calc_repo, "remote", "add", "origin", str(remote))
        overrides["modes"] = {"auto-debug": {"enabled": True, "delivery": "branch"}}
        overrides["delivery"] = {"push": "origin"}
    else:
        overrides["modes"] = {"auto-debug": {"enabled": True, "delivery": "patch"}}
    cfg = base_config(calc_repo, **overrides)
    cfg["llm"]["base_url"] = scripted_llm.base_url
    cfg["checks"]["tests"]["coverage"] = False
    scripted_llm.push_plan(FIX_PLAN)
    config = write_config(tmp_path / "autod.yaml", cfg)
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
    try:
        (r,) = d.wait_reflections(1, timeout=150)
        assert r["status"] == "fixed", r
        if path == "worktree-commit-and-undo":
            assert r["commit"], r
            done = run_cli("undo", r["cycle_id"], "--reason", "take it back", "-c", str(config), env=d.env)
            assert done.returncode == 0, done.stderr
        elif path == "branch-pushed":
            assert r["delivery"]["outcome"] == "delivered" and r["delivery"]["push"]["ok"] is True, r
        else:
            assert list((tmp_path / "state").rglob("outbox/*.patch")), r
    finally:
        assert d.stop() == 0
    delivered = everything_delivered(calc_repo, tmp_path / "state", remote, since)
    assert secret not in delivered
    assert marker not in delivered
