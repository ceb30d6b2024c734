"""What the sandbox mounts comes from the config and autod's own interpreter, never from the workspace;
whatever binds back, autod's own files, the runtime dir and the control socket are hidden again; a
workspace cannot get itself a .git or a .pth that runs outside the sandbox (real bwrap)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from autod.checks import sandbox
from autod.checks.run import run_check
from autod.checks.sandbox import Policy
from autod.config.settings import CheckConfig, load_config

PROBE = (
    "import json, os, sys\n"
    "out = {}\n"
    "for p in sys.argv[1:]:\n"
    "    try:\n"
    "        out[p] = sorted(os.listdir(p)) if os.path.isdir(p) else open(p).read()\n"
    "    except OSError as e:\n"
    "        out[p] = 'refused: ' + type(e).__name__\n"
    "print(json.dumps(out))\n"
)


def run(cfg: CheckConfig, cwd: Path, **kw):
    return asyncio.run(run_check("t", cfg, cwd, **kw))


def probe(ws: Path, paths: list[Path], **kw) -> dict[str, object]:
    (ws / "probe.py").write_text(PROBE)
    line = f"{sys.executable} probe.py {' '.join(map(str, paths))}"
    r = run(CheckConfig(run=line, sandbox="bwrap"), ws, **kw)
    assert r.ok, r.output
    return json.loads(r.output.strip().splitlines()[-1])


@pytest.fixture
def secrets_around(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A credentials dir, a home with a key, a state dir with a db: all outside the workspace."""
    creds, home, state = tmp_path / "creds", tmp_path / "home", tmp_path / "state"
    for d in (creds, home / ".aws", state):
        d.mkdir(parents=True)
    (creds / "llm_api_key").write_text("KEY-CANARY")
    (home / ".aws" / "credentials").write_text("AWS-CANARY")
    (state / "state.db").write_text("STATE-CANARY")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    monkeypatch.setenv("HOME", str(home))
    return {"creds": creds, "home": home, "state": state}


def settings_for(ws: Path, state: Path, **checks: object):
    cfg = ws.parent / "autod.yaml"
    cfg.write_text(json.dumps({"workspace": str(ws), "state_dir": str(state), "checks": checks}))
    return load_config(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["creds", "creds/llm_api_key", "home", "home/.aws/credentials", "state",
                                    "state/state.db"])
def test_a_workspace_venv_python_pointing_into_a_hidden_place_mounts_nothing_and_is_refused(
    tmp_path: Path, secrets_around: dict[str, Path], real_bwrap: None, target: str
) -> None:
    ws = tmp_path / "ws"
    (ws / ".venv" / "bin").mkdir(parents=True)
    first, _, rest = target.partition("/")
    pointed = secrets_around[first] / rest if rest else secrets_around[first]
    os.symlink(pointed, ws / ".venv" / "bin" / "python")
    settings = settings_for(ws, secrets_around["state"])
    # a configured program outside the workspace: the workspace venv's link must not widen its view
    seen = probe(ws, [secrets_around["creds"] / "llm_api_key", secrets_around["home"] / ".aws",
                      secrets_around["state"] / "state.db", pointed], settings=settings)
    assert "CANARY" not in json.dumps(seen), seen
    # and run as the program, the same venv python is refused with what to change, before anything runs
    if pointed.is_file():
        pointed.chmod(0o755)
        r = run(CheckConfig(run="python -c 1", sandbox="bwrap"), ws, settings=settings)
        assert r.exit_code == 126 and r.error is not None
        assert "which the sandbox hides" in r.error and "checks.expose" in r.error
        assert "CANARY" not in r.output


def test_a_shebang_or_symlinked_program_in_the_workspace_is_not_followed_out(
    tmp_path: Path, real_bwrap: None
) -> None:
    hidden = tmp_path / "hidden"  # under /tmp: private in the sandbox, like a home
    (hidden / "bin").mkdir(parents=True)
    (hidden / "lib").mkdir()
    (hidden / "lib" / "secret.txt").write_text("LIB-CANARY")
    interp = hidden / "bin" / "sh"
    interp.write_bytes(Path("/bin/sh").read_bytes())
    interp.chmod(0o755)
    ws = tmp_path / "ws"
    (ws / "ci").mkdir(parents=True)
    script = ws / "ci" / "check.sh"
    script.write_text(f"#!{interp}\ncat {hidden}/lib/secret.txt\n")
    script.chmod(0o755)
    os.symlink(interp, ws / "ci" / "tool")
    for run_line in ("./ci/check.sh", "./ci/tool -c 'cat " + str(hidden / "lib" / "secret.txt") + "'"):
        r = run(CheckConfig(run=run_line, sandbox="bwrap"), ws)
        assert r.exit_code == 126 and "which the sandbox hides" in (r.error or ""), r.output
        assert "LIB-CANARY" not in r.output


