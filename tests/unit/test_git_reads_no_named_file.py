"""autod's git reads no file the repository's config names (a committed `.gitconfig` it includes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from autod.git import safe as gitsafe


def repo_including(tmp_path: Path, config: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "a.txt").write_text("a\n")
    (ws / ".gitconfig").write_text(config)
    commit = ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam"]
    run = ["add", "-A"], [*commit, "init"], ["config", "include.path", "../.gitconfig"]
    for args in run:
        subprocess.run(["git", "-C", str(ws), *args], check=True, capture_output=True)
    (ws / "a.txt").write_text("b\n")
    subprocess.run(["git", "-C", str(ws), *commit, "change a"], check=True, capture_output=True)
    return ws


def test_a_mailmap_file_the_repository_names_never_reaches_autods_git_output(tmp_path: Path) -> None:
    secret = tmp_path / "llm_api_key"
    secret.write_text("sk-SECRET <t@example.com>\n")  # read as a mailmap, it renames the author
    ws = repo_including(tmp_path, f"[mailmap]\n\tfile = {secret}\n[log]\n\tmailmap = true\n")
    out = gitsafe.run(ws, "log", "-1", "--format=%aN %aE").stdout.decode()
    assert out.strip() == "t t@example.com"


def test_a_patch_carries_no_signature_or_header_the_repository_config_names(tmp_path: Path) -> None:
    secret = tmp_path / "llm_api_key"
    secret.write_text("sk-SECRET\n")
    ws = repo_including(tmp_path, f"[format]\n\tsignatureFile = {secret}\n\theaders = X-Planted: yes\n")
    patch = gitsafe.run(ws, "format-patch", "-1", "--stdout", *gitsafe.PATCH_FLAGS, "HEAD").stdout.decode()
    assert "Subject: [PATCH] change a" in patch
    assert "sk-SECRET" not in patch and "X-Planted" not in patch
