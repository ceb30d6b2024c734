"""The trust boundary on files: one set of rules for what a plan writes and what a prompt reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autod.config.settings import load_config
from autod.errors import PlanRejected
from autod.safety.boundary import Boundary, own_files

DENY = [".env", "**/*.pem", "**/id_rsa*", "**/secrets/**"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("x = 1\n")
    (root / ".env").write_text("TOKEN=hunter2\n")
    (root / "deploy").mkdir()
    (root / "deploy" / "id_rsa").write_text("-----BEGIN KEY-----\n")
    (root / "config").mkdir()
    (root / "config" / "autod.yaml").write_text(f"workspace: {root}\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    return root


def test_reads_follow_the_deny_globs_as_writes_do(ws: Path) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    assert b.readable("src/app.py") == "src/app.py"
    assert b.readable(ws / "src" / "app.py") == "src/app.py"  # an absolute traceback frame
    for denied in (".env", ws / ".env", "deploy/id_rsa", ".git/config", "../outside.py", "/etc/passwd"):
        assert b.readable(denied) is None, denied
    assert b.read_text(".env") is None
    assert b.read_text("src/app.py") == "x = 1\n"


def test_a_symlink_cannot_launder_a_denied_file_into_a_read(ws: Path) -> None:
    os.symlink(ws / ".env", ws / "src" / "notes.txt")
    os.symlink("/etc/hostname", ws / "src" / "host.txt")
    b = Boundary(ws, ws / ".autod", DENY)
    assert b.readable("src/notes.txt") is None
    assert b.readable("src/host.txt") is None


def test_the_state_dir_is_neither_read_nor_written(ws: Path) -> None:
    state = ws / ".autod"
    (state / "logs").mkdir(parents=True)
    (state / "logs" / "autod.jsonl").write_text("{}\n")
    b = Boundary(ws, state, DENY)
    assert b.readable(".autod/logs/autod.jsonl") is None
    with pytest.raises(PlanRejected, match="state dir"):
        b.resolve(".autod/logs/autod.jsonl")


def test_the_loaded_config_inside_the_workspace_is_never_a_plan_target(ws: Path, monkeypatch) -> None:
    monkeypatch.chdir(ws)
    settings = load_config(ws / "config" / "autod.yaml")
    b = Boundary.for_settings(settings)
    with pytest.raises(PlanRejected, match="autod's own files"):
        b.resolve("config/autod.yaml")
    assert b.readable("config/autod.yaml") is None
    # any file on the config search path counts, loaded or not
    with pytest.raises(PlanRejected, match="autod's own files"):
        b.resolve("autod.yaml")
    assert b.resolve("src/app.py")[0] == "src/app.py"


def test_own_files_never_swallow_the_workspace(ws: Path) -> None:
    # an "own" directory that contains the workspace (e.g. a repo checked out under /opt/autod) would
    # otherwise deny every path
    b = Boundary(ws, ws / ".autod", DENY, own=[ws.parent, ws])
    assert b.resolve("src/app.py")[0] == "src/app.py"


def test_own_files_name_the_config_state_and_credentials(ws: Path, monkeypatch, tmp_path: Path) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    settings = load_config(ws / "config" / "autod.yaml")
    own = own_files(settings)
    assert (ws / "config" / "autod.yaml").resolve() in own
    assert settings.state_path.resolve() in own
    assert creds.resolve() in own


def test_a_diff_loses_the_sections_of_files_that_may_not_be_read(ws: Path) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    diff = (
        "diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n"
        "@@ -1 +1 @@\n-x = 1\n+x = 2\n"
        "diff --git a/.env b/.env\n--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-TOKEN=hunter2\n+TOKEN=hunter3\n"
        'diff --git "a/deploy/id_rsa" "b/deploy/id_rsa"\n+-----BEGIN KEY-----\n'
        "diff --git a/my file.py b/my file.py\n+ok\n"
        "diff --git garbage\n+hidden\n"
    )
    out = b.filter_diff(diff)
    assert "x = 2" in out and "+ok" in out
    assert "hunter" not in out and "BEGIN KEY" not in out and "hidden" not in out


def test_debug_context_reads_no_file_the_boundary_refuses(ws: Path) -> None:
    import asyncio

    from autod.config.settings import Settings
    from autod.localize.context import localize

    (ws / "src" / "secrets").mkdir()
    (ws / "src" / "secrets" / "vault.py").write_text("def load():\n    return 'VAULT-CANARY'\n")
    (ws / "src" / "app.py").write_text("from secrets.vault import load\n\n\ndef run():\n    return load()\n")
    b = Boundary(ws, ws / ".autod", DENY)
    git_config = ws / ".git" / "config"
    text = (
        'Traceback (most recent call last):\n  File ".env", line 1, in <module>\n'
        '  File "deploy/id_rsa", line 1, in <module>\n'
        f'  File "{git_config}", line 1, in <module>\n'
        '  File "src/secrets/vault.py", line 2, in load\n'
        '  File "src/app.py", line 5, in run\nRuntimeError\n'
    )
    locations = [{"path": ".env", "line": 1}, {"path": "src/app.py", "line": 5}]
    found = asyncio.run(
        localize(Settings(workspace=ws), b, text=text, locations=locations, last_green=None,
                 budget_tokens=4000)
    )
    shown = found.code + found.outline + found.diff
    assert "return load()" in shown
    for leak in ("hunter2", "BEGIN KEY", "[core]", "VAULT-CANARY"):
        assert leak not in shown
    assert {e["path"] for e in found.entries} == {"src/app.py"}


def test_dot_dot_is_refused_by_its_own_rule(ws: Path) -> None:
    # Asserted by the rule's message, not by the path: "src/../src/app.py" stays inside the workspace,
    # so without the rule nothing else would refuse it (and judges compare paths as strings).
    b = Boundary(ws, ws / ".autod", DENY)
    for rel in ("../x", "a/../../x", "src/../src/app.py"):
        with pytest.raises(PlanRejected, match=r"'\.\.' is not allowed in paths"):
            b.resolve(rel)


def test_an_empty_path_is_refused_as_empty(ws: Path) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    for rel in ("", "   "):
        with pytest.raises(PlanRejected, match=r"^edit path is empty$"):
            b.resolve(rel)


def test_a_symlink_in_the_workspace_cannot_launder_autods_own_file_into_a_read(ws: Path) -> None:
    own = ws / "config" / "autod.yaml"
    os.symlink(own, ws / "src" / "settings.txt")
    b = Boundary(ws, ws / ".autod", DENY, own=[own])
    assert b.readable("config/autod.yaml") is None
    assert b.readable("src/settings.txt") is None  # its own path passes, its target does not
    assert b.read_text("src/settings.txt") is None


def test_a_nul_byte_in_a_read_path_is_refused_not_raised(ws: Path) -> None:
    assert Boundary(ws, ws / ".autod", DENY).readable("src/app.py\x00.txt") is None


def test_read_text_refuses_directories_and_files_over_the_cap_and_replaces_bad_utf8(ws: Path) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    assert b.read_text("src") is None
    (ws / "src" / "latin.txt").write_bytes(b"caf\xe9\n")
    assert b.read_text("src/latin.txt") == "caf\ufffd\n"
    assert b.read_text("src/latin.txt", max_bytes=5) == "caf\ufffd\n"  # exactly the cap: read whole
    assert b.read_text("src/latin.txt", max_bytes=4) is None


def test_the_operators_no_write_and_allow_globs_reach_the_boundary(ws: Path, monkeypatch) -> None:
    monkeypatch.chdir(ws)
    cfg = ws / "config" / "autod.yaml"
    cfg.write_text(
        f"workspace: {ws}\nlimits:\n  no_write_globs: ['deploy/*.sh']\n  allow_globs: ['.env.example']\n"
    )
    b = Boundary.for_settings(load_config(cfg))
    with pytest.raises(PlanRejected, match=r"limits\.no_write_globs"):
        b.resolve("deploy/release.sh")
    assert b.resolve(".env.example")[0] == ".env.example"
    with pytest.raises(PlanRejected, match="a credential file is never read or edited"):
        b.resolve(".env.local")


def test_own_files_name_autod_config_from_the_environment_and_the_key_file(
    ws: Path, monkeypatch, tmp_path: Path
) -> None:
    key = tmp_path / "llm.key"
    elsewhere = tmp_path / "other.yaml"
    monkeypatch.setenv("AUTOD_CONFIG", str(elsewhere))
    cfg = ws / "config" / "autod.yaml"
    cfg.write_text(f"workspace: {ws}\nllm:\n  api_key_file: {key}\n")
    own = own_files(load_config(cfg))
    assert elsewhere.resolve() in own
    assert key.resolve() in own


def test_glob_match_empty_patterns_match_nothing_and_a_leading_doublestar_matches_the_top() -> None:
    from autod.safety.boundary import glob_match

    assert not glob_match("", "src/app.py") and not glob_match("/", "src/app.py")
    assert glob_match("**/secrets", "secrets/vault.py")
    assert glob_match("**/secrets", "src/secrets/vault.py")


def test_a_diff_keeps_allowed_sections_byte_for_byte_and_judges_both_sides_of_a_rename(ws: Path) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    allowed = (
        "diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n"
        "@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    )
    renamed = "diff --git a/src/old.py b/src/new.py\nsimilarity index 90%\n+kept\n"
    assert b.filter_diff(allowed + renamed) == allowed + renamed
    to_denied = "diff --git a/src/app.py b/.env\n+TOKEN=hunter2\n"
    quoted_from_denied = 'diff --git "a/deploy/id_rsa\\tx" "b/src/plain\\tname.py"\n+-----BEGIN KEY-----\n'
    no_second_path = "diff --git a/lonely\n+hidden\n"
    out = b.filter_diff(to_denied + quoted_from_denied + no_second_path + allowed)
    assert out == allowed


def test_glob_character_classes_stay_in_one_component_and_a_lone_bracket_is_literal() -> None:
    from autod.safety.boundary import glob_match

    assert glob_match("*.[ch]", "src/x.c") and glob_match("*.[ch]", "src/x.h")
    assert not glob_match("*.[ch]", "src/x.o")
    assert glob_match("[!a]*.py", "b.py") and not glob_match("[!a]*.py", "a.py")
    assert glob_match("[]]x", "]x") and not glob_match("[]]x", "ax")
    assert glob_match("[!]]x", "ax") and not glob_match("[!]]x", "]x")
    assert glob_match("id[x", "id[x") and not glob_match("id[x", "idx")
    assert glob_match("id[_-]rsa", "id_rsa") and glob_match("id[_-]rsa", "id-rsa")
    assert not glob_match("a[/]b/**", "a/b/c")  # a class never matches the separator
    assert glob_match("key[0-9].pem", "key7.pem") and not glob_match("key[0-9].pem", "keyx.pem")


def test_glob_question_mark_and_a_double_star_inside_a_name() -> None:
    from autod.safety.boundary import glob_match

    assert glob_match("id_rsa?", "deploy/id_rsa1") and not glob_match("id_rsa?", "deploy/id_rsa12")
    assert glob_match("a?b/**", "axb/c") and not glob_match("a?b/**", "a/b/c")
    assert glob_match("src/**.py", "src/a/b.py") and not glob_match("src/**.py", "src/a/xpy")


def test_globs_ignore_case_and_match_names_holding_a_newline() -> None:
    from autod.safety.boundary import glob_match

    assert glob_match(".env", "deploy/.ENV") and glob_match("**/secrets/**", "Secrets/vault.py")
    assert glob_match("build/**", "build/a\nb")  # a planted name with a newline is still inside
    assert glob_match("**/secrets", "x\ny/secrets")


def test_config_inside_the_workspace_is_named_with_how_to_move_it(ws: Path, tmp_path: Path) -> None:
    from autod.config.settings import Settings
    from autod.safety.boundary import config_inside_workspace

    inside = load_config(ws / "config" / "autod.yaml")
    warning = config_inside_workspace(inside)
    assert warning is not None and str((ws / "config" / "autod.yaml").resolve()) in warning
    assert "/etc/autod/autod.yaml" in warning
    outside = tmp_path / "autod.yaml"
    outside.write_text(f"workspace: {ws}\n")
    assert config_inside_workspace(load_config(outside)) is None
    assert config_inside_workspace(Settings(workspace=ws)) is None  # no config file at all


def test_one_own_path_that_cannot_be_resolved_does_not_drop_the_others(ws: Path) -> None:
    from autod.config.settings import LLMConfig, Settings

    # the schema refuses a NUL in a path (load_config: exit 78); built past it, own_files still copes
    llm = LLMConfig.model_construct(**{**LLMConfig().__dict__, "api_key_file": ws / "key\x00file"})
    settings = Settings(workspace=ws, llm=llm)
    own = own_files(settings)
    assert Path("~/.config/autod").expanduser().resolve() in own  # listed after the bad one
    assert all("\x00" not in str(p) for p in own)


def test_binary_is_judged_by_the_first_8_kib(ws: Path) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    (ws / "src" / "blob.bin").write_bytes(b"a" * 8191 + b"\x00")
    (ws / "src" / "late.txt").write_bytes(b"a" * 8192 + b"\x00tail")
    assert b.read_text("src/blob.bin") is None
    assert b.read_text("src/late.txt") == "a" * 8192 + "\x00tail"


def test_a_quoted_diff_header_of_a_readable_file_is_kept(ws: Path) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    quoted = 'diff --git "a/src/caf\\303\\251.py" "b/src/caf\\303\\251.py"\n+x = 2\n'
    assert b.filter_diff(quoted) == quoted


@pytest.mark.parametrize(
    "header",
    ["a/.env b/notes.txt", "a/notes.txt b/.env", "a/src/a b/x.py b/deploy/id_rsa", "a/deploy/id_rsa b/z"],
)
def test_an_unquoted_rename_from_or_to_a_secret_is_dropped(ws: Path, header: str) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    assert b.filter_diff(f"diff --git {header}\n+TOKEN=hunter2\n") == ""


def test_a_name_holding_b_slash_is_split_where_both_sides_agree_and_a_rename_judged_by_both(ws: Path) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    whole = "diff --git a/.env b/ok b/.env b/ok\n+x = 1\n"  # the file `ok` in a directory `.env b`
    assert b.readable(".env b/ok") == ".env b/ok" and b.filter_diff(whole) == whole
    anchored = Boundary(ws, ws / ".autod", ["deploy/*"])
    assert anchored.filter_diff("diff --git a/notes b/deploy/key\n+secret\n") == ""
    assert anchored.filter_diff("diff --git a/deploy/key b/notes\n+secret\n") == ""


def test_a_path_in_a_message_is_printable_and_cut_past_its_limit() -> None:
    from autod.safety.boundary import _SHOWN_PATH, show_path

    assert show_path("src/\x1b[2Jx.py") == "src/?[2Jx.py"
    assert show_path(None) == "None" and show_path(7) == "7"
    whole = "p" * _SHOWN_PATH
    assert show_path(whole) == whole
    assert show_path(whole + "q") == whole + "..."


def test_what_comes_before_the_first_diff_header_is_kept(ws: Path) -> None:
    b = Boundary(ws, ws / ".autod", DENY)
    commit = "commit 1a2b3c4 2024-05-01\n    fix the parser\n\n"  # a `git log -p` entry's own lines
    section = "diff --git a/src/app.py b/src/app.py\n+x = 2\n"
    assert b.filter_diff(commit + section) == commit + section