@pytest.mark.slow
def test_a_workspace_venv_made_from_autods_own_interpreter_works_with_no_config(
    tmp_path: Path, real_bwrap: None
) -> None:
    ws = tmp_path / "ws"  # under /tmp, like a CI clone
    ws.mkdir()
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(ws / ".venv")], check=True, timeout=120)
    r = run(CheckConfig(run="python -c 'import sys; print(sys.prefix)'", sandbox="bwrap"), ws)
    assert r.ok and r.output.strip() == str(ws / ".venv"), r.output


@pytest.mark.slow
def test_autods_own_files_stay_hidden_whatever_an_exposure_uncovers(
    tmp_path: Path, secrets_around: dict[str, Path], real_bwrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    opt = tmp_path / "opt"  # one tree the operator exposes, holding everything autod owns
    runtime, state, keys, creds = opt / "run", opt / "state", opt / "keys", opt / "creds"
    for d in (runtime, state, keys, creds):
        d.mkdir(parents=True)
    (opt / "tool.txt").write_text("a tool the checks need")
    (state / "state.db").write_text("STATE-CANARY")
    (creds / "llm_api_key").write_text("KEY-CANARY")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(runtime))
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(runtime / "autod.sock"))
    key_file = keys / "llm.key"
    key_file.write_text("KEYFILE-CANARY")
    cfg = opt / "autod.yaml"
    cfg.write_text(json.dumps({
        "workspace": str(ws), "state_dir": str(state),
        "llm": {"api_key_file": str(key_file), "api_key": "CONFIG-CANARY"},
        "checks": {"expose": [str(opt)]},
    }))
    settings = load_config(cfg)
    # the command line names them too (an operator's mistake): still hidden
    named = [creds, creds / "llm_api_key", state, state / "state.db", key_file, cfg, runtime,
             runtime / "autod.sock", keys, opt / "tool.txt"]
    try:
        seen = probe(ws, named, settings=settings)
    finally:
        srv.close()
    assert "CANARY" not in json.dumps(seen), seen
    assert seen[str(runtime)] == [] and seen[str(state)] == [] and seen[str(creds)] == []
    assert seen[str(opt / "tool.txt")] == "a tool the checks need"  # the exposure itself works


def test_the_config_in_the_workspace_is_hidden_from_the_check(tmp_path: Path, real_bwrap: None) -> None:
    ws = tmp_path / "ws"
    (ws / "config").mkdir(parents=True)
    cfg = ws / "config" / "autod.yaml"
    cfg.write_text(json.dumps({"workspace": str(ws), "llm": {"api_key": "CONFIG-CANARY-123"}}))
    seen = probe(ws, [cfg], settings=load_config(cfg))
    assert "CANARY" not in json.dumps(seen) and seen[str(cfg)] in ("", "refused: PermissionError")


def test_a_socket_is_never_bound_back(tmp_path: Path) -> None:
    sock_dir = tmp_path / "sockets"
    sock_dir.mkdir()
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(sock_dir / "s.sock"))
    try:
        table = sandbox.mount_table(tmp_path / "ws", Policy(), expose=[sock_dir / "s.sock"])
        assert str(sock_dir / "s.sock") not in table.argv()
    finally:
        srv.close()


def test_a_workspace_without_git_gets_a_read_only_one_for_the_run_and_none_after(
    tmp_path: Path, real_bwrap: None
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    r = run(CheckConfig(run="sh -c 'git init -q . ; echo x > .git/config; ls -A .git | wc -l'",
                        sandbox="bwrap"), ws)
    assert "Read-only file system" in r.output and r.output.strip().endswith("0")
    assert not (ws / ".git").exists()


def test_the_workspace_venv_is_read_only_so_no_pth_can_run_outside_the_sandbox(
    tmp_path: Path, real_bwrap: None
) -> None:
    ws = tmp_path / "ws"
    site = ws / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (ws / "env2").mkdir()
    (ws / "env2" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script = f"echo 'import os' > {site}/evil.pth; echo x > env2/evil.pth; echo done"
    r = run(CheckConfig(run=f"sh -c \"{script}\"", sandbox="bwrap"), ws)
    assert r.output.count("Read-only file system") == 2, r.output
    assert not (site / "evil.pth").exists() and not (ws / "env2" / "evil.pth").exists()


@pytest.mark.slow
def test_python_module_checks_cannot_be_shadowed_from_the_current_directory(
    tmp_path: Path, real_bwrap: None
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pytest.py").write_text("print('2 passed'); raise SystemExit(0)\n")
    # autod's import guard: the installed pytest runs, the stand-in is never imported
    r = run(CheckConfig(run=f"{sys.executable} -m pytest --version", sandbox="bwrap"), ws)
    assert r.ok and "2 passed" not in r.output and "pytest" in r.output, r.output
    # a Python started isolated loads no guard: the stand-in is refused by name instead
    r = run(CheckConfig(run=f"{sys.executable} -I -m pytest --version", sandbox="bwrap"), ws)
    assert not r.ok and r.error and "2 passed" not in r.output
    assert "pytest.py in the workspace would run instead of the installed `pytest`" in r.error
    (ws / "pytest.py").unlink()
    (ws / "json").mkdir()
    (ws / "json" / "__init__.py").write_text("print('SHADOWED'); raise SystemExit(0)\n")
    r = run(CheckConfig(run=f"{sys.executable} -m json.tool --help", sandbox="bwrap"), ws)
    assert r.ok and "SHADOWED" not in r.output and "usage" in r.output, r.output
    r = run(CheckConfig(run=f"{sys.executable} -I -m json.tool --help", sandbox="bwrap"), ws)
    assert r.error and "json/__init__.py in the workspace" in r.error and "SHADOWED" not in r.output
    # a directory without __init__ is a namespace portion: the installed module wins, the check runs
    (ws / "json" / "__init__.py").unlink()
    r = run(CheckConfig(run=f"{sys.executable} -m json.tool --help", sandbox="bwrap"), ws)
    assert r.ok and "usage" in r.output, r.output


@pytest.mark.slow
def test_a_python_dash_m_check_still_imports_the_project_from_the_current_directory(
    tmp_path: Path, real_bwrap: None
) -> None:
    """A flat layout (the package at the root, not installed) is what most projects' `python -m
    pytest` relies on: the current directory stays on sys.path (PYTHONSAFEPATH broke every such
    project's tests at collection; bench_reallib's parse bugs were all "not reached")."""
    ws = tmp_path / "ws"
    (ws / "mypkg").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "mypkg" / "__init__.py").write_text("def answer():\n    return 42\n")
    (ws / "tests" / "test_it.py").write_text(
        "import mypkg\n\n\ndef test_answer():\n    assert mypkg.answer() == 42\n"
    )
    r = run(CheckConfig(run=f"{sys.executable} -m pytest -q -p no:cacheprovider tests", sandbox="bwrap"), ws)
    assert r.ok, r.output


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["python", "-m", "pytest"], "pytest"),
        (["/x/.venv/bin/python3.12", "-X", "dev", "-m", "pytest"], "pytest"),
        (["python3", "-mpytest"], "pytest"),
        (["python", "-m"], None),
        (["python", "script.py", "-m", "x"], None),
        (["python", "-c", "import x", "-m"], None),
        (["pytest", "-m", "slow"], None),
    ],
)
def test_only_python_dash_m_commands_name_a_module_to_check_for_stand_ins(
    argv: list[str], module: str | None
) -> None:
    from autod.checks.programs import module_run

    assert module_run(argv) == module


def test_config_check_names_a_workspace_venv_the_sandbox_hides_and_checks_expose_mends_it(
    tmp_path: Path, real_bwrap: None
) -> None:
    from autod.daemon.preflight import problems

    other = tmp_path / "pythons" / "3.99"  # another interpreter in a hidden place (/tmp here)
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "python3").write_bytes(Path("/bin/true").read_bytes())
    (other / "bin" / "python3").chmod(0o755)
    ws = tmp_path / "ws"
    (ws / ".venv" / "bin").mkdir(parents=True)
    os.symlink(other / "bin" / "python3", ws / ".venv" / "bin" / "python")
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(json.dumps({"workspace": str(ws), "checks": {"tests": {"run": "python -m pytest"}}}))
    (found,) = problems(load_config(cfg))
    assert found.error and found.key == ("checks", "tests", "run")
    assert "which the sandbox hides" in found.message and "checks.expose" in found.message
    r = run(CheckConfig(run="python -m pytest", sandbox="bwrap"), ws, settings=load_config(cfg))
    assert r.exit_code == 126 and r.error is not None
    assert r.error.split(": ", 1)[1] == found.message.split(": ", 1)[1]  # the same words, another name
    cfg.write_text(json.dumps({"workspace": str(ws), "checks": {"expose": [str(other)],
                                                                "tests": {"run": "python -m pytest"}}}))
    assert problems(load_config(cfg)) == []
    r = run(CheckConfig(run="python -m pytest", sandbox="bwrap"), ws, settings=load_config(cfg))
    assert r.ok and r.error is None, r.output  # /bin/true stands in for that python


@pytest.mark.parametrize("path", ["/root", "/home", "/", "/tmp", "/var", "/run/user", "relative/bin"])
def test_checks_expose_refuses_homes_and_shared_places_naming_file_line_and_field(
    tmp_path: Path, path: str
) -> None:
    from autod.config.settings import ConfigError

    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {tmp_path}\nchecks:\n  expose: [{path}]\n")
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert str(err.value).startswith(f"{cfg}:3: checks.expose")


def test_a_check_that_writes_files_which_run_code_later_is_reported_loudly(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    ws = tmp_path / "ws"
    ws.mkdir()
    with capture_logs() as logs:
        script = "echo x > .envrc; mkdir -p .vscode; echo {} > .vscode/tasks.json; echo ok"
        r = run(CheckConfig(run=f"sh -c '{script}'", sandbox="off"), ws)
    assert r.ok
    (line,) = [x for x in logs if x["event"] == "check.wrote_code_runners"]
    assert line["log_level"] == "error" and line["files"] == [".envrc", ".vscode/tasks.json"]


def test_a_copy_mounted_at_the_workspace_shows_the_copy_with_the_real_git_and_venv_read_only(
    tmp_path: Path, real_bwrap: None
) -> None:
    ws, copy = tmp_path / "ws", tmp_path / "state" / "mirror"
    for root, text in ((ws, "real"), (copy, "copy")):
        (root / "src").mkdir(parents=True)
        (root / "src" / "x.txt").write_text(text)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".venv" / "bin").mkdir(parents=True)
    script = "cat src/x.txt; echo new > src/made.txt; echo x > .git/evil; echo x > .venv/evil; pwd"
    r = run(CheckConfig(run=f"sh -c '{script}'", sandbox="bwrap"), copy, mount_at=ws, bind_back=[".venv"])
    assert r.output.startswith("copy"), r.output
    assert r.output.count("Read-only file system") == 2 and r.output.rstrip().endswith(str(ws))
    assert (copy / "src" / "made.txt").exists() and not (ws / "src" / "made.txt").exists()
    assert not (ws / ".git" / "evil").exists() and not (ws / ".venv" / "evil").exists()


# -- a workspace outside every hidden root, the state dir inside it (autod's default `.autod`) ------


@pytest.fixture
def plain_place() -> Path:
    """A directory outside /tmp, /var/tmp, /root, /home and /run, where operators keep services' trees
    (/srv, /opt): no hidden root above the workspace changes the order of the mounts."""
    import shutil
    import tempfile

    for parent in ("/srv", "/opt", "/var/lib", "/mnt"):
        if os.path.isdir(parent) and os.access(parent, os.W_OK):
            place = Path(tempfile.mkdtemp(prefix="autod-mounts-", dir=parent))
            yield place
            shutil.rmtree(place, ignore_errors=True)
            return
    pytest.skip("no writable directory outside the hidden roots (this test runs as root in CI)")


def test_a_later_bind_above_an_earlier_hide_uncovers_it_and_it_is_hidden_again(tmp_path: Path) -> None:
    from autod.checks.mounts import MountTable

    ws, state = tmp_path / "ws", tmp_path / "ws" / ".autod"
    state.mkdir(parents=True)
    m = MountTable()
    m.hide(state)
    assert m.covering(state) == "tmpfs"
    m.bind(ws, writable=True)
    assert m.covering(state) == "rw"  # the workspace's bind shows the host's .autod again
    m.hide(state)
    assert m.covering(state) == "tmpfs"
    argv = m.argv()
    # the first, covered empty dir is not remounted (it is no mount point any more): one remount
    assert argv.count("--remount-ro") == 1 and argv[-2:] == ["--remount-ro", str(state)]


def test_default_state_dir_inside_a_workspace_outside_hidden_roots(
    plain_place: Path, real_bwrap: None
) -> None:
    """autod's default state dir is `<workspace>/.autod`; a workspace in /srv or /opt must run its
    checks, and they must not see the state dir (found by bench_realllm run from /work: every check
    failed with bwrap's "Can't remount readonly ... .autod")."""
    ws = plain_place / "ws"
    state = ws / ".autod"
    state.mkdir(parents=True)
    (state / "state.db").write_text("STATE-CANARY")
    seen = probe(ws, [state], settings=settings_for(ws, state))
    assert seen[str(state)] == []


def test_a_mirror_binds_back_read_only_only_inside_the_workspace_and_git_once_from_the_real_tree(
    tmp_path: Path,
) -> None:
    root = Path(os.path.realpath(tmp_path))
    ws, copy = root / "ws", root / "state" / "mirror"
    (ws / "web" / "node_modules").mkdir(parents=True)
    (ws / ".git").mkdir()
    (root / "up").mkdir()
    copy.mkdir(parents=True)
    table = sandbox.mount_table(copy, Policy(), mount_at=ws, bind_back=["web/node_modules", ".git", "../up"])
    ops = [(op.kind, op.dest, op.source) for op in table.ops]
    assert ("ro", ws / "web" / "node_modules", ws / "web" / "node_modules") in ops
    assert ("rw", ws, copy) in ops
    assert not any("up" in op.dest.parts for op in table.ops)
    assert [(kind, source) for kind, dest, source in ops if dest == ws / ".git"] == [("ro", ws / ".git")]


# -- the mount table's rules, as data (no bwrap runs) ------------------------------------------


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/a/b", "/a/b", True),
        ("/a/b/c", "/a/b", True),
        ("/a/bc", "/a/b", False),  # a sibling whose name starts the same is not below
        ("/a", "/a/b", False),
        ("/srv/x", "/", True),  # everything is below the root
        ("/", "/", True),
    ],
)
def test_under_is_the_path_or_below_it_never_a_sibling_with_the_same_prefix(
    path: str, root: str, inside: bool
) -> None:
    from autod.checks.mounts import under

    assert under(Path(path), Path(root)) is inside


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("/", False),  # the whole host
        ("/tmp", False),  # the check's private scratch space, replaced by the host's
        ("/var/tmp", False),
        ("/srv/home", False),  # a home (in `never`)
        ("/srv", False),  # a directory above one
        ("/srv/home/.pyenv", True),  # inside a home: the thing a check needs
        ("/opt/tool", True),
    ],
)
def test_exposable_refuses_the_root_the_private_tmp_dirs_and_homes_and_what_is_above_them(
    path: str, ok: bool
) -> None:
    from autod.checks.mounts import exposable

    assert exposable(Path(path), [Path("/root"), Path("/srv/home")]) is ok


def test_an_exposure_of_a_home_a_place_above_one_or_the_private_tmp_binds_nothing(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path))
    home, ws = root / "srv" / "svc", root / "ws"
    (home / ".pyenv").mkdir(parents=True)
    ws.mkdir()
    policy = Policy(homes=(home,))
    for exposed in (home, root / "srv", Path("/tmp"), Path("/var/tmp")):
        table = sandbox.mount_table(ws, policy, expose=[exposed])
        assert not [op for op in table.ops[1:] if op.kind == "ro" and op.dest == exposed], exposed
    # what may be exposed is, read-only: the test's place is hidden (it is below /tmp)
    table = sandbox.mount_table(ws, policy, expose=[home / ".pyenv"])
    assert [op.kind for op in table.ops if op.dest == home / ".pyenv"] == ["ro"]


@pytest.mark.parametrize(
    ("home", "path", "refused"),
    [
        ("/srv/svc", "/srv/svc", True),  # the daemon's home, wherever it is
        ("/srv/svc", "/srv", True),  # a directory above it
        ("/srv/svc", "/srv/svc/.pyenv/versions/3.12.1", False),
        ("/srv/svc", "/srv/other", False),
        (None, "/srv/svc", False),  # no $HOME: nothing more refused, and no crash
        ("/", "/srv/svc", False),  # HOME=/ is not a home that makes every path one
        ("relative", "/srv/svc", False),
        (None, "/etc/autod/keys", True),  # autod's config directory, and anything in it
        (None, "/run/user/1000/pythons", True),
    ],
)
def test_expose_error_refuses_the_daemons_home_and_what_is_inside_run_or_etc_autod(
    monkeypatch: pytest.MonkeyPatch, home: str | None, path: str, refused: bool
) -> None:
    from autod.checks.mounts import expose_error

    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home)
    assert (expose_error(Path(path)) is not None) is refused


def test_a_symlinked_venv_is_not_the_workspaces_own_and_one_odd_entry_does_not_end_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autod.checks import mounts

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "pyvenv.cfg").write_text("home = /usr/bin\n")
    ws = tmp_path / "ws"
    (ws / "venv").mkdir(parents=True)
    (ws / "aaa.txt").write_text("a file, listed first")
    os.symlink(elsewhere, ws / ".venv")
    os.symlink(elsewhere, ws / "env2")

    class Vanished:  # an entry removed between the listing and the look at it
        name, path = "gone", str(ws / "gone")

        def is_dir(self, follow_symlinks: bool = True) -> bool:
            raise FileNotFoundError(self.path)

    real_scandir = os.scandir

    def files_first(path):
        entries = sorted(real_scandir(path), key=lambda e: (e.is_dir(follow_symlinks=False), e.name))
        return [Vanished(), *entries]

    monkeypatch.setattr(mounts.os, "scandir", files_first)
    assert mounts.workspace_venvs(ws) == [ws / "venv"]


def test_the_root_is_read_only_and_a_hide_is_made_once(tmp_path: Path) -> None:
    from autod.checks.mounts import MountTable

    d, f = tmp_path / "d", tmp_path / "key"
    d.mkdir()
    f.write_text("k")
    m = MountTable()
    assert m.covering(Path("/usr")) == "ro" and not m.hidden(Path("/usr"))
    for _ in range(2):
        m.hide(d)
        m.hide(f)
    assert [(op.kind, op.dest) for op in m.ops[1:]] == [("tmpfs", d), ("null", f)]
    assert m.hidden(d) and m.hidden(f)


@pytest.mark.parametrize("writable", [True, False])
def test_a_bind_below_a_hidden_dir_is_hidden_again_once_and_a_file_bound_back_too(
    tmp_path: Path, writable: bool
) -> None:
    from autod.checks.mounts import MountTable

    state, key = tmp_path / "state", tmp_path / "key"
    (state / "scratch").mkdir(parents=True)
    key.write_text("k")
    m = MountTable()
    m.hide(state)
    m.hide(key)
    m.bind(state / "scratch", writable=writable)
    m.bind(key, writable=writable)
    assert m.covering(state / "scratch") == ("rw" if writable else "ro") and m.covering(key) != "null"
    for _ in range(2):  # hidden again by the first call; the second has nothing left to hide
        m.hide(state)
        m.hide(key)
    assert m.covering(state / "scratch") == "tmpfs" and m.covering(key) == "null"
    assert [op.dest for op in m.ops].count(state) == 2 and [op.dest for op in m.ops].count(key) == 3


def test_an_empty_dir_covered_by_the_very_next_bind_is_not_remounted(tmp_path: Path) -> None:
    from autod.checks.mounts import MountTable

    ws, state = tmp_path / "ws", tmp_path / "ws" / ".autod"
    state.mkdir(parents=True)
    m = MountTable()
    m.hide(state)
    m.bind(ws, writable=True)
    # bwrap cannot remount what is no longer a mount point: the check would not start
    assert "--remount-ro" not in m.argv()
